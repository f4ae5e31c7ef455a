package queryapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

func cmEvent(typ envelope.Type, name string, rv int, epoch int64) *envelope.Event {
	obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"shop","uid":"uid-%s","resourceVersion":"%d"},"data":{"k":"v"}}`, name, name, rv)
	return &envelope.Event{V: envelope.Version, Type: typ, Cluster: "member1", Version: "v1", Resource: "configmaps", Kind: "ConfigMap",
		Namespace: "shop", Name: name, UID: "uid-" + name, ResourceVersion: fmt.Sprint(rv), Epoch: epoch, Object: json.RawMessage(obj)}
}

func TestWatchCacheTurnsRelistsIntoEvents(t *testing.T) {
	c := newWatchCache(slog.New(slog.DiscardHandler), 1000, 1<<20)
	c.replaying, c.ready = false, true
	c.apply(cmEvent(envelope.Added, "a", 10, 1))
	c.apply(cmEvent(envelope.Added, "b", 11, 1))
	c.apply(cmEvent(envelope.Modified, "b", 12, 1))
	// A re-list (epoch 2) repeats a unchanged, has b changed, lacks nothing else; then c appears, b
	// vanished by the next list (epoch 3).
	c.apply(cmEvent(envelope.Added, "a", 10, 2))
	c.apply(cmEvent(envelope.Added, "b", 13, 2))
	count := 2
	c.apply(&envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "shop", Epoch: 2, ListResourceVersion: "14", Count: &count})
	c.apply(cmEvent(envelope.Added, "a", 10, 3))
	count = 1
	c.apply(&envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "shop", Epoch: 3, ListResourceVersion: "20", Count: &count})

	var got []string
	for _, e := range c.window {
		got = append(got, fmt.Sprintf("%s %s %d", e.typ, e.uid, e.rv))
	}
	want := []string{"ADDED uid-a 10", "ADDED uid-b 11", "MODIFIED uid-b 12", "MODIFIED uid-b 13", "DELETED uid-b 20"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("window = %v\nwant     %v", got, want)
	}
	if c.head[store.Pair{Cluster: "member1", Resource: "configmaps"}] != 20 {
		t.Errorf("head = %d, want 20", c.head[store.Pair{Cluster: "member1", Resource: "configmaps"}])
	}
	_ = watch.Added
}

// TestWatchDeliversSyncDeletes: a watch resumed from a list's resourceVersion gets the DELETED a
// re-list's SYNC implies, and the events after it, once.
func TestWatchDeliversSyncDeletes(t *testing.T) {
	st := &fakeStore{}
	srvURL, s := newFacadeServerWithCache(t, st)
	c := s.cache
	c.apply(cmEvent(envelope.Added, "a", 10, 1))
	c.apply(cmEvent(envelope.Added, "gone", 11, 1))
	c.apply(cmEvent(envelope.Added, "gone2", 12, 1))
	done := make(chan []string)
	go func() {
		resp, err := http.Get(srvURL + "/clusters/member1/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion=12")
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		defer resp.Body.Close()
		seen, err := readWatch(resp.Body, 3)
		if err != nil {
			t.Error(err)
		}
		done <- seen
	}()
	time.Sleep(200 * time.Millisecond)
	c.apply(cmEvent(envelope.Added, "a", 10, 2))
	c.apply(cmEvent(envelope.Added, "new", 15, 2))
	c.apply(&envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "shop", Epoch: 2, ListResourceVersion: "16"})
	select {
	case seen := <-done:
		// Both deletions of the SYNC, though they share its resourceVersion.
		want := []string{"ADDED new 15", "DELETED gone 16", "DELETED gone2 16"}
		slices.Sort(seen[1:])
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Errorf("watch saw %v, want %v", seen, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no events")
	}
}

// watchNames reads n events of a watch.
func watchNames(t *testing.T, url string, n int) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %d", url, resp.StatusCode)
	}
	seen, err := readWatch(resp.Body, n)
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// readWatch reads n events of a watch's body as "TYPE name resourceVersion".
func readWatch(body io.Reader, n int) ([]string, error) {
	dec := json.NewDecoder(body)
	var seen []string
	for len(seen) < n {
		var ev struct {
			Type   string
			Object struct {
				Metadata struct{ Name, ResourceVersion string }
			}
		}
		if err := dec.Decode(&ev); err != nil {
			return seen, fmt.Errorf("after %v: %w", seen, err)
		}
		seen = append(seen, ev.Type+" "+ev.Object.Metadata.Name+" "+ev.Object.Metadata.ResourceVersion)
	}
	return seen, nil
}

// TestWatchResumesInsideARelist: a one-cluster view's events carry their objects' own
// resourceVersions, which a re-list publishes in key order; a client resuming from one of them gets
// every later event of the list, lower resourceVersions included, and nothing it had.
func TestWatchResumesInsideARelist(t *testing.T) {
	srvURL, s := newFacadeServerWithCache(t, &fakeStore{})
	c := s.cache
	sync := func(epoch int64, listRV string) {
		c.apply(&envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "configmaps",
			Kind: "ConfigMap", Namespace: "shop", Epoch: epoch, ListResourceVersion: listRV})
	}
	c.apply(cmEvent(envelope.Added, "a", 10, 1))
	c.apply(cmEvent(envelope.Added, "b", 11, 1))
	c.apply(cmEvent(envelope.Added, "c", 12, 1))
	sync(1, "12")
	// The collector re-lists (epoch 2) after missing changes: a at 40 comes before b at 30 and c at
	// 35 (key order); then the list's SYNC, then the watch's next change.
	c.apply(cmEvent(envelope.Added, "a", 40, 2))
	c.apply(cmEvent(envelope.Added, "b", 30, 2))
	c.apply(cmEvent(envelope.Added, "c", 35, 2))
	sync(2, "41")
	c.apply(cmEvent(envelope.Modified, "a", 42, 2))

	base := srvURL + "/clusters/member1/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion="
	if got, want := watchNames(t, base+"40", 3), []string{"MODIFIED b 30", "MODIFIED c 35", "MODIFIED a 42"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resumed after a (40): %v, want %v", got, want)
	}
	if got, want := watchNames(t, base+"30", 2), []string{"MODIFIED c 35", "MODIFIED a 42"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resumed after b (30): %v, want %v", got, want)
	}
	// Outside a re-list a position is a resourceVersion as usual.
	if got, want := watchNames(t, base+"41", 1), []string{"MODIFIED a 42"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resumed from the SYNC (41): %v, want %v", got, want)
	}
}

// TestWatchWindowDropsARelistPosition: once an event of a re-list in progress has left the window,
// a watch from its resourceVersion cannot be placed after it: 410, not a silent gap.
func TestWatchWindowDropsARelistPosition(t *testing.T) {
	c := newWatchCache(slog.New(slog.DiscardHandler), 2, 1<<20)
	c.replaying, c.ready = false, true
	c.apply(cmEvent(envelope.Added, "a", 40, 1)) // the first list: epoch 1 before its SYNC
	c.apply(cmEvent(envelope.Added, "b", 30, 1))
	c.apply(cmEvent(envelope.Added, "c", 35, 1)) // a leaves the window
	pair := store.Pair{Cluster: "member1", Resource: "configmaps"}
	if _, err := c.start(t.Context(), map[store.Pair]int64{pair: 40}); !errors.Is(err, errTooOld) {
		t.Errorf("start at a dropped re-list event: %v, want errTooOld", err)
	}
	cur, err := c.start(t.Context(), map[store.Pair]int64{pair: 30})
	if err != nil {
		t.Fatal(err)
	}
	if cur.after[pair] != 2 {
		t.Errorf("start at b (30): after = %v, want seq 2", cur.after)
	}
}

func cmSync(epoch int64, listRV string) *envelope.Event {
	return &envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "configmaps",
		Kind: "ConfigMap", Namespace: "shop", Epoch: epoch, ListResourceVersion: listRV}
}

var cmPair = store.Pair{Cluster: "member1", Resource: "configmaps"}

// TestWatchCacheListInProgressAtStart: reading began inside a list (the index's watermark said
// listing), so the window lacks its first events: a position inside it that start cannot place is
// 410, and after the SYNC so is everything below it — never a watch that skips the list's rest.
func TestWatchCacheListInProgressAtStart(t *testing.T) {
	c := newWatchCache(slog.New(slog.DiscardHandler), 1000, 1<<20)
	c.floor[cmPair], c.head[cmPair], c.stable[cmPair], c.synced[cmPair] = 12, 12, 12, 1
	c.truncated[cmPair] = true // what fill does for a watermark that says listing
	c.replaying, c.ready = false, true
	// a at 40 (epoch 2) was published before the window began; b and c follow.
	c.apply(cmEvent(envelope.Added, "b", 30, 2))
	c.apply(cmEvent(envelope.Added, "c", 35, 2))
	c.apply(cmEvent(envelope.Added, "d", 45, 2))
	if _, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 40}); !errors.Is(err, errTooOld) {
		t.Errorf("start at a's 40, read before the window: %v, want errTooOld", err)
	}
	if _, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 12}); err != nil {
		t.Errorf("start at the list's watermark 12: %v", err)
	}
	c.apply(cmSync(2, "46"))
	if _, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 40}); !errors.Is(err, errTooOld) {
		t.Errorf("after the SYNC, start at 40: %v, want errTooOld", err)
	}
	if _, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 46}); err != nil {
		t.Errorf("start at the SYNC's 46: %v", err)
	}
}

// TestWatchCacheReplayedPurge: a PURGE replayed from before the objects' current list deletes
// nothing they hold now.
func TestWatchCacheReplayedPurge(t *testing.T) {
	c := newWatchCache(slog.New(slog.DiscardHandler), 1000, 1<<20)
	c.objectsOf(cmPair)["uid-x"] = stateOf([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"shop","uid":"uid-x","resourceVersion":"50"}}`), 30)
	c.kinds[cmPair] = "ConfigMap"
	c.floor[cmPair], c.head[cmPair], c.stable[cmPair], c.synced[cmPair] = 100, 100, 100, 30
	c.replaying, c.ready = true, true
	c.apply(&envelope.Event{V: envelope.Version, Type: envelope.Purge, Cluster: "member1", Version: "v1", Resource: "configmaps",
		Kind: "ConfigMap", Epoch: 20})
	if _, ok := c.objects[cmPair]["uid-x"]; !ok || len(c.window) != 0 || c.head[cmPair] != 100 {
		t.Errorf("an old PURGE deleted x: window %d events, head %d", len(c.window), c.head[cmPair])
	}
	c.apply(&envelope.Event{V: envelope.Version, Type: envelope.Purge, Cluster: "member1", Version: "v1", Resource: "configmaps",
		Kind: "ConfigMap", Epoch: 40})
	if _, ok := c.objects[cmPair]["uid-x"]; ok || len(c.window) != 1 || c.window[0].rv != 101 {
		t.Errorf("a newer PURGE kept x (window %d events)", len(c.window))
	}
}

// TestWatchCacheSyncPositionStaysResumable: the list's own resourceVersion is also a re-listed
// object's; once that event has left the window, the SYNC's position (what a LIST says) still
// starts a watch instead of a 410 the client would get again after every re-list.
func TestWatchCacheSyncPositionStaysResumable(t *testing.T) {
	c := newWatchCache(slog.New(slog.DiscardHandler), 2, 1<<20)
	c.replaying, c.ready = false, true
	c.apply(cmEvent(envelope.Added, "a", 40, 1))
	c.apply(cmEvent(envelope.Added, "b", 30, 1))
	c.apply(cmEvent(envelope.Added, "c", 35, 1)) // a leaves the window: floor 41
	c.apply(cmSync(1, "40"))
	if _, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 40}); err != nil {
		t.Errorf("start at the SYNC's 40 (a evicted before it): %v", err)
	}
	c2 := newWatchCache(slog.New(slog.DiscardHandler), 2, 1<<20)
	c2.replaying, c2.ready = false, true
	c2.apply(cmEvent(envelope.Added, "a", 40, 1))
	c2.apply(cmEvent(envelope.Added, "b", 30, 1))
	c2.apply(cmSync(1, "40"))
	for i, name := range []string{"d", "e"} { // another member's events push a and b out after the SYNC
		ev := cmEvent(envelope.Added, name, 45+i, 1)
		ev.Cluster = "member2"
		c2.apply(ev)
	}
	if _, err := c2.start(t.Context(), map[store.Pair]int64{cmPair: 40}); err != nil {
		t.Errorf("start at the SYNC's 40 (a evicted after it): %v", err)
	}
	if len(c2.relisting[cmPair]) != 0 {
		t.Errorf("relisting %v: the index of re-list events kept evicted ones", c2.relisting)
	}
}
