package collector

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// member collects the selections of one cluster. It resolves each selection against the member's
// discovery (which version and resource serve the kind, whether it is namespaced), starts and stops
// one collection per servable selection, and rediscovers periodically so a CRD installed later is
// picked up and one that goes away is reported.
type member struct {
	cluster  registry.Cluster
	c        *Collector
	log      *slog.Logger
	dynamic  dynamic.Interface
	discover discovery.DiscoveryInterface
	// raw lists pages as bytes, so a page is never decoded whole (see listWatch).
	raw rest.Interface
	// openapi reads the member's OpenAPI v3 documents (see openapi.go).
	openapi openapi.ClientWithContext

	kick chan struct{} // the selections changed: reconcile now

	mu         sync.Mutex
	selections map[registry.SelectionKey]registry.Selection
	statuses   map[registry.SelectionKey]*statusEntry
	running    map[registry.SelectionKey]*running
	resolved   map[registry.SelectionKey]resolved // last discovery result, kept for PURGE
	// identity is the uid of the member's kube-system namespace, "" while unknown (identity.go).
	identity string
}

type running struct {
	res    resolved
	secret bool
	gate   *gate // closed by stop: cancels the collection and shuts it out of the stream
	done   chan struct{}
}

type resolved struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	// singular, shortNames and categories are what discovery says besides; they go into the
	// ledger's record for the query API's discovery and do not make a collection restart.
	singular               string
	shortNames, categories []string
}

// sameCollection says two resolutions collect the same thing.
func (r resolved) sameCollection(o resolved) bool {
	return r.gvr == o.gvr && r.kind == o.kind && r.namespaced == o.namespaced
}

// record is the ledger's record of a selection resolved to r.
func (r resolved) record(k registry.SelectionKey) registry.SelectionRecord {
	return registry.SelectionRecord{Group: r.gvr.Group, Version: r.gvr.Version, Resource: r.gvr.Resource, Kind: k.Kind,
		Namespace: k.Namespace, Namespaced: r.namespaced, Singular: r.singular, ShortNames: r.shortNames, Categories: r.categories}
}

func newMember(c *Collector, cp registry.ClusterPlan) (*member, error) {
	cfg, err := cp.Cluster.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = c.opts.QPS, c.opts.Burst
	cfg.UserAgent = "kubesearch-collector"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cp.Cluster.Name, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cp.Cluster.Name, err)
	}
	m := &member{
		cluster: cp.Cluster, c: c, log: c.log.With("cluster", cp.Cluster.Name),
		dynamic: dyn, discover: disc, raw: disc.RESTClient(), openapi: openapi.NewClientWithContext(disc.RESTClient()),
		kick:       make(chan struct{}, 1),
		selections: map[registry.SelectionKey]registry.Selection{},
		statuses:   map[registry.SelectionKey]*statusEntry{},
		running:    map[registry.SelectionKey]*running{},
		resolved:   map[registry.SelectionKey]resolved{},
	}
	m.setSelections(cp.Selections)
	return m, nil
}

// setSelections replaces what the member should collect; the next reconcile starts and stops
// collections to match. Status entries of selections that stay are kept.
func (m *member) setSelections(sels []registry.Selection) {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := map[registry.SelectionKey]registry.Selection{}
	for _, s := range sels {
		next[s.SelectionKey] = s
		if st, ok := m.statuses[s.SelectionKey]; ok {
			st.mu.Lock()
			st.registries = s.Registries()
			st.mu.Unlock()
			continue
		}
		m.statuses[s.SelectionKey] = newStatusEntry(registry.ResourceStatus{
			Cluster: m.cluster.Name, Group: s.Group, Version: s.Version, Kind: s.Kind, Namespace: s.Namespace,
		}, s.Registries())
	}
	for k := range m.statuses {
		if _, ok := next[k]; !ok {
			delete(m.statuses, k)
		}
	}
	m.selections = next
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// run reconciles until ctx is done, then stops every collection and waits for them.
func (m *member) run(ctx context.Context) {
	defer m.stopAll()
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Cap: time.Minute, Steps: 1 << 30}
	for {
		delay := m.c.opts.DiscoveryInterval
		if err := m.reconcile(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			delay = backoff.Step()
			m.log.Warn("cannot reconcile the member's collections, retrying", "retryIn", delay.Round(time.Millisecond), "err", err)
		} else {
			backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Cap: time.Minute, Steps: 1 << 30}
			if err := m.syncOpenAPI(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("cannot relay the member's OpenAPI documents; retrying at the next discovery", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-time.After(delay):
		}
	}
}

// reconcile resolves every selection through discovery and starts, restarts or stops collections.
func (m *member) reconcile(ctx context.Context) error {
	_, lists, err := m.discover.ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		err = fmt.Errorf("discovery: %w", err)
		m.mu.Lock()
		for k, st := range m.statuses {
			// A collection that already runs keeps its own state: its reflector reports its failures.
			if _, ok := m.running[k]; !ok {
				st.failed(err)
			}
		}
		m.mu.Unlock()
		return err
	}
	// A partial discovery failure (one aggregated API down) still resolves everything else.
	served := indexResources(lists)
	m.readIdentity(ctx)

	starts := m.settle(served)
	// The ledger learns of a collection before it publishes anything, so a restart purges it once it
	// is no longer selected. Written without m.mu: it waits for Kafka, and /status must answer.
	for _, st := range starts {
		if err := m.c.ledger.add(ctx, m.cluster.Name, st.entry(m.cluster.Name)); err != nil {
			return fmt.Errorf("record %s in the collector ledger before collecting it: %w", st.key, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, st := range starts {
		sel, selected := m.selections[st.key]
		if _, running := m.running[st.key]; !selected || running || sel.SecretData != st.sel.SecretData || !m.resolved[st.key].sameCollection(st.res) {
			continue // changed meanwhile: the next reconcile decides (setSelections kicked it)
		}
		m.start(ctx, st.key, sel, st.res)
	}
	return nil
}

// toStart is a collection that settle found missing.
type toStart struct {
	key registry.SelectionKey
	sel registry.Selection
	res resolved
}

func (t toStart) entry(cluster string) registry.SelectionRecord { return t.res.record(t.key) }

// settle resolves every selection against what the member serves, stops the collections that must
// stop (unservable, unselected, or resolved differently) and returns those to start.
func (m *member) settle(served map[groupKind][]servedResource) []toStart {
	m.mu.Lock()
	defer m.mu.Unlock()
	var starts []toStart
	for k, sel := range m.selections {
		res, reason := resolve(served, sel)
		st := m.statuses[k]
		r, isRunning := m.running[k]
		if reason != "" {
			if isRunning {
				m.stop(k, r)
			}
			st.failed(fmt.Errorf("%s", reason))
			continue
		}
		m.resolved[k] = res
		if isRunning && r.res.sameCollection(res) && r.secret == sel.SecretData {
			continue
		}
		if isRunning {
			m.stop(k, r) // the served version changed, or redaction did: a new list, a new epoch
		}
		starts = append(starts, toStart{key: k, sel: sel, res: res})
	}
	for k, r := range m.running {
		if _, ok := m.selections[k]; !ok {
			m.stop(k, r)
		}
	}
	return starts
}

func (m *member) start(ctx context.Context, k registry.SelectionKey, sel registry.Selection, res resolved) {
	st := m.statuses[k]
	st.update(func(r *registry.ResourceStatus) { r.Version, r.Resource = res.gvr.Version, res.gvr.Resource })
	sc := scope{cluster: m.cluster.Name, gvr: res.gvr, kind: res.kind, namespace: sel.Namespace,
		redact: sel.IsSecret() && !sel.SecretData}
	cctx, cancel := context.WithCancel(ctx)
	col := &collection{
		scope: sc, client: m.dynamic, raw: m.raw, status: st, pageSize: m.c.opts.PageSize, metrics: m.c.metrics,
		log: m.log.With("gvr", res.gvr.String(), "namespace", sel.Namespace),
	}
	g := newGate(m.c.pub, cancel)
	col.store = newStore(cctx, sc, g, m.c.epochs, st)
	r := &running{res: res, secret: sel.SecretData, gate: g, done: make(chan struct{})}
	m.running[k] = r
	go func() {
		defer close(r.done)
		col.run(cctx)
	}()
}

// stop cancels a collection and waits for it; m.mu is held. Once it returns, nothing of the
// collection is published any more (see gate).
func (m *member) stop(k registry.SelectionKey, r *running) {
	r.gate.close()
	<-r.done
	delete(m.running, k)
}

// remove stops collecting the selections keys at once, before the caller publishes their PURGEs: a
// collection must not publish after its PURGE, and waiting for the next reconcile (a discovery round
// trip, never if discovery fails) would let it. Their resolved versions are kept for entry.
func (m *member) remove(keys []registry.SelectionKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		if r, ok := m.running[k]; ok {
			m.stop(k, r)
		}
		delete(m.selections, k)
		delete(m.statuses, k)
	}
}

func (m *member) stopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, r := range m.running {
		m.stop(k, r)
	}
}

// entry is what the ledger would hold for a selection: the resource it last resolved to, when it
// did; for the PURGE of a selection the ledger does not know (collected by a build without one).
func (m *member) entry(k registry.SelectionKey, version string) registry.SelectionRecord {
	m.mu.Lock()
	res, ok := m.resolved[k]
	m.mu.Unlock()
	if ok {
		return res.record(k)
	}
	return registry.SelectionRecord{Group: k.Group, Version: version, Kind: k.Kind, Namespace: k.Namespace}
}

// refused records an object Kafka will never take in the status of the collection that published it.
func (m *member) refused(group, resource, namespace, name, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, r := range m.running {
		if r.res.gvr.Group == group && r.res.gvr.Resource == resource && (k.Namespace == "" || k.Namespace == namespace) {
			key := name
			if namespace != "" {
				key = namespace + "/" + name
			}
			m.statuses[k].refused(key, reason)
			return
		}
	}
}

func (m *member) rows() []registry.ResourceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []registry.ResourceStatus
	for _, st := range m.statuses {
		out = append(out, st.rows()...)
	}
	return out
}

func (m *member) unsettled() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, st := range m.statuses {
		if !st.isSettled() {
			out = append(out, m.cluster.Name+"/"+k.String())
		}
	}
	return out
}

// servedResource is what discovery says about one resource in one group/version.
type servedResource struct {
	gv       schema.GroupVersion
	resource metav1.APIResource
}

type groupKind struct{ group, kind string }

// indexResources maps group/kind to the resources serving it, in discovery order (the group's
// preferred version first).
func indexResources(lists []*metav1.APIResourceList) map[groupKind][]servedResource {
	out := map[groupKind][]servedResource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") { // subresources
				continue
			}
			k := groupKind{gv.Group, r.Kind}
			out[k] = append(out[k], servedResource{gv: gv, resource: r})
		}
	}
	return out
}

// resolve picks the served version of a selection: the selector's own when the member serves it, else
// the first one discovery lists. The reason is set when the member cannot serve the selection; it
// reads like kubectl's error for an unknown type.
func resolve(served map[groupKind][]servedResource, sel registry.Selection) (resolved, string) {
	cands := served[groupKind{sel.Group, sel.Kind}]
	if len(cands) == 0 {
		gk := schema.GroupKind{Group: sel.Group, Kind: sel.Kind}
		return resolved{}, fmt.Sprintf("the server doesn't have a resource type %s", gk)
	}
	pick := cands[0]
	for _, c := range cands {
		if c.gv.Version == sel.Version {
			pick = c
			break
		}
	}
	if !hasVerbs(pick.resource.Verbs, "list", "watch") {
		return resolved{}, fmt.Sprintf("resource %s in %s does not support list and watch", pick.resource.Name, pick.gv)
	}
	if sel.Namespace != "" && !pick.resource.Namespaced {
		return resolved{}, fmt.Sprintf("resource %s is cluster-scoped: it cannot be selected in namespace %s", pick.resource.Name, sel.Namespace)
	}
	return resolved{gvr: pick.gv.WithResource(pick.resource.Name), kind: pick.resource.Kind, namespaced: pick.resource.Namespaced,
		singular: pick.resource.SingularName, shortNames: pick.resource.ShortNames, categories: pick.resource.Categories}, ""
}

func hasVerbs(have metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
