package queryapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

// podEvent is the stream's event of fakeObject o (same uid and object).
func podEvent(typ envelope.Type, o fakeObject, epoch int64) *envelope.Event {
	return &envelope.Event{V: envelope.Version, Type: typ, Cluster: o.cluster, Version: "v1", Resource: "pods", Kind: "Pod",
		Namespace: o.namespace, Name: o.name, UID: fmt.Sprintf("uid-%s-%s-%s", o.cluster, o.namespace, o.name),
		ResourceVersion: fmt.Sprint(o.rv), Epoch: epoch, Object: json.RawMessage(o.json())}
}

// TestListPositionIsCoveredByTheIndex: a LIST's resourceVersion is a position a watch resumes from
// without a gap. The index may show a newer event before an older one (shards refresh on their own;
// a retried `_bulk` item lands after a later one): the position stops before the first event the
// index does not show yet, never at the newest one shown, and moves on once it shows.
func TestListPositionIsCoveredByTheIndex(t *testing.T) {
	st := &fakeStore{}
	base, s := newFacadeServerWithCache(t, st) // member1's pods watermark: 500
	a := fakeObject{cluster: "member1", resource: "pods", namespace: "shop", name: "a", rv: 510}
	b := fakeObject{cluster: "member1", resource: "pods", namespace: "shop", name: "b", rv: 520}
	c := fakeObject{cluster: "member1", resource: "pods", namespace: "shop", name: "c", rv: 530}
	count := 0
	cacheOf(s).Apply(&envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "pods",
		Kind: "Pod", Epoch: 1, ListResourceVersion: "500", Count: &count})
	for _, o := range []fakeObject{a, b, c} {
		cacheOf(s).Apply(podEvent(envelope.Added, o, 1))
	}
	position := func() string {
		t.Helper()
		// resourceVersion=0: served from the index as it is, without waiting for the stream.
		code, _, body := fetch(t, "GET", base+"/clusters/member1/api/v1/namespaces/shop/pods?"+url.Values{"resourceVersion": {"0"}}.Encode(), "")
		if code != 200 {
			t.Fatalf("LIST: %d %s", code, body)
		}
		return gjson.GetBytes(body, "metadata.resourceVersion").Str
	}
	st.objects = []fakeObject{a, c} // b's write is not searchable yet
	if got := position(); got != "510" {
		t.Errorf("a, c searchable, b not: position %s, want 510 (a watch from 530 would never send b)", got)
	}
	st.objects = []fakeObject{a, b, c}
	if got := position(); got != "530" {
		t.Errorf("all searchable: position %s, want 530", got)
	}
	gone := c
	gone.rv = 540
	cacheOf(s).Apply(podEvent(envelope.Deleted, gone, 1))
	if got := position(); got != "530" {
		t.Errorf("c's deletion not searchable yet: position %s, want 530", got)
	}
	st.objects = []fakeObject{a, b}
	if got := position(); got != "540" {
		t.Errorf("c's deletion searchable: position %s, want 540", got)
	}
}

// TestListPositionNotBelowTheWindow: the fleet status reads the watermarks every PollInterval, so
// right after a start what it holds may be below where the watch window begins; a LIST then reads
// the index's watermarks afresh instead of handing out a position every watch answers 410.
func TestListPositionNotBelowTheWindow(t *testing.T) {
	base, s := newFacadeServerWithCache(t, &fakeStore{}) // the fleet status read member1's pods at 500
	pair := store.Pair{Cluster: "member1", Resource: "pods"}
	cacheOf(s).Seed([]store.Watermark{{Cluster: pair.Cluster, Resource: pair.Resource, Kind: "Pod", ResourceVersion: 600}}) // seeded at 600 since
	s.fleet.readWatermarks = func(context.Context) ([]store.Watermark, error) {
		return []store.Watermark{{Cluster: "member1", Resource: "pods", Kind: "Pod", ResourceVersion: 600}}, nil
	}
	code, _, body := fetch(t, "GET", base+"/clusters/member1/api/v1/namespaces/shop/pods?resourceVersion=0", "")
	if got := gjson.GetBytes(body, "metadata.resourceVersion").Str; code != 200 || got != "600" {
		t.Errorf("LIST: %d, position %s, want the index's 600 (500 is below the window: every watch from it is 410)", code, got)
	}
}

// TestListPositionOfAPairTheFleetStatusLacks: a pair the fleet status does not hold (not polled
// yet, or a poll that missed it) is taken for one being listed; its LIST position is then the
// index's own watermark, never 0, which a client's watch takes for "from now on" and so misses
// every change between its LIST and its WATCH.
func TestListPositionOfAPairTheFleetStatusLacks(t *testing.T) {
	base, s := newFacadeServerWithCache(t, &fakeStore{})
	pair := store.Pair{Cluster: "member1", Resource: "pods"}
	cacheOf(s).Seed([]store.Watermark{{Cluster: pair.Cluster, Resource: pair.Resource, Kind: "Pod", ResourceVersion: 500}})
	s.fleet.mu.Lock()
	delete(s.fleet.watermarks, pair)
	s.fleet.mu.Unlock()
	s.fleet.readWatermarks = func(context.Context) ([]store.Watermark, error) {
		return []store.Watermark{{Cluster: "member1", Resource: "pods", Kind: "Pod", ResourceVersion: 500}}, nil
	}
	code, _, body := fetch(t, "GET", base+"/clusters/member1/api/v1/namespaces/shop/pods?resourceVersion=0", "")
	if got := gjson.GetBytes(body, "metadata.resourceVersion").Str; code != 200 || got != "500" {
		t.Errorf("LIST: %d, position %s, want the index's 500", code, got)
	}
}

// TestListPositionBeforeThePairsFirstWatermark: the index holds no watermark of the pair yet (its
// first SYNC's watermark is still being stored), but the watch cache holds its events: the LIST's
// position is where a watch replays them all, not 0.
func TestListPositionBeforeThePairsFirstWatermark(t *testing.T) {
	base, s := newFacadeServerWithCache(t, &fakeStore{})
	pair := store.Pair{Cluster: "member1", Resource: "pods"}
	s.fleet.mu.Lock()
	delete(s.fleet.watermarks, pair)
	s.fleet.mu.Unlock()
	s.fleet.readWatermarks = func(context.Context) ([]store.Watermark, error) { return nil, nil }
	cacheOf(s).Seed([]store.Watermark{{Cluster: pair.Cluster, Resource: pair.Resource, Kind: "Pod", ResourceVersion: 0}})
	obj := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"shop","uid":"uid-a","resourceVersion":"610"}}`
	cacheOf(s).Apply(&envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: "member1", Version: "v1", Resource: "pods", Kind: "Pod",
		Namespace: "shop", Name: "a", UID: "uid-a", ResourceVersion: "610", Epoch: 1, Object: json.RawMessage(obj)})
	code, _, body := fetch(t, "GET", base+"/clusters/member1/api/v1/namespaces/shop/pods?resourceVersion=0", "")
	got := gjson.GetBytes(body, "metadata.resourceVersion").Str
	if code != 200 || got == "0" || got == "" {
		t.Fatalf("LIST: %d, position %q, want one a watch replays the window from", code, got)
	}
	// A watch from there starts at once and sends the pair's event.
	code, _, body = fetch(t, "GET", base+"/clusters/member1/api/v1/namespaces/shop/pods?watch=1&timeoutSeconds=1&resourceVersion="+got, "")
	if code != 200 || !strings.Contains(string(body), `"type":"ADDED"`) || !strings.Contains(string(body), "uid-a") {
		t.Errorf("watch from %s: %d %s, want a's ADDED", got, code, body)
	}
}
