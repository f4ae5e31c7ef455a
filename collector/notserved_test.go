package collector

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
)

var widgetKey = registry.SelectionKey{Group: "example.com", Kind: "Widget"}

// fakeDiscovery answers ServerGroupsAndResources with what a test sets.
type fakeDiscovery struct {
	mu    sync.Mutex
	lists []*metav1.APIResourceList
	err   error
}

func (f *fakeDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, f.lists, f.err
}

func (f *fakeDiscovery) set(err error, lists ...*metav1.APIResourceList) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists, f.err = lists, err
}

var (
	widgetsV1 = &metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"get", "list", "watch"}},
	}}
	deploymentsV1 = &metav1.APIResourceList{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments", Namespaced: true, Kind: "Deployment", Verbs: metav1.Verbs{"get", "list", "watch"}},
	}}
)

// widgetMember is a member serving /apis/example.com/v1/widgets (one object) while served is set,
// and answering 404 there otherwise, as kube-apiserver does once a CRD is gone.
type widgetMember struct {
	mu       sync.Mutex
	served   bool
	watchEnd chan struct{} // closed by endWatches: the member closes its open watches
}

func (w *widgetMember) setServed(v bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.served = v
}

func (w *widgetMember) endWatches() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.watchEnd)
	w.watchEnd = make(chan struct{})
}

func (w *widgetMember) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	served, end := w.served, w.watchEnd
	w.mu.Unlock()
	rw.Header().Set("Content-Type", "application/json")
	if r.URL.Path != "/apis/example.com/v1/widgets" || !served {
		rw.WriteHeader(http.StatusNotFound)
		fmt.Fprint(rw, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}`)
		return
	}
	if r.URL.Query().Get("watch") != "" {
		rw.WriteHeader(http.StatusOK)
		rw.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-end:
		}
		return
	}
	fmt.Fprint(rw, `{"kind":"WidgetList","apiVersion":"example.com/v1","metadata":{"resourceVersion":"10"},"items":[`+
		`{"metadata":{"name":"w1","namespace":"shop","uid":"u1","resourceVersion":"9"},"spec":{"size":1}}]}`)
}

type notServedHarness struct {
	m      *member
	disc   *fakeDiscovery
	member *widgetMember
	broker stream.Broker
}

// newNotServedHarness is a collector (in-process stream, ledger, publisher) with one member,
// member1, whose discovery the test sets and which selects Widgets of example.com; it starts
// served and collected, with one object listed.
func newNotServedHarness(t *testing.T) *notServedHarness {
	t.Helper()
	ctx := t.Context()
	log := slog.New(slog.DiscardHandler)
	broker := stream.NewLocal(stream.LocalOptions{})
	t.Cleanup(broker.Close)
	c := &Collector{opts: Options{PageSize: 100}, log: log, kafka: broker}
	c.pub = newPublisher(broker, publisherOptions{Topic: "events", Partitions: 1, MaxMessageBytes: 1 << 20, Buffer: 16, Batch: 16}, log)
	c.metrics = newMetrics(func() float64 { return float64(len(c.pub.queue)) })
	c.pub.metrics = c.metrics
	c.ledger = newLedger(broker, "events", "collector-a", log)
	t.Cleanup(func() { _ = c.ledger.close(); _ = c.pub.writer.Close() })
	if _, err := c.ledger.load(ctx); err != nil {
		t.Fatal(err)
	}
	c.epochs = envelope.NewEpochs(time.Now, c.ledger.reserve)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = c.pub.run(ctx)
	}()
	t.Cleanup(func() { c.pub.close(); <-runDone }) // after the collections stopped (below)

	wm := &widgetMember{served: true, watchEnd: make(chan struct{})}
	srv := httptest.NewServer(wm)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fd := &fakeDiscovery{lists: []*metav1.APIResourceList{deploymentsV1, widgetsV1}}
	m := &member{
		cluster: registry.Cluster{Name: "member1"}, c: c, log: log, dynamic: dyn, discover: fd, raw: disc.RESTClient(),
		kick:       make(chan struct{}, 1),
		selections: map[registry.SelectionKey]registry.Selection{},
		statuses:   map[registry.SelectionKey]*statusEntry{},
		running:    map[registry.SelectionKey]*running{},
		resolved:   map[registry.SelectionKey]resolved{},
	}
	// Registered after srv.Close, so it runs first: the collections' watches end before the server.
	t.Cleanup(m.stopAll)
	m.setSelections([]registry.Selection{{SelectionKey: widgetKey, Version: "v1", Sources: []registry.Source{{Registry: "widgets"}}}})
	h := &notServedHarness{m: m, disc: fd, member: wm, broker: broker}
	if err := m.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	h.waitSynced(t, 0)
	return h
}

// row is the selection's /status row.
func (h *notServedHarness) row(t *testing.T) registry.ResourceStatus {
	t.Helper()
	rows := h.m.rows()
	if len(rows) != 1 {
		t.Fatalf("%d status rows, want 1: %+v", len(rows), rows)
	}
	return rows[0]
}

// waitSynced waits until the selection synced in an epoch above after, and returns that epoch.
func (h *notServedHarness) waitSynced(t *testing.T, after int64) int64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := h.row(t)
		if r.State == registry.StateRunning && r.Epoch > after {
			return r.Epoch
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Widgets never synced after epoch %d: %+v", after, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// events are the events the collector published, in order.
func (h *notServedHarness) events(t *testing.T) []*envelope.Event {
	t.Helper()
	msgs, err := h.broker.ReadPartition(t.Context(), "events", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*envelope.Event, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, decoded(t, m))
	}
	return out
}

func purgesOf(evs []*envelope.Event) []*envelope.Event {
	var out []*envelope.Event
	for _, ev := range evs {
		if ev.Type == envelope.Purge {
			out = append(out, ev)
		}
	}
	return out
}

func (h *notServedHarness) running() bool {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	_, ok := h.m.running[widgetKey]
	return ok
}

// TestKindNoLongerServedIsPurged: a selected kind the member stops serving (its CRD deleted) — a
// complete discovery without it, and a 404 on its list — is PURGEd once, with the reason in
// /status; a list answering 404 makes the member rediscover at once; the kind served again is
// listed afresh in a new epoch.
func TestKindNoLongerServedIsPurged(t *testing.T) {
	h := newNotServedHarness(t)
	ctx := t.Context()
	first := h.row(t).Epoch

	// The CRD goes: discovery drops it, its path answers 404, its watch ends. The reflector lists
	// again, meets the 404 and makes the member rediscover.
	select {
	case <-h.m.kick: // setSelections' own
	default:
	}
	h.disc.set(nil, deploymentsV1)
	h.member.setServed(false)
	h.member.endWatches()
	select {
	case <-h.m.kick:
	case <-time.After(20 * time.Second):
		t.Fatal("a list answering 404 did not make the member rediscover")
	}
	if err := h.m.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	purges := purgesOf(h.events(t))
	if len(purges) != 1 {
		t.Fatalf("%d PURGEs after the kind went, want 1", len(purges))
	}
	if p := purges[0]; p.Cluster != "member1" || p.Group != "example.com" || p.Version != "v1" || p.Resource != "widgets" ||
		p.Kind != "Widget" || p.Namespace != "" || p.Epoch <= first {
		t.Errorf("PURGE %+v, want member1's example.com/v1 widgets, Widget, every namespace, epoch above %d", p, first)
	}
	r := h.row(t)
	want := "not served by the member: purged: the server doesn't have a resource type Widget.example.com"
	if r.State != registry.StateFailed || r.Reason != want || r.PurgedAt == nil || r.TotalNum != 0 {
		t.Errorf("status %s %q purgedAt %v totalNum %d; want Failed %q, purgedAt set, totalNum 0", r.State, r.Reason, r.PurgedAt, r.TotalNum, want)
	}
	if h.running() {
		t.Error("the collection of a kind no longer served still runs")
	}
	if _, ok := h.m.c.ledger.entry("member1", widgetKey); ok {
		t.Error("the ledger still records the purged selection")
	}

	// Later discoveries say the same: no second PURGE, the status keeps saying why.
	for range 2 {
		if err := h.m.reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(purgesOf(h.events(t))); n != 1 {
		t.Errorf("%d PURGEs after more discoveries, want still 1", n)
	}
	if r := h.row(t); r.Reason != want {
		t.Errorf("status after more discoveries: %q, want %q", r.Reason, want)
	}

	// The CRD is created again: a fresh list in a new epoch, after the PURGE.
	h.member.setServed(true)
	h.disc.set(nil, deploymentsV1, widgetsV1)
	if err := h.m.reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	again := h.waitSynced(t, purges[0].Epoch)
	if r := h.row(t); r.Reason != "" || r.PurgedAt != nil || r.TotalNum != 1 {
		t.Errorf("status once served again: reason %q purgedAt %v totalNum %d", r.Reason, r.PurgedAt, r.TotalNum)
	}
	evs := h.events(t)
	var afterPurge []string
	seen := false
	for _, ev := range evs {
		if ev.Type == envelope.Purge {
			seen = true
			continue
		}
		if seen {
			afterPurge = append(afterPurge, fmt.Sprintf("%s %s %d", ev.Type, ev.Name, ev.Epoch))
		}
	}
	if want := []string{fmt.Sprintf("ADDED w1 %d", again), fmt.Sprintf("SYNC  %d", again)}; strings.Join(afterPurge, ", ") != strings.Join(want, ", ") {
		t.Errorf("events after the PURGE: %v, want %v", afterPurge, want)
	}
	if _, ok := h.m.c.ledger.entry("member1", widgetKey); !ok {
		t.Error("the ledger does not record the selection collected again")
	}
}

// TestKindNotPurgedWithoutEvidence: nothing is purged on what does not prove the member stopped
// serving a kind — a discovery that failed, a discovery whose group failed, the first (partial)
// discovery after the member was unreachable, a list that still answers — even while the kind's path
// answers 404.
func TestKindNotPurgedWithoutEvidence(t *testing.T) {
	groupFailed := func(gv string) error {
		return &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{
			schema.GroupVersion{Group: strings.Split(gv, "/")[0], Version: strings.Split(gv, "/")[1]}: errors.New("the server is currently unable to handle the request"),
		}}
	}
	t.Run("discovery fails", func(t *testing.T) {
		h := newNotServedHarness(t)
		h.member.setServed(false)
		h.disc.set(errors.New("dial tcp 10.0.0.1:6443: connect: connection refused"))
		if err := h.m.reconcile(t.Context()); err == nil {
			t.Error("a failed discovery reported no error")
		}
		if n := len(purgesOf(h.events(t))); n != 0 {
			t.Errorf("%d PURGEs after a failed discovery", n)
		}
		if !h.running() {
			t.Error("the collection stopped on a failed discovery")
		}
	})
	t.Run("the group's discovery fails", func(t *testing.T) {
		h := newNotServedHarness(t)
		h.member.setServed(false)
		h.disc.set(groupFailed("example.com/v1"), deploymentsV1)
		if err := h.m.reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(purgesOf(h.events(t))); n != 0 {
			t.Errorf("%d PURGEs after the group's discovery failed", n)
		}
		if !h.running() {
			t.Error("the collection stopped because its group's discovery failed")
		}
		if r := h.row(t); strings.Contains(r.Reason, "doesn't have") || r.PurgedAt != nil {
			t.Errorf("status after the group's discovery failed: %q purgedAt %v", r.Reason, r.PurgedAt)
		}
	})
	t.Run("first discovery after an outage is partial", func(t *testing.T) {
		h := newNotServedHarness(t)
		h.member.setServed(false)
		h.disc.set(errors.New("connection refused"))
		_ = h.m.reconcile(t.Context())
		// Back, with an aggregated API not up yet and the CRD not listed.
		h.disc.set(groupFailed("metrics.k8s.io/v1beta1"), deploymentsV1)
		if err := h.m.reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(purgesOf(h.events(t))); n != 0 {
			t.Errorf("%d PURGEs on the first, partial, discovery after an outage", n)
		}
		if r := h.row(t); r.PurgedAt != nil {
			t.Errorf("status says purged: %q", r.Reason)
		}
		// The next discovery reaches the member too: the CRD's absence is now evidence.
		if err := h.m.reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(purgesOf(h.events(t))); n != 1 {
			t.Errorf("%d PURGEs on the second discovery after the outage, want 1", n)
		}
	})
	t.Run("the list still answers", func(t *testing.T) {
		h := newNotServedHarness(t)
		h.disc.set(nil, deploymentsV1) // discovery lags behind, say
		if err := h.m.reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(purgesOf(h.events(t))); n != 0 {
			t.Errorf("%d PURGEs while the kind's list still answers", n)
		}
		if r := h.row(t); r.PurgedAt != nil || !strings.Contains(r.Reason, "not purged") {
			t.Errorf("status %q purgedAt %v, want the reason saying it is not purged", r.Reason, r.PurgedAt)
		}
	})
}
