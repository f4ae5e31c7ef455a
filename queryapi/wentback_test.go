package queryapi

import (
	"context"
	"encoding/json"
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
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// The tests of this file feed the watch cache issue 23's member: member1's configmaps reach 5000
// in epoch 1; the member is rebuilt, its collector (restarted: it publishes no DELETED of its own)
// lists b at 150 in epoch 2, SYNC at 155 (x and gone vanished), then b changes at 160 and c appears
// at 170.

// beforeRebuild is member1 before: a list at 4990 (epoch 1), then x changed at 5000.
func beforeRebuild(c *watchcache.Cache) {
	c.Apply(cmEvent(envelope.Added, "x", 4990, 1))
	c.Apply(cmEvent(envelope.Added, "gone", 4980, 1))
	c.Apply(cmSync(1, "4990"))
	c.Apply(cmEvent(envelope.Modified, "x", 5000, 1))
}

// rebuilt is member1 rebuilt: the list of epoch 2 and the changes after it.
func rebuilt(c *watchcache.Cache) {
	c.Apply(cmEvent(envelope.Added, "b", 150, 2))
	c.Apply(cmSync(2, "155"))
	c.Apply(cmEvent(envelope.Modified, "b", 160, 2))
	c.Apply(cmEvent(envelope.Added, "c", 170, 2))
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
	c := watchcache.New(watchcache.Options{Log: s.log, MaxEvents: 1000, MaxBytes: 1 << 20})
	c.Seed(wms[1:]) // member2 is where the index is; member1 comes from the stream
	c.CaughtUp()
	beforeRebuild(c)
	rebuilt(c)
	s.cache = c
	s.engine = s.routes()
	srv := httptest.NewServer(s.engine)
	t.Cleanup(srv.Close)
	return srv.URL, s
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
			beforeRebuild(cacheOf(s))
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
			rebuilt(cacheOf(s))
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
	if got := s.heads(apiResource{Resource: "configmaps"}, []string{"member1"}); got["member1"] != 170 {
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
