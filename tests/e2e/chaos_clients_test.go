//go:build e2e && chaos

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/queryapi"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// The churn: every chaosPeriod, a burst of chaosBurst changes in every member (creations, updates
// and deletions of each kind, a Deployment's scaling making its ReplicaSet create or delete Pods),
// then quiet until the next burst. The comparisons run in the quiet part, so "the index equals the
// members" is exact while the members keep changing at a fixed rate; a time to converge is
// measured to within the period.
const (
	chaosPeriod = 4 * time.Second
	chaosBurst  = 8
	chaosPool   = 6 // objects of each kind kept per member, about
)

type chaosChurn struct {
	env *testbed.Env
	ns  string
	dyn map[string]dynamic.Interface
	// gate: a burst holds it, a comparison reads under it.
	gate sync.RWMutex

	mu     sync.Mutex
	seq    int
	live   map[string]map[schema.GroupVersionResource][]string // cluster → kind → names
	writes []chaosWrite
	ok     int
	failed int
	// burstsDone holds when each burst started, once it has ended: a convergence counts only once a
	// burst begun after its reference time is in, so an idle moment does not pass for one.
	burstsDone []time.Time
}

// chaosWrite is one acknowledged change: for the timeline's lag (when an informer was told of it).
type chaosWrite struct {
	at           time.Time
	cluster, uid string
	gvr          schema.GroupVersionResource
	rv           string // "" for a deletion
}

type churnCounts struct{ ok, failed int }

func newChaosChurn(t *testing.T, env *testbed.Env, ns string) *chaosChurn {
	t.Helper()
	ch := &chaosChurn{env: env, ns: ns, dyn: map[string]dynamic.Interface{}, live: map[string]map[schema.GroupVersionResource][]string{}}
	for _, cluster := range env.Clusters {
		cfg := env.RESTConfig(t, cluster)
		ch.dyn[cluster] = dynamic.NewForConfigOrDie(cfg)
		ch.live[cluster] = map[schema.GroupVersionResource][]string{}
		createNamespace(t, kubernetes.NewForConfigOrDie(cfg), ns)
	}
	t.Cleanup(func() {
		for _, d := range ch.dyn {
			_ = d.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	return ch
}

func (ch *chaosChurn) counts() churnCounts {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return churnCounts{ch.ok, ch.failed}
}

func (ch *chaosChurn) writesSnapshot() []chaosWrite {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return slices.Clone(ch.writes)
}

// seed creates chaosPool objects of every kind in every member.
func (ch *chaosChurn) seed(t *testing.T) {
	t.Helper()
	for _, cluster := range ch.env.Clusters {
		for _, gvr := range chaosKinds {
			for range chaosPool {
				if err := ch.create(t.Context(), cluster, gvr); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// run makes a burst every period until the test ends.
func (ch *chaosChurn) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(chaosPeriod)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			ch.burst(ctx)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// burstSince says whether a burst begun after t has ended.
func (ch *chaosChurn) burstSince(t time.Time) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return len(ch.burstsDone) > 0 && ch.burstsDone[len(ch.burstsDone)-1].After(t)
}

func (ch *chaosChurn) burst(ctx context.Context) {
	ch.gate.Lock()
	defer ch.gate.Unlock()
	began := time.Now()
	defer func() {
		ch.mu.Lock()
		ch.burstsDone = append(ch.burstsDone, began)
		ch.mu.Unlock()
	}()
	// Bounded: a hung member kube-apiserver answers nothing.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, cluster := range ch.env.Clusters {
		wg.Go(func() {
			for i := range chaosBurst {
				gvr := chaosKinds[(i+rand.IntN(len(chaosKinds)))%len(chaosKinds)]
				ch.mu.Lock()
				n := len(ch.live[cluster][gvr])
				ch.mu.Unlock()
				var err error
				switch r := rand.IntN(10); {
				case n < chaosPool/2 || (r < 3 && n < 2*chaosPool):
					err = ch.create(ctx, cluster, gvr)
				case r < 7:
					err = ch.update(ctx, cluster, gvr)
				default:
					err = ch.remove(ctx, cluster, gvr)
				}
				ch.mu.Lock()
				if err != nil {
					ch.failed++
				} else {
					ch.ok++
				}
				ch.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func (ch *chaosChurn) object(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "labels": map[string]any{"chaos.kubesearch.io/churn": "true"}}
	var obj map[string]any
	switch gvr {
	case gvrConfigMaps:
		obj = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": strings.Repeat("v", 200)}}
	case gvrWidgets:
		obj = map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "spec": map[string]any{"size": "large"}}
	case gvrPods:
		obj = map[string]any{"apiVersion": "v1", "kind": "Pod", "spec": map[string]any{
			"containers": []any{map[string]any{"name": "main", "image": "busybox:1.36"}}}}
	case gvrDeployments:
		labels := map[string]any{"app": name}
		obj = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{
			"replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "image": "nginx:1.27"}}}}}}
	}
	obj["metadata"] = meta
	return &unstructured.Unstructured{Object: obj}
}

func (ch *chaosChurn) create(ctx context.Context, cluster string, gvr schema.GroupVersionResource) error {
	ch.mu.Lock()
	ch.seq++
	name := fmt.Sprintf("%s-%d", strings.TrimSuffix(gvr.Resource, "s"), ch.seq)
	ch.mu.Unlock()
	got, err := ch.dyn[cluster].Resource(gvr).Namespace(ch.ns).Create(ctx, ch.object(gvr, name), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%s: create %s %s: %w", cluster, gvr.Resource, name, err)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.live[cluster][gvr] = append(ch.live[cluster][gvr], name)
	ch.writes = append(ch.writes, chaosWrite{at: time.Now(), cluster: cluster, uid: string(got.GetUID()), gvr: gvr, rv: got.GetResourceVersion()})
	return nil
}

func (ch *chaosChurn) pick(cluster string, gvr schema.GroupVersionResource) (string, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	names := ch.live[cluster][gvr]
	if len(names) == 0 {
		return "", false
	}
	return names[rand.IntN(len(names))], true
}

func (ch *chaosChurn) update(ctx context.Context, cluster string, gvr schema.GroupVersionResource) error {
	name, ok := ch.pick(cluster, gvr)
	if !ok {
		return nil
	}
	ch.mu.Lock()
	ch.seq++
	step := ch.seq
	ch.mu.Unlock()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"chaos.kubesearch.io/step":"%d"}}}`, step)
	if gvr == gvrDeployments {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{"chaos.kubesearch.io/step":"%d"}},"spec":{"replicas":%d}}`, step, 1+step%2)
	}
	got, err := ch.dyn[cluster].Resource(gvr).Namespace(ch.ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("%s: update %s %s: %w", cluster, gvr.Resource, name, err)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.writes = append(ch.writes, chaosWrite{at: time.Now(), cluster: cluster, uid: string(got.GetUID()), gvr: gvr, rv: got.GetResourceVersion()})
	return nil
}

func (ch *chaosChurn) remove(ctx context.Context, cluster string, gvr schema.GroupVersionResource) error {
	name, ok := ch.pick(cluster, gvr)
	if !ok {
		return nil
	}
	// At once: a Pod's grace period would keep it (terminating) past the burst.
	if err := ch.dyn[cluster].Resource(gvr).Namespace(ch.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		return fmt.Errorf("%s: delete %s %s: %w", cluster, gvr.Resource, name, err)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.live[cluster][gvr] = slices.DeleteFunc(ch.live[cluster][gvr], func(n string) bool { return n == name })
	return nil
}

// chaosWatcher is a client-go informer on one member's view of the facade, through the balancer,
// with every (uid, resourceVersion) it was told of and when.
type chaosWatcher struct {
	agent, cluster string
	gvr            schema.GroupVersionResource
	inf            cache.SharedIndexInformer

	mu      sync.Mutex
	told    map[string]time.Time // uid/rv → first told
	again   []time.Time          // a (uid, rv) told once more
	deleted map[string]bool      // uid
}

func startChaosWatcher(t *testing.T, lb *chaosProxy, cluster string, gvr schema.GroupVersionResource, ns string) *chaosWatcher {
	t.Helper()
	w := &chaosWatcher{agent: "chaos-" + cluster + "-" + gvr.Resource, cluster: cluster, gvr: gvr, told: map[string]time.Time{}, deleted: map[string]bool{}}
	cfg := facadeConfig(lb.base, queryapi.ClustersPrefix+cluster)
	cfg.UserAgent = w.agent
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), 0, ns, nil)
	w.inf = factory.ForResource(gvr).Informer()
	tell := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		key := string(u.GetUID()) + "/" + u.GetResourceVersion()
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, seen := w.told[key]; seen {
			w.again = append(w.again, time.Now())
			return
		}
		w.told[key] = time.Now()
	}
	if _, err := w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    tell,
		UpdateFunc: func(_, obj any) { tell(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				w.mu.Lock()
				w.deleted[string(u.GetUID())] = true
				w.mu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), w.inf.HasSynced) {
		t.Fatalf("%s never synced; a streaming list of its view answers: %s", w.agent, peek(lb.base+queryapi.ClustersPrefix+cluster+
			apiPath(gvr)+"/namespaces/"+ns+"/"+gvr.Resource+
			"?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"))
	}
	return w
}

func (w *chaosWatcher) state() map[string]string {
	out := map[string]string{}
	for _, o := range w.inf.GetStore().List() {
		u := o.(*unstructured.Unstructured)
		out[string(u.GetUID())] = u.GetResourceVersion()
	}
	return out
}

func (w *chaosWatcher) toldAt(uid, rv string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.told[uid+"/"+rv]
	return at, ok
}

// gaps counts the changes of the event stream in w's view, observed by a collector within
// [from, to], that w was never told of although it did not list after them: a watch that resumed
// past them. The stream's changes, not the churn's writes: a collector's list (after a takeover or
// a restart) legitimately folds the changes it did not watch into one. Events of an epoch older
// than one the pair's stream already carried are not changes either: a replica that was hung
// publishes what its watch had buffered once it runs again, after its successor's list, and every
// reader drops them (make chaos, collector-a SIGSTOP: 35 such events counted as gaps before this).
func (w *chaosWatcher) gaps(events []*envelope.Event, lb *chaosProxy, ns string, from, to time.Time) (int, []string) {
	lists := lb.listsOf(w.agent, time.Time{}, time.Now())
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	var ex []string
	newest := int64(0) // the pair's newest epoch so far; one pair is one partition, read in order
	for _, ev := range events {
		if ev.Cluster != w.cluster || ev.Resource != w.gvr.Resource || ev.Group != w.gvr.Group {
			continue
		}
		fenced := ev.Epoch < newest
		newest = max(newest, ev.Epoch)
		if fenced || ev.Namespace != ns || ev.ObservedAt.Before(from) || ev.ObservedAt.After(to) {
			continue
		}
		if slices.ContainsFunc(lists, func(l time.Time) bool { return !l.Before(ev.ObservedAt) }) {
			continue // a list after it told the informer the object's state since
		}
		var missed bool
		switch ev.Type {
		case envelope.Added, envelope.Modified:
			_, told := w.told[ev.UID+"/"+ev.ResourceVersion]
			missed = !told
		case envelope.Deleted:
			missed = !w.deleted[ev.UID]
		}
		if missed {
			n++
			if len(ex) < 3 {
				ex = append(ex, fmt.Sprintf("%s: %s %s/%s uid %s rv %s epoch %d observed %s", w.agent, ev.Type, ev.Namespace, ev.Name, ev.UID,
					ev.ResourceVersion, ev.Epoch, ev.ObservedAt.Format("15:04:05.000")))
			}
		}
	}
	return n, ex
}

func (w *chaosWatcher) duplicates(from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.again {
		if !at.Before(from) && !at.After(to) {
			n++
		}
	}
	return n
}

// chaosProxy is the query APIs' load balancer: round robin over the replicas its health check
// (/readyz every 500 ms, 1 s timeout, out after 2 failures) finds ready. A replica found unready
// has its open requests, watches included, cut, as balancers do that close connections on a health
// failure (a hung replica would otherwise hold its watches silent for as long as it hangs); a
// request whose connection to a replica is refused is sent to the other, as balancers retry a
// failed connect.
type chaosProxy struct {
	base    string
	targets []*url.URL
	tr      *http.Transport

	mu      sync.Mutex
	healthy []bool
	next    int
	open    map[*chaosRequest]struct{}
	lists   map[string][]time.Time // agent → LISTs and streaming lists
}

type chaosRequest struct {
	replica int
	cancel  context.CancelFunc
}

type chaosRequestKey struct{}

func newChaosProxy(t *testing.T, addrs []string) *chaosProxy {
	t.Helper()
	lb := &chaosProxy{tr: &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second},
		open: map[*chaosRequest]struct{}{}, lists: map[string][]time.Time{}}
	for _, a := range addrs {
		lb.targets = append(lb.targets, &url.URL{Scheme: "http", Host: a})
		lb.healthy = append(lb.healthy, true)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			rec := pr.In.Context().Value(chaosRequestKey{}).(*chaosRequest)
			pr.SetURL(lb.targets[rec.replica])
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.Header().Set("X-Chaos-Balancer", "cut")
			w.WriteHeader(http.StatusBadGateway)
		},
		FlushInterval: -1,
		Transport:     roundTripFunc(lb.roundTrip),
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		rec := &chaosRequest{replica: lb.pick(), cancel: cancel}
		lb.mu.Lock()
		lb.open[rec] = struct{}{}
		q := r.URL.Query()
		watch := boolQuery(q.Get("watch"))
		if (!watch || boolQuery(q.Get("sendInitialEvents"))) && slices.ContainsFunc(chaosKinds, func(g schema.GroupVersionResource) bool { return path.Base(r.URL.Path) == g.Resource }) {
			lb.lists[r.UserAgent()] = append(lb.lists[r.UserAgent()], time.Now())
		}
		lb.mu.Unlock()
		defer func() {
			lb.mu.Lock()
			delete(lb.open, rec)
			lb.mu.Unlock()
		}()
		rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, chaosRequestKey{}, rec)))
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(l) })
	wg.Go(func() { lb.check(ctx) })
	t.Cleanup(func() {
		cancel()
		_ = srv.Close()
		wg.Wait()
		lb.tr.CloseIdleConnections()
	})
	lb.base = "http://" + l.Addr().String()
	return lb
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (lb *chaosProxy) roundTrip(r *http.Request) (*http.Response, error) {
	resp, err := lb.tr.RoundTrip(r)
	var op *net.OpError
	if err == nil || !errors.As(err, &op) || op.Op != "dial" || r.Body != nil && r.Body != http.NoBody {
		return resp, err
	}
	rec := r.Context().Value(chaosRequestKey{}).(*chaosRequest)
	lb.mu.Lock()
	rec.replica = 1 - rec.replica
	lb.mu.Unlock()
	again := r.Clone(r.Context())
	again.URL.Host, again.Host = lb.targets[rec.replica].Host, lb.targets[rec.replica].Host
	return lb.tr.RoundTrip(again)
}

func (lb *chaosProxy) pick() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for range lb.targets {
		i := lb.next % len(lb.targets)
		lb.next++
		if lb.healthy[i] {
			return i
		}
	}
	lb.next++
	return lb.next % len(lb.targets)
}

// check is the health check; it runs until ctx ends.
func (lb *chaosProxy) check(ctx context.Context) {
	failures := make([]int, len(lb.targets))
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for i, u := range lb.targets {
			ok := false
			if resp, err := client.Get(u.String() + "/readyz"); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				ok = resp.StatusCode == http.StatusOK
			}
			if ok {
				failures[i] = 0
			} else {
				failures[i]++
			}
			lb.mu.Lock()
			switch {
			case ok:
				lb.healthy[i] = true
			case failures[i] == 2:
				lb.healthy[i] = false
				for rec := range lb.open {
					if rec.replica == i {
						rec.cancel()
					}
				}
			}
			lb.mu.Unlock()
		}
	}
}

func (lb *chaosProxy) listsOf(agent string, from, to time.Time) []time.Time {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var out []time.Time
	for _, at := range lb.lists[agent] {
		if !at.Before(from) && !at.After(to) {
			out = append(out, at)
		}
	}
	return out
}

// chaosPollers ask the balancer every 500 ms for a REST search and a facade LIST, and keep every
// answer's status.
type chaosPollers struct {
	mu      sync.Mutex
	answers []polled
}

type polled struct {
	what     string
	when     time.Time
	code     int
	retry    bool   // a Retry-After header
	balancer bool   // the balancer's own 502: the replica it chose was cut
	err      string // no answer
}

// pollCounts sorts answers: ok, the documented transient errors (410, 503, 504, and 429 with
// Retry-After), failures (any other), the balancer's own cuts and requests without an answer.
type pollCounts struct {
	ok, transient, failed, balancer, none int
	examples                              []string
}

func (c pollCounts) String() string {
	return fmt.Sprintf("%d ok, %d transient, %d failed, %d cut by the balancer, %d unanswered", c.ok, c.transient, c.failed, c.balancer, c.none)
}

func startChaosPollers(t *testing.T, lb *chaosProxy, ns, cluster string) *chaosPollers {
	p := &chaosPollers{}
	targets := map[string]string{
		"search": lb.base + queryapi.PathSearch + "?" + url.Values{"resources": {"configmaps,pods"}, "namespaces": {ns}, "limit": {"20"}}.Encode(),
		"list":   lb.base + queryapi.ClustersPrefix + cluster + "/api/v1/namespaces/" + ns + "/pods?limit=20",
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 15 * time.Second}
	for what, u := range targets {
		wg.Go(func() {
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				a := polled{what: what, when: time.Now()}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					a.err = err.Error()
				} else {
					body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
					resp.Body.Close()
					a.code, a.retry, a.balancer = resp.StatusCode, resp.Header.Get("Retry-After") != "", resp.Header.Get("X-Chaos-Balancer") != ""
					if a.code != http.StatusOK {
						a.err = strings.TrimSpace(string(body))
					}
				}
				p.mu.Lock()
				p.answers = append(p.answers, a)
				p.mu.Unlock()
			}
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return p
}

func (p *chaosPollers) counts(from, to time.Time) pollCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	var c pollCounts
	for _, a := range p.answers {
		if a.when.Before(from) || a.when.After(to) {
			continue
		}
		switch {
		case a.code == 0:
			c.none++
		case a.balancer:
			c.balancer++
		case a.code == http.StatusOK:
			c.ok++
		case a.code == http.StatusGone || a.code == http.StatusServiceUnavailable || a.code == http.StatusGatewayTimeout,
			a.code == http.StatusTooManyRequests && a.retry:
			c.transient++
		default:
			c.failed++
			if len(c.examples) < 3 {
				c.examples = append(c.examples, fmt.Sprintf("%s %s: %d %s", a.when.Format("15:04:05.000"), a.what, a.code, a.err))
			}
		}
	}
	return c
}

// peek is what a URL answers in 5 s, for a failure's message.
func peek(u string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Sprintf("GET %s: %s: %s", u, resp.Status, body)
}

func apiPath(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return "/api/" + gvr.Version
	}
	return "/apis/" + gvr.Group + "/" + gvr.Version
}
