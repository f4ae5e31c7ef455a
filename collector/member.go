package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	discover discoverer
	// raw lists pages as bytes, so a page is never decoded whole (see listWatch).
	raw rest.Interface
	// openapi reads the member's OpenAPI v3 documents (see openapi.go).
	openapi openapi.ClientWithContext

	kick chan struct{} // the selections changed, or a collection met a 404: reconcile now

	// reachable says the last discovery reached the member (owned by run's goroutine). Until one
	// did, since the start or an outage, a partial discovery is no evidence that a kind is gone: a
	// kube-apiserver that is starting serves discovery before every group is back.
	reachable bool

	mu         sync.Mutex
	selections map[registry.SelectionKey]registry.Selection
	statuses   map[registry.SelectionKey]*statusEntry
	running    map[registry.SelectionKey]*running
	resolved   map[registry.SelectionKey]resolved // last discovery result, kept for PURGE
	// identity is the uid of the member's kube-system namespace, "" while unknown (identity.go).
	identity string
}

// discoverer is what a member asks of its discovery client.
type discoverer interface {
	ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error)
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

// reconcile resolves every selection through discovery and starts, restarts or stops collections,
// and purges the selections the member authoritatively no longer serves (see purgeNotServed).
func (m *member) reconcile(ctx context.Context) error {
	_, lists, err := m.discover.ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		m.reachable = false
		err = fmt.Errorf("discovery: %w", err)
		m.mu.Lock()
		for k, st := range m.statuses {
			// A collection that already runs keeps its own state: its reflector reports its failures.
			if _, ok := m.running[k]; !ok && !st.isPurged() {
				st.failed(err)
			}
		}
		m.mu.Unlock()
		return err
	}
	// A partial discovery failure (one aggregated API down) still resolves everything else.
	d := newDiscovered(lists, err, m.reachable)
	m.reachable = true
	m.readIdentity(ctx)

	starts, gone := m.settle(d)
	// Purged before anything starts, and without m.mu: a PURGE waits for Kafka, and /status must
	// answer. A purge that failed is tried again by the next reconcile; the rest go on meanwhile.
	purgeErr := m.purgeNotServed(ctx, gone)
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
	return purgeErr
}

// discovered is one discovery of the member that reached it: what it serves, and how far the
// absence of a kind from it is evidence that the member does not serve the kind.
type discovered struct {
	served map[groupKind][]servedResource
	// failed is, by API group, why discovering it failed: a kind missing from such a group may well
	// be served. partial, when set, is why discovery was incomplete with no group named; then no
	// group's answer is trusted.
	failed  map[string]error
	partial error
	// conclusive says an absence from a group whose discovery did not fail is evidence: discovery
	// was complete, or only partial with the member reached by the discovery before it too.
	conclusive bool
}

func newDiscovered(lists []*metav1.APIResourceList, err error, reachedBefore bool) discovered {
	d := discovered{served: indexResources(lists), conclusive: err == nil}
	var gdf *discovery.ErrGroupDiscoveryFailed
	switch {
	case err == nil:
	case errors.As(err, &gdf):
		d.failed = map[string]error{}
		for gv, gerr := range gdf.Groups {
			d.failed[gv.Group] = fmt.Errorf("discovery of %s failed: %w", gv, gerr)
		}
		d.conclusive = reachedBefore
	default:
		d.partial = fmt.Errorf("discovery incomplete: %w", err)
	}
	return d
}

// unsure is why discovery's answer for group is no evidence of what the member serves in it; nil
// when discovery answered for the group.
func (d discovered) unsure(group string) error {
	if d.partial != nil {
		return d.partial
	}
	return d.failed[group]
}

// toStart is a collection that settle found missing.
type toStart struct {
	key registry.SelectionKey
	sel registry.Selection
	res resolved
}

func (t toStart) entry(cluster string) registry.SelectionRecord { return t.res.record(t.key) }

// notServed is a selection the member's discovery says it does not serve (why, in kubectl's words).
type notServed struct {
	key registry.SelectionKey
	why string
}

// settle resolves every selection against what the member serves, stops the collections that must
// stop (unservable, unselected, or resolved differently) and returns those to start, and those the
// member does not serve by a discovery conclusive enough to purge them on.
func (m *member) settle(d discovered) (starts []toStart, gone []notServed) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, sel := range m.selections {
		res, reason := resolve(d.served, sel)
		st := m.statuses[k]
		r, isRunning := m.running[k]
		if reason != "" {
			if why := d.unsure(sel.Group); why != nil {
				// The group's discovery failed: the kind may be served as before. A running
				// collection goes on (its reflector reports its own failures); it is not stopped
				// nor called unserved on no evidence.
				if !isRunning && !st.isPurged() {
					st.failed(why)
				}
				continue
			}
			if isRunning {
				m.stop(k, r)
			}
			if !st.isPurged() {
				st.failed(fmt.Errorf("%s", reason))
			}
			if d.conclusive {
				gone = append(gone, notServed{key: k, why: reason})
			}
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
	return starts, gone
}

// purgeNotServed purges the selections of gone that the ledger says may have documents, each once
// the member confirms it: a list of the resource last collected answers 404. That list is what
// tells a kind that is gone from a kube-apiserver that is starting, whose discovery may not show its
// CRDs yet but which answers 503, not 404, until every path is installed; and it keeps a CRD being
// deleted collected while its objects finalize (discovery and lists still serve it; each deletion
// arrives as a DELETED), so the PURGE comes only after the last of them. The PURGE is the one a
// selection leaving every registry gets (Collector.purge), after its collection stopped (settle).
// An error is returned only when the PURGE could not be published; the ledger then keeps the
// selection and the next reconcile tries again.
func (m *member) purgeNotServed(ctx context.Context, gone []notServed) error {
	for _, g := range gone {
		e, known := m.c.ledger.entry(m.cluster.Name, g.key)
		if !known || e.Resource == "" {
			continue // nothing of it may be indexed: never collected, or purged already
		}
		m.mu.Lock()
		st := m.statuses[g.key]
		m.mu.Unlock()
		if st == nil {
			continue // no longer selected: apply purges it
		}
		if err := m.confirmGone(ctx, e); err != nil {
			m.log.Warn("discovery no longer lists a selected kind, but the member does not confirm it is gone: not purged",
				"selection", g.key.String(), "resource", e.Resource, "err", err)
			st.failed(fmt.Errorf("%s; not purged: %w", g.why, err))
			continue
		}
		if err := m.c.purge(ctx, m.cluster.Name, []registry.SelectionRecord{e}, "the member no longer serves the selected kind"); err != nil {
			st.failed(fmt.Errorf("%s; purge pending: %w", g.why, err))
			return fmt.Errorf("purge %s, no longer served: %w", g.key, err)
		}
		st.purged(g.why)
	}
	return nil
}

// confirmGone asks the member for the resource e was collected from; nil when it answers 404.
func (m *member) confirmGone(ctx context.Context, e registry.SelectionRecord) error {
	gvr := schema.GroupVersionResource{Group: e.Group, Version: e.Version, Resource: e.Resource}
	_, err := m.raw.Get().AbsPath(resourcePath(gvr, e.Namespace)...).Param("limit", "1").DoRaw(ctx)
	switch {
	case err == nil:
		return fmt.Errorf("list %s still answers", gvr)
	case apierrors.IsNotFound(err):
		return nil
	default:
		return fmt.Errorf("list %s: %w", gvr, err)
	}
}

// rediscover makes run reconcile now: a collection's list answered 404, so its kind may be gone
// (a CRD deleted), and the member's discovery says whether it is.
func (m *member) rediscover() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *member) start(ctx context.Context, k registry.SelectionKey, sel registry.Selection, res resolved) {
	st := m.statuses[k]
	st.update(func(r *registry.ResourceStatus) {
		r.Version, r.Resource, r.PurgedAt = res.gvr.Version, res.gvr.Resource, nil // served again: listed in a new epoch
	})
	sc := scope{cluster: m.cluster.Name, gvr: res.gvr, kind: res.kind, namespace: sel.Namespace,
		redact: sel.IsSecret() && !sel.SecretData}
	cctx, cancel := context.WithCancel(ctx)
	col := &collection{
		scope: sc, client: m.dynamic, raw: m.raw, status: st, pageSize: m.c.opts.PageSize, metrics: m.c.metrics,
		log: m.log.With("gvr", res.gvr.String(), "namespace", sel.Namespace), notFound: m.rediscover,
	}
	g := newGate(m.c.pub, cancel)
	col.store = newStore(cctx, sc, g, m.c.epochsOf(m.cluster.Name), st)
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
