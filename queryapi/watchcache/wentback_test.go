package watchcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

// The tests of this file feed the watch cache issue 23's member: member1's configmaps reach 5000
// in epoch 1; the member is rebuilt, its collector (restarted: it publishes no DELETED of its own)
// lists b at 150 in epoch 2, SYNC at 155 (x and gone vanished), then b changes at 160 and c appears
// at 170.

// beforeRebuild is member1 before: a list at 4990 (epoch 1), then x changed at 5000.
func beforeRebuild(c *Cache) {
	c.Apply(cmEvent(envelope.Added, "x", 4990, 1))
	c.Apply(cmEvent(envelope.Added, "gone", 4980, 1))
	c.Apply(cmSync(1, "4990"))
	c.Apply(cmEvent(envelope.Modified, "x", 5000, 1))
}

// rebuilt is member1 rebuilt: the list of epoch 2 and the changes after it.
func rebuilt(c *Cache) {
	c.Apply(cmEvent(envelope.Added, "b", 150, 2))
	c.Apply(cmSync(2, "155"))
	c.Apply(cmEvent(envelope.Modified, "b", 160, 2))
	c.Apply(cmEvent(envelope.Added, "c", 170, 2))
}

// startSoon is c.start bounded: a position taken for one ahead of the stream waits, then ErrTooNew.
func startSoon(t *testing.T, c *Cache, from map[store.Pair]int64) (cursor, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	return c.start(ctx, from)
}

// TestWatchCacheWentBackInOneScope: a pair listed per namespace has one list per namespace, each
// with its own SYNC. One that lists below what the others showed meanwhile is the usual lag, not a
// member that went back; one below what its own namespace showed is. The other namespaces then
// come over to the new numbering one by one: each ends the open watches again, and the positions of
// the new numbering stay valid.
func TestWatchCacheWentBackInOneScope(t *testing.T) {
	c := New(Options{MaxEvents: 1000, MaxBytes: 1 << 20})
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
		c.Apply(e)
	}
	c.Apply(ev(envelope.Added, "shop", "s1", 4000, 1))
	sync("shop", 1, "4000")
	c.Apply(ev(envelope.Added, "web", "w1", 4100, 2))
	sync("web", 2, "4100")
	c.Apply(ev(envelope.Modified, "shop", "s1", 5000, 1))
	open, err := startSoon(t, c, map[store.Pair]int64{cmPair: 5000})
	if err != nil {
		t.Fatal(err)
	}
	// web re-lists (the watch expired) at 4900, below shop's 5000: the usual lag of one list.
	c.Apply(ev(envelope.Added, "web", "w1", 4100, 3))
	sync("web", 3, "4900")
	if _, _, _, err := c.read(&open, []store.Pair{cmPair}); err != nil {
		t.Fatalf("a namespace's list below another's events ended the watch: %v", err)
	}

	// The member is rebuilt: shop lists first.
	c.Apply(ev(envelope.Added, "shop", "s2", 150, 4))
	sync("shop", 4, "155")
	if _, _, _, err := c.read(&open, []store.Pair{cmPair}); !errors.Is(err, ErrTooOld) {
		t.Errorf("watch open when shop went back: %v, want ErrTooOld", err)
	}
	between, err := startSoon(t, c, map[store.Pair]int64{cmPair: 155})
	if err != nil {
		t.Fatalf("start at shop's new list: %v", err)
	}
	c.Apply(ev(envelope.Added, "shop", "s3", 158, 4))
	// web follows: its list is in the new numbering too, below what web showed before.
	c.Apply(ev(envelope.Added, "web", "w2", 140, 5))
	sync("web", 5, "160")
	if _, _, _, err := c.read(&between, []store.Pair{cmPair}); !errors.Is(err, ErrTooOld) {
		t.Errorf("watch open when web went back: %v, want ErrTooOld", err)
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
		if e.RV > 155 { // what the watch sends (watcher.event skips the rest by resourceVersion)
			got = append(got, fmt.Sprintf("%s %s %d", e.Type, e.UID, e.RV))
		}
	}
	if want := []string{"ADDED uid-s3 158", "DELETED uid-w1 160"}; !slices.Equal(got, want) {
		t.Errorf("events after 155: %v, want %v", got, want)
	}
	if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: 4900}); !errors.Is(err, ErrTooOld) {
		t.Errorf("start at web's old 4900: %v, want ErrTooOld", err)
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
			c := New(Options{MaxEvents: 1000, MaxBytes: 1 << 20})
			c.seedWatermarksLocked([]store.Watermark{tc.wm})
			beforeRebuild(c)
			rebuilt(c)
			c.replaying, c.ready = false, true
			if got := c.Heads([]store.Pair{cmPair}); got[cmPair] != 170 {
				t.Errorf("heads = %v, want member1 at 170", got)
			}
			for _, rv := range []int64{5000, 4990} {
				if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: rv}); !errors.Is(err, ErrTooOld) {
					t.Errorf("start at the old %d: %v, want ErrTooOld", rv, err)
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
				if e.RV > tc.from {
					got = append(got, fmt.Sprintf("%s %s %d", e.Type, e.UID, e.RV))
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
	c := New(Options{MaxEvents: 5, MaxBytes: 1 << 20})
	c.replaying, c.ready = false, true
	beforeRebuild(c)
	rebuilt(c) // 3 events before, 5 after (b's list, the deletions of x and gone, b, c): the old ones go
	if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: 160}); err != nil {
		t.Errorf("start at 160 once the old numbering left the window: %v", err)
	}
	if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: 5000}); !errors.Is(err, ErrTooOld) {
		t.Errorf("start at the old 5000: %v, want ErrTooOld", err)
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
		{"the index remembers", 5000, ErrTooOld},
		{"nothing remembered: a position ahead", 0, ErrTooNew},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{MaxEvents: 1000, MaxBytes: 1 << 20})
			c.seedWatermarksLocked([]store.Watermark{{Cluster: "member1", Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 155, Epoch: 2,
				Scopes: []store.WatermarkScope{{Namespace: "shop", ResourceVersion: 155, Epoch: 2, Synced: true, Ceiling: tc.ceiling}}}})
			c.Apply(cmEvent(envelope.Modified, "b", 160, 2))
			c.Apply(cmEvent(envelope.Added, "c", 170, 2))
			c.replaying, c.ready = false, true
			if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: 5000}); !errors.Is(err, tc.want) {
				t.Errorf("start at the old 5000: %v, want %v", err, tc.want)
			}
			for _, rv := range []int64{155, 160, 170} {
				if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: rv}); err != nil {
					t.Errorf("start at %d of the new numbering: %v", rv, err)
				}
			}
			if _, err := startSoon(t, c, map[store.Pair]int64{cmPair: 6000}); !errors.Is(err, ErrTooNew) {
				t.Errorf("start at 6000, above the old numbering: %v, want ErrTooNew", err)
			}
		})
	}
}
