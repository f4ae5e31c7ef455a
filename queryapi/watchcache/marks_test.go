package watchcache

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// clusterEvent is cmEvent of another member.
func clusterEvent(cluster string, typ envelope.Type, name string, rv int, epoch int64) *envelope.Event {
	ev := cmEvent(typ, name, rv, epoch)
	ev.Cluster = cluster
	ev.Object = []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"shop","uid":"uid-%s","resourceVersion":"%d"}}`, name, name, rv))
	return ev
}

// TestMarksReadBackEveryPosition: a stream of two partitions, members' events interleaved, a
// SYNC moving a position without an event. At every mark, At answers each pair's stable position
// after exactly the records before it; MarkOf finds a mark for the positions at any point; an
// evicted event takes the marks at or before it with it (410, as the floor does); a mark past the
// stream is ErrTooNew.
func TestMarksReadBackEveryPosition(t *testing.T) {
	c := New(Options{MaxEvents: 1000, MaxBytes: 1 << 20})
	c.startMarks(map[int]int64{0: 100, 1: 100})
	for _, cl := range []string{"m1", "m2", "m3", "m4"} {
		c.Seed([]store.Watermark{{Cluster: cl, Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 5, Epoch: 1}})
	}
	c.CaughtUp()
	pairs := []store.Pair{}
	for _, cl := range []string{"m1", "m2", "m3", "m4"} {
		pairs = append(pairs, store.Pair{Cluster: cl, Resource: "configmaps"})
	}
	// Every state: the read offsets and each pair's stable position after each record.
	type state struct {
		mark Mark
		pos  map[store.Pair]int64
	}
	snap := func() state {
		c.mu.Lock()
		defer c.mu.Unlock()
		s := state{Mark{}, map[store.Pair]int64{}}
		for q, off := range c.readTo {
			s.mark[q] = off
		}
		for _, p := range pairs {
			s.pos[p] = c.stable[p]
		}
		return s
	}
	states := []state{snap()}
	offsets := map[int]int64{0: 100, 1: 100}
	apply := func(ev *envelope.Event) {
		q := stream.PartitionOf(ev.Key(), 2)
		c.applyAt(stream.Message{Partition: q, Offset: offsets[q]}, func() { c.applyLocked(ev) })
		offsets[q]++
		states = append(states, snap())
	}
	for i := range 12 {
		cl := []string{"m1", "m2", "m3", "m4"}[i%4]
		apply(clusterEvent(cl, envelope.Added, fmt.Sprint("o", i), 10+i, 1))
	}
	sync := cmSync(1, "90")
	sync.Cluster = "m1" // m1's list completes above its events: a position moved by no event
	apply(sync)
	for i, s := range states {
		got, err := c.At(context.Background(), s.mark, pairs)
		if err != nil {
			t.Fatalf("state %d: At(%v): %v", i, s.mark, err)
		}
		for _, p := range pairs {
			if got[p] != s.pos[p] {
				t.Errorf("state %d: At(%v)[%s] = %d, want %d", i, s.mark, p.Cluster, got[p], s.pos[p])
			}
		}
		// MarkOf finds a mark reading back to the same positions.
		m := c.MarkOf(s.pos)
		back, err := c.At(context.Background(), m, pairs)
		if err != nil || fmt.Sprint(back) != fmt.Sprint(s.pos) {
			t.Errorf("state %d: At(MarkOf(%v)) = %v, %v", i, s.pos, back, err)
		}
	}
	// A mark ahead of the stream waits, then is too new.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.At(ctx, Mark{0: 1000, 1: 1000}, pairs); !errors.Is(err, ErrTooNew) {
		t.Errorf("a mark past the stream: %v, want ErrTooNew", err)
	}
	// One from before reading began, or of a partition the position lacks, is too old.
	if _, err := c.At(context.Background(), Mark{0: 99, 1: 100}, pairs); !errors.Is(err, ErrTooOld) {
		t.Errorf("a mark before the start: %v, want ErrTooOld", err)
	}
	if _, err := c.At(context.Background(), Mark{0: 100}, pairs); !errors.Is(err, ErrTooOld) {
		t.Errorf("a mark lacking a partition: %v, want ErrTooOld", err)
	}

	// A small window evicts: marks before an evicted event of a pair are 410 for it, later ones
	// still read back.
	small := New(Options{MaxEvents: 3, MaxBytes: 1 << 20})
	small.startMarks(map[int]int64{0: 0})
	small.Seed([]store.Watermark{{Cluster: "member1", Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 5, Epoch: 1}})
	small.CaughtUp()
	for i := range 6 {
		small.applyAt(stream.Message{Partition: 0, Offset: int64(i)}, func() { small.applyLocked(cmEvent(envelope.Added, fmt.Sprint("o", i), 10+i, 1)) })
	}
	// Events at offsets 0..2 are evicted: marks up to 2 lack them; 3 is right after the last one.
	if _, err := small.At(context.Background(), Mark{0: 2}, []store.Pair{cmPair}); !errors.Is(err, ErrTooOld) {
		t.Errorf("a mark before an evicted event: %v, want ErrTooOld", err)
	}
	if got, err := small.At(context.Background(), Mark{0: 3}, []store.Pair{cmPair}); err != nil || got[cmPair] != 12 {
		t.Errorf("the mark after the last evicted event: %v, %v; want 12", got, err)
	}
	if got, err := small.At(context.Background(), Mark{0: 6}, []store.Pair{cmPair}); err != nil || got[cmPair] != 15 {
		t.Errorf("the mark at the end: %v, %v; want 15", got, err)
	}

	// A pair whose lists complete without changing anything moves without events: its history
	// keeps the newest quietChanges of those moves, not every one since the start.
	for i := range 3 * quietChanges {
		sync := cmSync(1, fmt.Sprint(1000+i))
		small.applyAt(stream.Message{Partition: 0, Offset: int64(6 + i)}, func() { small.applyLocked(sync) })
	}
	if n := len(small.hist[cmPair].changes); n > small.win.held(cmPair)+quietChanges {
		t.Errorf("history of a pair re-listed %d times: %d changes", 3*quietChanges, n)
	}
	end := int64(6 + 3*quietChanges)
	if got, err := small.At(context.Background(), Mark{0: end}, []store.Pair{cmPair}); err != nil || got[cmPair] != int64(1000+3*quietChanges-1) {
		t.Errorf("the mark at the end: %v, %v", got, err)
	}
	if _, err := small.At(context.Background(), Mark{0: 7}, []store.Pair{cmPair}); !errors.Is(err, ErrTooOld) {
		t.Errorf("a mark before the changes kept: %v, want ErrTooOld", err)
	}
}

// TestReadsNameMovesWithoutEvents: a watch's first read names every partition (it cannot know what
// came before it); a later read names the pairs a SYNC moved without an event since the previous
// read, and nothing for pairs only events moved.
func TestReadsNameMovesWithoutEvents(t *testing.T) {
	c := New(Options{MaxEvents: 1000, MaxBytes: 1 << 20})
	m1, m2 := store.Pair{Cluster: "m1", Resource: "configmaps"}, store.Pair{Cluster: "m2", Resource: "configmaps"}
	for _, p := range []store.Pair{m1, m2} {
		c.Seed([]store.Watermark{{Cluster: p.Cluster, Resource: p.Resource, Kind: "ConfigMap", ResourceVersion: 5, Epoch: 1}})
	}
	c.ReadPartitionsForTest(1)
	c.CaughtUp()
	w, err := c.Start(context.Background(), []store.Pair{m1, m2}, map[store.Pair]int64{m1: 5, m2: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, _, _, err := w.Read(); err != nil {
		t.Fatal(err)
	}
	if u := w.Unevented(); len(u.Partitions) != 1 || len(u.Pairs) != 0 {
		t.Errorf("first read: %+v, want partition 0 and no pairs", u)
	}
	c.Apply(clusterEvent("m2", envelope.Added, "a", 10, 1))
	if _, _, _, err := w.Read(); err != nil {
		t.Fatal(err)
	}
	if u := w.Unevented(); len(u.Partitions) != 0 || len(u.Pairs) != 0 {
		t.Errorf("after an event: %+v, want nothing", u)
	}
	sync := cmSync(1, "40")
	sync.Cluster = "m1"
	c.Apply(sync)
	c.Apply(clusterEvent("m2", envelope.Added, "b", 11, 1))
	if _, _, _, err := w.Read(); err != nil {
		t.Fatal(err)
	}
	if u := w.Unevented(); len(u.Partitions) != 0 || fmt.Sprint(u.Pairs) != fmt.Sprint([]store.Pair{m1}) {
		t.Errorf("after m1's SYNC: %+v, want m1", u)
	}
}

// TestEventsOfAnotherPartitionsRecordCarryNoOffset: a record of one partition that makes events of
// a pair of another (a PURGE deletes every resource of its kind) gives them no offset: a mark of
// their partition does not place them, and a watch must not move its mark there by them.
func TestEventsOfAnotherPartitionsRecordCarryNoOffset(t *testing.T) {
	c := New(Options{MaxEvents: 100, MaxBytes: 1 << 20})
	c.startMarks(map[int]int64{0: 0, 1: 0})
	c.CaughtUp()
	a := store.Pair{Cluster: "m0", Resource: "configmaps"}
	var b store.Pair
	for i := 1; b.Cluster == ""; i++ {
		if p := (store.Pair{Cluster: fmt.Sprint("m", i), Resource: "configmaps"}); c.partitionOf(p) != c.partitionOf(a) {
			b = p
		}
	}
	c.applyAt(stream.Message{Partition: c.partitionOf(a), Offset: 7}, func() {
		c.appendLocked(&Event{Type: watch.Deleted, Pair: a, UID: "x", RV: 2})
		c.appendLocked(&Event{Type: watch.Deleted, Pair: b, UID: "y", RV: 2})
	})
	if e := c.win.since(a, 0); len(e) != 1 || e[0].Offset != 7 {
		t.Errorf("the record's own pair: %+v, want offset 7", e)
	}
	if e := c.win.since(b, 0); len(e) != 1 || e[0].Offset != noOffset {
		t.Errorf("a pair of the other partition: %+v, want no offset", e)
	}
}
