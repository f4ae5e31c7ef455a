package watchcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

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
	c := New(Options{MaxEvents: 1000, MaxBytes: 1 << 20})
	c.replaying, c.ready = false, true
	c.Apply(cmEvent(envelope.Added, "a", 10, 1))
	c.Apply(cmEvent(envelope.Added, "b", 11, 1))
	c.Apply(cmEvent(envelope.Modified, "b", 12, 1))
	// A re-list (epoch 2) repeats a unchanged, has b changed, lacks nothing else; then c appears, b
	// vanished by the next list (epoch 3).
	c.Apply(cmEvent(envelope.Added, "a", 10, 2))
	c.Apply(cmEvent(envelope.Added, "b", 13, 2))
	count := 2
	c.Apply(&envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "shop", Epoch: 2, ListResourceVersion: "14", Count: &count})
	c.Apply(cmEvent(envelope.Added, "a", 10, 3))
	count = 1
	c.Apply(&envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "shop", Epoch: 3, ListResourceVersion: "20", Count: &count})

	var got []string
	for _, e := range c.win.all() {
		got = append(got, fmt.Sprintf("%s %s %d", e.Type, e.UID, e.RV))
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

// TestWatchWindowDropsARelistPosition: once an event of a re-list in progress has left the window,
// a watch from its resourceVersion cannot be placed after it: 410, not a silent gap.
func TestWatchWindowDropsARelistPosition(t *testing.T) {
	c := New(Options{MaxEvents: 2, MaxBytes: 1 << 20})
	c.replaying, c.ready = false, true
	c.Apply(cmEvent(envelope.Added, "a", 40, 1)) // the first list: epoch 1 before its SYNC
	c.Apply(cmEvent(envelope.Added, "b", 30, 1))
	c.Apply(cmEvent(envelope.Added, "c", 35, 1)) // a leaves the window
	pair := store.Pair{Cluster: "member1", Resource: "configmaps"}
	if _, err := c.start(t.Context(), map[store.Pair]int64{pair: 40}); !errors.Is(err, ErrTooOld) {
		t.Errorf("start at a dropped re-list event: %v, want ErrTooOld", err)
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
	c := New(Options{MaxEvents: 1000, MaxBytes: 1 << 20})
	c.floor[cmPair], c.head[cmPair], c.stable[cmPair], c.synced[cmPair] = 12, 12, 12, 1
	c.truncated[cmPair] = true // what fill does for a watermark that says listing
	c.replaying, c.ready = false, true
	// a at 40 (epoch 2) was published before the window began; b and c follow.
	c.Apply(cmEvent(envelope.Added, "b", 30, 2))
	c.Apply(cmEvent(envelope.Added, "c", 35, 2))
	c.Apply(cmEvent(envelope.Added, "d", 45, 2))
	if _, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 40}); !errors.Is(err, ErrTooOld) {
		t.Errorf("start at a's 40, read before the window: %v, want ErrTooOld", err)
	}
	if _, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 12}); err != nil {
		t.Errorf("start at the list's watermark 12: %v", err)
	}
	c.Apply(cmSync(2, "46"))
	if _, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 40}); !errors.Is(err, ErrTooOld) {
		t.Errorf("after the SYNC, start at 40: %v, want ErrTooOld", err)
	}
	if _, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 46}); err != nil {
		t.Errorf("start at the SYNC's 46: %v", err)
	}
}

// TestWatchCacheReplayedPurge: a PURGE replayed from before the objects' current list deletes
// nothing they hold now.
func TestWatchCacheReplayedPurge(t *testing.T) {
	c := New(Options{MaxEvents: 1000, MaxBytes: 1 << 20})
	c.objectsOf(cmPair)["uid-x"] = stateOf([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"shop","uid":"uid-x","resourceVersion":"50"}}`), 30)
	c.kinds[cmPair] = "ConfigMap"
	c.floor[cmPair], c.head[cmPair], c.stable[cmPair], c.synced[cmPair] = 100, 100, 100, 30
	c.replaying, c.ready = true, true
	c.Apply(&envelope.Event{V: envelope.Version, Type: envelope.Purge, Cluster: "member1", Version: "v1", Resource: "configmaps",
		Kind: "ConfigMap", Epoch: 20})
	if _, ok := c.objects[cmPair]["uid-x"]; !ok || c.win.count != 0 || c.head[cmPair] != 100 {
		t.Errorf("an old PURGE deleted x: window %d events, head %d", c.win.count, c.head[cmPair])
	}
	c.Apply(&envelope.Event{V: envelope.Version, Type: envelope.Purge, Cluster: "member1", Version: "v1", Resource: "configmaps",
		Kind: "ConfigMap", Epoch: 40})
	if evs := c.win.all(); len(evs) != 1 || evs[0].RV != 101 {
		t.Errorf("a newer PURGE kept x (window %d events)", len(evs))
	} else if _, ok := c.objects[cmPair]["uid-x"]; ok {
		t.Error("a newer PURGE kept x")
	}
}

// TestWatchCacheSyncPositionStaysResumable: the list's own resourceVersion is also a re-listed
// object's; once that event has left the window, the SYNC's position (what a LIST says) still
// starts a watch instead of a 410 the client would get again after every re-list.
func TestWatchCacheSyncPositionStaysResumable(t *testing.T) {
	c := New(Options{MaxEvents: 2, MaxBytes: 1 << 20})
	c.replaying, c.ready = false, true
	c.Apply(cmEvent(envelope.Added, "a", 40, 1))
	c.Apply(cmEvent(envelope.Added, "b", 30, 1))
	c.Apply(cmEvent(envelope.Added, "c", 35, 1)) // a leaves the window: floor 41
	c.Apply(cmSync(1, "40"))
	if _, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 40}); err != nil {
		t.Errorf("start at the SYNC's 40 (a evicted before it): %v", err)
	}
	c2 := New(Options{MaxEvents: 2, MaxBytes: 1 << 20})
	c2.replaying, c2.ready = false, true
	c2.Apply(cmEvent(envelope.Added, "a", 40, 1))
	c2.Apply(cmEvent(envelope.Added, "b", 30, 1))
	c2.Apply(cmSync(1, "40"))
	// A re-list of the pair (a newer epoch, its position still the SYNC's) pushes a and b out: the
	// pair's own events, as no other pair's take its share (window.go).
	for i, name := range []string{"d", "e"} {
		c2.Apply(cmEvent(envelope.Added, name, 45+i, 2))
	}
	if _, err := c2.start(t.Context(), map[store.Pair]int64{cmPair: 40}); err != nil {
		t.Errorf("start at the SYNC's 40 (a evicted after it): %v", err)
	}
	if _, a := c2.relisting[cmPair][40]; a || len(c2.relisting[cmPair]) != 2 {
		t.Errorf("relisting %v: the index of re-list events kept evicted ones", c2.relisting)
	}
}

// TestWatchWindowIsSharedFairly: one member churning takes its own history out of the window, not
// a quiet member's: a watch of the quiet member neither falls behind (410) nor wakes for events it
// does not read, while positions of the churning member age out as before.
func TestWatchWindowIsSharedFairly(t *testing.T) {
	c := New(Options{MaxEvents: 10, MaxBytes: 1 << 20})
	c.replaying, c.ready = false, true
	c.Apply(cmEvent(envelope.Added, "a", 10, 1))
	c.Apply(cmSync(1, "10"))
	c.Apply(cmEvent(envelope.Modified, "a", 11, 1))
	c.Apply(cmEvent(envelope.Modified, "a", 12, 1))
	quiet, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 10})
	if err != nil {
		t.Fatal(err)
	}
	busy := store.Pair{Cluster: "member2", Resource: "configmaps"}
	busyEvent := func(rv int) {
		ev := cmEvent(envelope.Modified, "x", rv, 1)
		ev.Cluster = "member2"
		c.Apply(ev)
	}
	busyEvent(100)
	c.Apply(&envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member2", Version: "v1", Resource: "configmaps",
		Kind: "ConfigMap", Namespace: "shop", Epoch: 1, ListResourceVersion: "100"})
	busyWatch, err := c.start(t.Context(), map[store.Pair]int64{busy: 100})
	if err != nil {
		t.Fatal(err)
	}
	drain(quiet.wake)
	for rv := 101; rv <= 300; rv++ {
		busyEvent(rv)
	}
	select {
	case <-quiet.wake:
		t.Error("the quiet member's watch was woken by another member's events")
	default:
	}
	evs, _, _, err := c.read(&quiet, []store.Pair{cmPair})
	if err != nil {
		t.Fatalf("the quiet member's watch after 200 events of another: %v", err)
	}
	if len(evs) != 3 || evs[1].RV != 11 || evs[2].RV != 12 { // the watch skips those it had (10)
		t.Errorf("the quiet member's watch read %d events, want its 10, 11 and 12", len(evs))
	}
	if again, err := c.start(t.Context(), map[store.Pair]int64{cmPair: 10}); err != nil {
		t.Errorf("a new watch of the quiet member from 10: %v", err)
	} else {
		c.stop(&again, []store.Pair{cmPair})
	}
	if _, _, _, err := c.read(&busyWatch, []store.Pair{busy}); !errors.Is(err, ErrTooOld) {
		t.Errorf("the busy member's watch that never read: %v, want ErrTooOld", err)
	}
	if _, err := c.start(t.Context(), map[store.Pair]int64{busy: 100}); !errors.Is(err, ErrTooOld) {
		t.Errorf("a watch of the busy member from 100: %v, want ErrTooOld", err)
	}
	if n := len(c.win.since(cmPair, 0)); n != 3 || c.win.count != 10 {
		t.Errorf("window: %d events of the quiet member, %d in all; want 3 and 10", n, c.win.count)
	}

	// Past its share, the quiet member's own events take its history.
	for rv := 13; rv <= 40; rv++ {
		c.Apply(cmEvent(envelope.Modified, "a", rv, 1))
	}
	if _, _, _, err := c.read(&quiet, []store.Pair{cmPair}); !errors.Is(err, ErrTooOld) {
		t.Errorf("the quiet member's watch after its own 28 events unread: %v, want ErrTooOld", err)
	}
	if n := len(c.win.since(cmPair, 0)); n != 5 {
		t.Errorf("window: %d events of each member, want an even split (5)", n)
	}
	c.stop(&quiet, []store.Pair{cmPair})
	c.stop(&busyWatch, []store.Pair{busy})
	if len(c.subs) != 0 {
		t.Errorf("subscriptions left after every watch stopped: %v", c.subs)
	}
}

func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// Ready turns true once the cache caught up, and stays true when the cache starts over.
func TestReadyIsSticky(t *testing.T) {
	c := New(Options{MaxEvents: 10, MaxBytes: 1 << 20})
	if c.Ready() {
		t.Fatal("ready before catching up")
	}
	c.CaughtUp()
	c.mu.Lock()
	c.resetLocked()
	c.mu.Unlock()
	if !c.Ready() {
		t.Error("not ready after the cache started over")
	}
}

// A DELETED the cache makes up carries the object's identity as the index stored it — apiVersion,
// kind, name, namespace, uid, labels, creation time, the cluster annotation — at the deletion's
// resourceVersion, built from the identity when needed.
func TestDeletedAtFromIdentity(t *testing.T) {
	obj := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","uid":"u-1","resourceVersion":"50",` +
		`"labels":{"app.kubernetes.io/name":"web","team.example.com/owner":"a\"b"},"creationTimestamp":"2026-12-01T10:00:00Z",` +
		`"annotations":{"resource.karmada.io/cached-from-cluster":"member1","other":"x"}},"spec":{"replicas":3}}`
	st := stateOf([]byte(obj), 7)
	pair := store.Pair{Cluster: "member1", Group: "apps", Resource: "deployments"}
	want := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","uid":"u-1","resourceVersion":"61",` +
		`"labels":{"app.kubernetes.io/name":"web","team.example.com/owner":"a\"b"},"creationTimestamp":"2026-12-01T10:00:00Z",` +
		`"annotations":{"resource.karmada.io/cached-from-cluster":"member1"}}}`
	if got := string(deletedAt(st, pair, "u-1", 61)); got != want {
		t.Errorf("deleted at 61:\n got %s\nwant %s", got, want)
	}
	if got := string(deletedAt(st, pair, "u-1", 0)); !strings.Contains(got, `"resourceVersion":"50"`) {
		t.Errorf("deleted without a resourceVersion: %s, want its last, 50", got)
	}
	bare := stateOf([]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop","uid":"u-2","resourceVersion":"9"}}`), 1)
	if got, want := string(deletedAt(bare, store.Pair{Cluster: "m2", Resource: "namespaces"}, "u-2", 0)),
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop","uid":"u-2","resourceVersion":"9","annotations":{"resource.karmada.io/cached-from-cluster":"m2"}}}`; got != want {
		t.Errorf("cluster-scoped, no labels:\n got %s\nwant %s", got, want)
	}
}
