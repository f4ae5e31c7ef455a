package queryapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

// The tests of this file feed the watch cache issue 23's member: member1's configmaps reach 5000
// in epoch 1; the member is rebuilt, its collector (restarted: it publishes no DELETED of its own)
// lists b at 150 in epoch 2, SYNC at 155 (x and gone vanished), then b changes at 160 and c appears
// at 170.

// beforeRebuild is member1 before: a list at 4990 (epoch 1), then x changed at 5000.
func beforeRebuild(c *watchCache) {
	c.apply(cmEvent(envelope.Added, "x", 4990, 1))
	c.apply(cmEvent(envelope.Added, "gone", 4980, 1))
	c.apply(cmSync(1, "4990"))
	c.apply(cmEvent(envelope.Modified, "x", 5000, 1))
}

// rebuilt is member1 rebuilt: the list of epoch 2 and the changes after it.
func rebuilt(c *watchCache) {
	c.apply(cmEvent(envelope.Added, "b", 150, 2))
	c.apply(cmSync(2, "155"))
	c.apply(cmEvent(envelope.Modified, "b", 160, 2))
	c.apply(cmEvent(envelope.Added, "c", 170, 2))
}

// newWentBackServer is a facade with a ready watch cache fed the scenario, and the index's
// watermarks for configmaps at member1's indexed (as the indexer leaves them: its SYNC sets the
// watermark to the list's resourceVersion, whatever it was) and at 40 for member2.
func newWentBackServer(t *testing.T, indexed int64) (string, *Server) {
	t.Helper()
	wms := []store.Watermark{
		{Cluster: "member1", Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: indexed, Epoch: 2},
		{Cluster: "member2", Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 40, Epoch: 1},
	}
	f := &fleet{readWatermarks: func(context.Context) ([]store.Watermark, error) { return wms, nil },
		interval: time.Second, staleAfter: time.Minute, log: slog.New(slog.DiscardHandler), now: time.Now}
	f.poll(t.Context())
	s := &Server{opts: Options{RequestTimeout: 5 * time.Second, ResourceVersionWait: 300 * time.Millisecond},
		log: slog.New(slog.DiscardHandler), store: &fakeStore{}, fleet: f, metrics: newMetrics(), catalog: testCatalog(), authn: anonymous(t)}
	s.cache = newWatchCache(s.log, 1000, 1<<20)
	s.cache.seedWatermarksLocked(wms[1:]) // member2 is where the index is; member1 comes from the stream
	s.cache.replaying, s.cache.ready = false, true
	beforeRebuild(s.cache)
	rebuilt(s.cache)
	s.engine = s.routes()
	srv := httptest.NewServer(s.engine)
	t.Cleanup(srv.Close)
	return srv.URL, s
}

// startSoon is c.start bounded: a position taken for one ahead of the stream waits, then errTooNew.
func startSoon(t *testing.T, c *watchCache, from map[store.Pair]int64) (cursor, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	return c.start(ctx, from)
}

func fleetRV(v rvVector) string { return v.encode(view{}) }

// TestWatchFromBeforeAMemberWentBack: a position member1 gave before it was rebuilt is 410 (the
// client lists again), never a watch that stays silent until the member's counter passes it, nor
// a wait for a resourceVersion the member will reach in another numbering. A position ahead of
// everything seen still waits and is 504.
func TestWatchFromBeforeAMemberWentBack(t *testing.T) {
	url, _ := newWentBackServer(t, 170)
	one := url + "/clusters/member1/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion="
	fleetURL := url + "/api/v1/configmaps?watch=1&resourceVersion="
	for _, tc := range []struct {
		name, url string
		want      int
	}{
		{"the member's last position", one + "5000", http.StatusGone},
		{"an event of the old numbering", one + "4990", http.StatusGone},
		{"between the new head and the old", one + "165", http.StatusGone},
		{"below the new list", one + "100", http.StatusGone},
		{"fleet vector with the old position", fleetURL + fleetRV(rvVector{"member1": 5000, "member2": 40}), http.StatusGone},
		{"ahead of everything", one + "90000", http.StatusGatewayTimeout},
		{"the new list's position", one + "155", http.StatusOK},
		{"fleet vector with the new position", fleetURL + fleetRV(rvVector{"member1": 160, "member2": 40}), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("watch: %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

// TestListWatchAfterAMemberWentBack: a client that lists after the rebuild, while the index is at
// the new list (155), and watches from there gets every change after it, in the new numbering —
// and nothing of the old one; on the fleet view as on the one-cluster view.
func TestListWatchAfterAMemberWentBack(t *testing.T) {
	url, _ := newWentBackServer(t, 155)
	code, _, body := fetch(t, "GET", url+"/clusters/member1/api/v1/namespaces/shop/configmaps?resourceVersion=0", "")
	rv := gjson.GetBytes(body, "metadata.resourceVersion").Str
	if code != http.StatusOK || rv != "155" {
		t.Fatalf("list: %d, resourceVersion %q, want 155: %s", code, rv, body)
	}
	got := watchNames(t, url+"/clusters/member1/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion="+rv, 2)
	if want := []string{"MODIFIED b 160", "ADDED c 170"}; !slices.Equal(got, want) {
		t.Errorf("one-cluster watch from the list: %v, want %v", got, want)
	}

	code, _, body = fetch(t, "GET", url+"/api/v1/configmaps?resourceVersion=0", "")
	vec, err := parseRV(gjson.GetBytes(body, "metadata.resourceVersion").Str, view{})
	if code != http.StatusOK || err != nil || vec["member1"] != 155 {
		t.Fatalf("fleet list: %d, resourceVersion %v (%v): %s", code, vec, err, body)
	}
	got = watchNames(t, url+"/api/v1/configmaps?watch=1&resourceVersion="+fleetRV(vec), 2)
	for i := range got {
		got[i] = strings.Join(strings.Fields(got[i])[:2], " ") // the vector, not the member's own
	}
	if want := []string{"MODIFIED b", "ADDED c"}; !slices.Equal(got, want) {
		t.Errorf("fleet watch from the list: %v, want %v", got, want)
	}
}

// TestWatchOpenWhenAMemberWentBack: a watch open when the member is rebuilt ends with an ERROR 410,
// so its client lists again, instead of waiting for the member's counter to pass its position.
func TestWatchOpenWhenAMemberWentBack(t *testing.T) {
	for _, tc := range []struct{ name, path string }{
		{"one-cluster", "/clusters/member1/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion=5000"},
		{"fleet", "/api/v1/configmaps?watch=1&resourceVersion=" + fleetRV(rvVector{"member1": 5000, "member2": 0})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srvURL, s := newFacadeServerWithCache(t, &fakeStore{})
			beforeRebuild(s.cache)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srvURL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req) // returns once the watch is placed: its 200 is sent after
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("watch from 5000 before the rebuild: %d", resp.StatusCode)
			}
			rebuilt(s.cache)
			var ev struct {
				Type   string
				Object struct {
					Code   int
					Reason string
				}
			}
			if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
				t.Fatalf("no event after the rebuild: %v", err)
			}
			if ev.Type != "ERROR" || ev.Object.Code != http.StatusGone || ev.Object.Reason != "Expired" {
				t.Errorf("first event after the rebuild: %+v, want an ERROR 410 Expired", ev)
			}
		})
	}
}

// TestConsistentListAfterAMemberWentBack: a consistent read waits for the member's head in its new
// numbering, which the index reaches, not for the 5000 it will not reach again.
func TestConsistentListAfterAMemberWentBack(t *testing.T) {
	url, s := newWentBackServer(t, 170)
	if got := s.cache.heads(apiResource{Resource: "configmaps"}, []string{"member1"}); got["member1"] != 170 {
		t.Errorf("heads = %v, want member1 at 170", got)
	}
	code, h, body := fetch(t, "GET", url+"/clusters/member1/api/v1/namespaces/shop/configmaps", "")
	if code != http.StatusOK || gjson.GetBytes(body, "metadata.resourceVersion").Str != "170" {
		t.Errorf("consistent list: %d %s", code, body)
	}
	if w := h.Values("Warning"); len(w) > 0 {
		t.Errorf("consistent list warned %q", w)
	}
}

// TestWatchCacheWentBackInOneScope: a pair listed per namespace has one list per namespace, each
// with its own SYNC. One that lists below what the others showed meanwhile is the usual lag, not a
// member that went back; one below what its own namespace showed is. The other namespaces then
// come over to the new numbering one by one: each ends the open watches again, and the positions of
// the new numbering stay valid.
func TestWatchCacheWentBackInOneScope(t *testing.T) {
	c := newWatchCache(slog.New(slog.DiscardHandler), 1000, 1<<20)
	c.replaying, c.ready = false, true
	ev := func(typ envelope.Type, ns, name string, rv int, epoch int64) *envelope.Event {
		e := cmEvent(typ, name, rv, epoch)
		e.Namespace = ns
		e.Object = json.RawMessage(strings.Replace(string(e.Object), `"namespace":"shop"`, `"namespace":"`+ns+`"`, 1))
		return e
	}
	sync := func(ns string, epoch int64, listRV string) {
		e := cmSync(epoch, listRV)
		e.Namespace = ns
		c.apply(e)
	}
	c.apply(ev(envelope.Added, "shop", "s1", 4000, 1))
	sync("shop", 1, "4000")
	c.apply(ev(envelope.Added, "web", "w1", 4100, 2))
	sync("web", 2, "4100")
	c.apply(ev(envelope.Modified, "shop", "s1", 5000, 1))
	open, err := startSoon(t, c, map[store.Pair]int64{cmPair: 5000})
	if err != nil {
		t.Fatal(err)
	}
	// web re-lists (the watch expired) at 4900, below shop's 5000: the usual lag of one list.
	c.apply(ev(envelope.Added, "web", "w1", 4100, 3))
	sync("web", 3, "4900")
	if _, _, _, err := c.read(&open, []store.Pair{cmPair}); err != nil {
		t.Fatalf("a namespace's list below another's events ended the watch: %v", err)
	}

	// The member is rebuilt: shop lists first.
	c.apply(ev(envelope.Added, "shop", "s2", 150, 4))
	sync("shop", 4, "155")
	if _, _, _, err := c.read(&open, []store.Pair{cmPair}); !errors.Is(err, errTooOld) {
		t.Errorf("watch open when shop went back: %v, want errTooOld", err)
	}
	between, err := startSoon(t, c, map[store.Pair]int64{cmPair: 155})
	if err != nil {
		t.Fatalf("start at shop's new list: %v", err)
	}
	c.apply(ev(envelope.Added, "shop", "s3", 158, 4))
	// web follows: its list is in the new numbering too, below what web showed before.
	c.apply(ev(envelope.Added, "web", "w2", 140, 5))
	sync("web", 5, "160")
	if _, _, _, err := c.read(&between, []store.Pair{cmPair}); !errors.Is(err, errTooOld) {
		t.Errorf("watch open when web went back: %v, want errTooOld", err)
	}
	// A client that listed at shop's 155 (the lowest of the namespaces' watermarks) watches from
	// there: it gets what came after, web's deletions of its old objects included, and nothing of
	// the old numbering.
	cur, err := startSoon(t, c, map[store.Pair]int64{cmPair: 155})
	if err != nil {
		t.Fatalf("start at shop's new list after web's: %v", err)
	}
	evs, _, _, err := c.read(&cur, []store.Pair{cmPair})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if e.rv > 155 { // what the watch sends (watcher.event skips the rest by resourceVersion)
			got = append(got, fmt.Sprintf("%s %s %d", e.typ, e.uid, e.rv))
		}
	}
	if want := []string{"ADDED uid-s3 158", "DELETED uid-w1 160"}; !slices.Equal(got, want) {
		t.Errorf("events after 155: %v, want %v", got, want)
	}
	if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: 4900}); !errors.Is(err, errTooOld) {
		t.Errorf("start at web's old 4900: %v, want errTooOld", err)
	}
}

// TestWatchCacheStartsAfterAMemberWentBack: a query API that starts after the rebuild replays the
// stream from before it. The events of the old numbering must neither lift the pair's head (a
// consistent read would wait for 5000 forever) nor reach a watch from the new numbering, and the
// old positions they show are 410, not a wait.
func TestWatchCacheStartsAfterAMemberWentBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		wm   store.Watermark // what the index says at the start
		from int64           // a position of the new numbering at or above the floor
		want []string        // the events a watch from there sends
	}{
		{"index past the rebuild", store.Watermark{Cluster: "member1", Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 170, Epoch: 2,
			Scopes: []store.WatermarkScope{{Namespace: "shop", ResourceVersion: 170, Epoch: 2, Synced: true}}}, 170, nil},
		{"index before the rebuild", store.Watermark{Cluster: "member1", Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 5000, Epoch: 1,
			Scopes: []store.WatermarkScope{{Namespace: "shop", ResourceVersion: 5000, Epoch: 1, Synced: true}}}, 160, []string{"ADDED uid-c 170"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newWatchCache(slog.New(slog.DiscardHandler), 1000, 1<<20)
			c.seedWatermarksLocked([]store.Watermark{tc.wm})
			beforeRebuild(c)
			rebuilt(c)
			c.replaying, c.ready = false, true
			if got := c.heads(apiResource{Resource: "configmaps"}, []string{"member1"}); got["member1"] != 170 {
				t.Errorf("heads = %v, want member1 at 170", got)
			}
			for _, rv := range []int64{5000, 4990} {
				if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: rv}); !errors.Is(err, errTooOld) {
					t.Errorf("start at the old %d: %v, want errTooOld", rv, err)
				}
			}
			cur, err := startSoon(t, c, map[store.Pair]int64{cmPair: tc.from})
			if err != nil {
				t.Fatalf("start at %d: %v", tc.from, err)
			}
			evs, _, _, err := c.read(&cur, []store.Pair{cmPair})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				if e.rv > tc.from {
					got = append(got, fmt.Sprintf("%s %s %d", e.typ, e.uid, e.rv))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("events after %d: %v, want %v", tc.from, got, tc.want)
			}
		})
	}
}

// TestWatchCacheEvictsTheOldNumbering: the old numbering's events leaving the window say nothing of
// the new numbering's positions (their resourceVersions are far above them).
func TestWatchCacheEvictsTheOldNumbering(t *testing.T) {
	c := newWatchCache(slog.New(slog.DiscardHandler), 5, 1<<20)
	c.replaying, c.ready = false, true
	beforeRebuild(c)
	rebuilt(c) // 3 events before, 5 after (b's list, the deletions of x and gone, b, c): the old ones go
	if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: 160}); err != nil {
		t.Errorf("start at 160 once the old numbering left the window: %v", err)
	}
	if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: 5000}); !errors.Is(err, errTooOld) {
		t.Errorf("start at the old 5000: %v, want errTooOld", err)
	}
}

// TestWatchCacheStartsLongAfterAMemberWentBack: the stream no longer holds the old numbering (its
// retention passed, or the replay starts after it), so only the index remembers it (the scope's
// ceiling): a position of the old numbering is 410, not a wait for the member to reach it (504).
func TestWatchCacheStartsLongAfterAMemberWentBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ceiling int64
		want    error // of a start at 5000
	}{
		{"the index remembers", 5000, errTooOld},
		{"nothing remembered: a position ahead", 0, errTooNew},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newWatchCache(slog.New(slog.DiscardHandler), 1000, 1<<20)
			c.seedWatermarksLocked([]store.Watermark{{Cluster: "member1", Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 155, Epoch: 2,
				Scopes: []store.WatermarkScope{{Namespace: "shop", ResourceVersion: 155, Epoch: 2, Synced: true, Ceiling: tc.ceiling}}}})
			c.apply(cmEvent(envelope.Modified, "b", 160, 2))
			c.apply(cmEvent(envelope.Added, "c", 170, 2))
			c.replaying, c.ready = false, true
			if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: 5000}); !errors.Is(err, tc.want) {
				t.Errorf("start at the old 5000: %v, want %v", err, tc.want)
			}
			for _, rv := range []int64{155, 160, 170} {
				if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: rv}); err != nil {
					t.Errorf("start at %d of the new numbering: %v", rv, err)
				}
			}
			if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: 6000}); !errors.Is(err, errTooNew) {
				t.Errorf("start at 6000, above the old numbering: %v, want errTooNew", err)
			}
		})
	}
}
