package collector

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
)

// TestWatchFromAPositionTheMemberHasNotReached: kube-apiserver accepts a watch from a
// resourceVersion it has not reached (a member whose etcd was restored from a backup) and sends
// nothing until its counter passes it; the collector asks first and answers 410, so the reflector
// lists again in the member's new numbering instead of skipping every change until then.
func TestWatchFromAPositionTheMemberHasNotReached(t *testing.T) {
	var memberRV atomic.Int64
	var watches atomic.Int32
	var starting atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/shop/configmaps" {
			http.NotFound(w, r)
			return
		}
		if starting.Load() && r.URL.Query().Get("watch") == "" {
			// A kube-apiserver starting up answers a list 503 while it accepts a watch.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server is currently unable to handle the request","code":503}`)
			return
		}
		if r.URL.Query().Get("watch") != "" {
			watches.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK) // a watch that sends nothing, as kube-apiserver's does
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"%d"},"items":[]}`, memberRV.Load())
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &collection{
		scope:  scope{cluster: "member1", gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, kind: "ConfigMap", namespace: "shop"},
		client: dynamic.NewForConfigOrDie(cfg), raw: disc.RESTClient(), log: slog.New(slog.DiscardHandler),
		status: newStatusEntry(registry.ResourceStatus{}, nil),
	}
	lw := &listWatch{c: c}

	memberRV.Store(150) // restored: below the 5000 the reflector saw
	starting.Store(true)
	if _, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "5000"}); err == nil || !strings.Contains(err.Error(), "unable to handle") {
		t.Errorf("watch from 5000 while the member cannot say where it is: %v, want the member's error (the reflector retries)", err)
	}
	starting.Store(false)
	if _, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "5000"}); !apierrors.IsResourceExpired(err) {
		t.Errorf("watch from 5000 of a member at 150: %v, want 410 Expired", err)
	}
	if watches.Load() != 0 {
		t.Error("the watch was started anyway")
	}
	memberRV.Store(5200) // the ordinary case: the member is at or past the position
	w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "5000"})
	if err != nil {
		t.Fatalf("watch from 5000 of a member at 5200: %v", err)
	}
	w.Stop()
	if watches.Load() != 1 {
		t.Errorf("%d watches started, want 1", watches.Load())
	}
}

// A collection whose member stays away retries at least every 6 s however long the outage lasts,
// so a member that answers again is collected again within seconds (client-go's default backoff
// waited up to a minute between tries).
func TestReflectorBackoffStaysShortThroughALongOutage(t *testing.T) {
	bo := reflectorBackoff()
	clk := testingclock.NewFakeClock(time.Now())
	delay := bo.DelayWithReset(clk, 2*time.Minute)
	var waited time.Duration
	for i := range 100 { // about ten minutes of failures
		d := delay()
		if d > 6*time.Second {
			t.Fatalf("retry %d after %s of failures waits %s, want at most 6 s", i, waited, d)
		}
		waited += d
		clk.Step(d)
	}
}

// blockingSink records events, holding the first Publish until release is closed.
type blockingSink struct {
	recordingSink
	release chan struct{}
	once    sync.Once
}

func (b *blockingSink) Publish(ctx context.Context, ev *envelope.Event) error {
	b.once.Do(func() { <-b.release })
	return b.recordingSink.Publish(ctx, ev)
}

// A list keeps its member busy: while one page is published, the next waits and the one after is
// already asked for (a page published slowly — a GC, Kafka, two busy cores — left the member idle),
// and the objects are still published in the member's order, once each, before the list returns.
func TestListFetchesAhead(t *testing.T) {
	const pages, perPage = 5, 2
	asked := make(chan int, pages)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := 0
		if c := r.URL.Query().Get("continue"); c != "" {
			page, _ = strconv.Atoi(c)
		}
		asked <- page
		var items []string
		for i := range perPage {
			n := page*perPage + i
			items = append(items, fmt.Sprintf(`{"metadata":{"name":"cm-%02d","namespace":"shop","uid":"u%d","resourceVersion":"%d"},"data":{"k":"v"}}`, n, n, 100+n))
		}
		cont := ""
		if page+1 < pages {
			cont = strconv.Itoa(page + 1)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"500","continue":%q},"items":[%s]}`, cont, strings.Join(items, ","))
	}))
	defer srv.Close()
	disc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	sink := &blockingSink{release: make(chan struct{})}
	sc := scope{cluster: "member1", gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, kind: "ConfigMap", namespace: "shop"}
	st := newStatusEntry(registry.ResourceStatus{}, nil)
	ep := envelope.NewEpochs(func() time.Time { return time.Unix(1_700_000_000, 0) }, nil)
	c := &collection{
		scope: sc, raw: disc.RESTClient(), pageSize: perPage, log: slog.New(slog.DiscardHandler), status: st,
		metrics: newMetrics(func() float64 { return 0 }), store: newStore(t.Context(), sc, sink, ep, st),
	}
	listed := make(chan error, 1)
	go func() {
		_, err := (&listWatch{c: c}).ListWithContext(t.Context(), metav1.ListOptions{})
		listed <- err
	}()
	// Page 0 is being published (its first object held), page 1 waits: page 2 is asked for.
	for want := range 3 {
		select {
		case got := <-asked:
			if got != want {
				t.Fatalf("page %d asked for, want page %d", got, want)
			}
		case <-time.After(10 * time.Second):
			close(sink.release)
			t.Fatalf("page %d was not asked for while page 0 was published", want)
		}
	}
	close(sink.release)
	if err := <-listed; err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range sink.take() {
		got = append(got, ev.Name)
	}
	var want []string
	for n := range pages * perPage {
		want = append(want, fmt.Sprintf("cm-%02d", n))
	}
	if !slices.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
}
