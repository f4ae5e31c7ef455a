package queryapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// TestPresence: what a streaming watch's client holds reads back as written, through the initial
// events (a uid sent twice keeps its last state), later additions, removals and merges.
func TestPresence(t *testing.T) {
	p := newPresence(nil, "u")
	want := map[string]int64{}
	set := func(uid string, rv int64) {
		t.Helper()
		if !p.set(uid, rv) {
			t.Fatalf("set(%s) = false without a budget", uid)
		}
		want[uid] = rv
	}
	for i := range 2000 {
		set(fmt.Sprintf("uid-%d", i), int64(i))
	}
	set("uid-7", 9000)    // twice on the pages: the last wins
	for i := range 3000 { // after the initial events: more than a merge's worth
		switch {
		case i%3 == 0:
			set(fmt.Sprintf("uid-%d", i), int64(10000+i)) // a newer state, or a new object
		case i%3 == 1:
			p.remove(fmt.Sprintf("uid-%d", i))
			delete(want, fmt.Sprintf("uid-%d", i))
		}
	}
	set("uid-1", 42) // back after its removal
	for i := range 3500 {
		uid := fmt.Sprintf("uid-%d", i)
		rv, ok := p.get(uid)
		if w, held := want[uid]; ok != held || rv != w {
			t.Fatalf("get(%s) = %d, %v; want %d, %v", uid, rv, ok, w, held)
		}
	}
	if p.live != len(want) {
		t.Errorf("%d objects counted, %d held", p.live, len(want))
	}
}

// TestPresenceBudget: a subject's watches hold at most its budget of objects together; the one
// that would pass it stops tracking and gives its share back, another subject is not affected,
// and an ended watch gives back what it held.
func TestPresenceBudget(t *testing.T) {
	b := newWatchObjects(2500)
	fill := func(p *presence, n int) bool {
		for i := range n {
			if !p.set(fmt.Sprintf("uid-%d", i), 1) {
				return false
			}
		}
		return true
	}
	first := newPresence(b, "alice")
	if !fill(first, 1500) {
		t.Fatal("the first watch passed the budget alone")
	}
	second := newPresence(b, "alice")
	if fill(second, 1500) {
		t.Fatal("two watches of 1,500 objects each fit a budget of 2,500")
	}
	if got := b.holding("alice"); got > 2500 || got < 1500 {
		t.Errorf("alice's watches hold %d; want the first's share, at most 2500", got)
	}
	if other := newPresence(b, "bob"); !fill(other, 2000) {
		t.Error("bob's watch is bounded by alice's")
	}
	first.release()
	if got := b.holding("alice"); got != 0 {
		t.Errorf("after the watches ended alice holds %d", got)
	}
}

// TestStreamingWatchObjectsPerSubject: two streaming watches of one subject over 1,500 Pods each,
// with a budget of 2,500: together they never hold more; both send every initial event and the
// DELETED of an object afterwards (the one past the budget as a resumed watch would), and give
// their share back when they end.
func TestStreamingWatchObjectsPerSubject(t *testing.T) {
	st := &fakeStore{}
	for i := range 1500 {
		st.objects = append(st.objects, fakeObject{cluster: "member1", resource: "pods", namespace: "shop", name: fmt.Sprintf("web-%04d", i), rv: int64(100 + i%300)})
	}
	srvURL, s := newFacadeServerWithCache(t, st)
	s.watchObjects = newWatchObjects(2500)
	cacheOf(s).SetHeadForTest(store.Pair{Cluster: "member1", Resource: "pods"}, 500)
	const subject = "system:anonymous"
	url := srvURL + "/clusters/member1/api/v1/namespaces/shop/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion=0"

	type watchBody struct {
		resp *http.Response
		dec  *json.Decoder
	}
	var watches []watchBody
	for range 2 {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("watch: %d", resp.StatusCode)
		}
		w := watchBody{resp, json.NewDecoder(resp.Body)}
		added := 0
		for { // the initial events, up to their bookmark
			var ev struct{ Type string }
			if err := w.dec.Decode(&ev); err != nil {
				t.Fatalf("after %d ADDED: %v", added, err)
			}
			if ev.Type == "BOOKMARK" {
				break
			}
			added++
		}
		if added != len(st.objects) {
			t.Errorf("%d initial events; want %d", added, len(st.objects))
		}
		got := s.watchObjects.holding(subject)
		if len(watches) == 0 && got < len(st.objects) {
			t.Fatalf("the first watch holds %d objects of its budget; want its %d", got, len(st.objects))
		}
		if got > 2500 {
			t.Fatalf("the subject's watches hold %d objects; at most 2500", got)
		}
		watches = append(watches, w)
	}
	obj := fakeObject{cluster: "member1", resource: "pods", namespace: "shop", name: "web-0005", rv: 600}.json()
	cacheOf(s).Apply(&envelope.Event{V: envelope.Version, Type: envelope.Deleted, Cluster: "member1", Version: "v1", Resource: "pods", Kind: "Pod",
		Namespace: "shop", Name: "web-0005", UID: "uid-member1-shop-web-0005", ResourceVersion: "600", Epoch: 1, Object: obj})
	for i, w := range watches {
		for {
			var ev struct {
				Type   string
				Object struct{ Metadata struct{ Name string } }
			}
			if err := w.dec.Decode(&ev); err != nil {
				t.Fatalf("watch %d: %v", i, err)
			}
			if ev.Type == "BOOKMARK" {
				continue
			}
			if ev.Type != "DELETED" || ev.Object.Metadata.Name != "web-0005" {
				t.Errorf("watch %d: %s %s; want DELETED web-0005", i, ev.Type, ev.Object.Metadata.Name)
			}
			break
		}
		w.resp.Body.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.watchObjects.holding(subject) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("ended watches still hold %d objects", s.watchObjects.holding(subject))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkWatchPresence measures the memory a streaming watch keeps per object its client holds:
// the map of uid strings it kept before (map) and presence.
func BenchmarkWatchPresence(b *testing.B) {
	const n = 100_000
	uids := make([]string, n)
	for i := range uids {
		uids[i] = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i, i%0xffff, i%0xfff, i%0xfff, i) // a uid's shape
	}
	measure := func(b *testing.B, build func() any) {
		var before, after runtime.MemStats
		var keep any
		for b.Loop() {
			runtime.GC()
			runtime.ReadMemStats(&before)
			keep = build()
			runtime.GC()
			runtime.ReadMemStats(&after)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/object")
		runtime.KeepAlive(keep)
	}
	b.Run("map", func(b *testing.B) {
		measure(b, func() any {
			m := map[string]int64{}
			for i, u := range uids {
				m[strings.Clone(u)] = int64(i) // gjson's .Str is a string of its own
			}
			return m
		})
	})
	b.Run("presence", func(b *testing.B) {
		measure(b, func() any {
			p := newPresence(nil, "u")
			for i, u := range uids {
				p.set(u, int64(i))
			}
			p.get(uids[0]) // sealed, as after the initial events
			return p
		})
	})
}

// throttled is a store whose every search is past a subject's bound of costly searches.
type throttled struct{ fakeStore }

func (*throttled) Search(context.Context, *query.Query) (*store.Result, error) {
	return nil, fmt.Errorf("%w: \"alice\" has 2 searches by fuzzyName running, at most 2 at once", store.ErrThrottled)
}

// TestThrottledSearchIs429: a search refused by a subject's bound of costly searches is a 429
// Status with Retry-After, which clients wait out, never a 500.
func TestThrottledSearchIs429(t *testing.T) {
	srv, s := newFacadeTestServer(t, &fakeStore{})
	s.store = &throttled{}
	code, header, body := fetch(t, http.MethodGet, srv.URL+PathSearch+"?fuzzyName=ngnix", "")
	if code != http.StatusTooManyRequests || header.Get("Retry-After") == "" || !strings.Contains(string(body), `"reason":"TooManyRequests"`) {
		t.Errorf("%d Retry-After=%q %s; want a 429 TooManyRequests Status with Retry-After", code, header.Get("Retry-After"), body)
	}
}
