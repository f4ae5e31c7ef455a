package watchcache

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// BenchmarkFleetRead is one read of a fleet watch of 1,000 pairs (a fleet view's ConfigMaps of
// 1,000 clusters, a stream of 12 partitions) after one new event, the read a watch makes at each
// wake-up. It holds the cache's lock, which every watch and the stream's reader share: 100
// watchers at 200 changes/s make up to 20,000 of these a second.
func BenchmarkFleetRead(b *testing.B) {
	const clusters, partitions = 1000, 12
	c := New(Options{MaxEvents: 10 * clusters, MaxBytes: 64 << 20})
	from := map[int]int64{}
	for q := range partitions {
		from[q] = 0
	}
	c.startMarks(from)
	offsets := map[int]int64{}
	pairs := make([]store.Pair, clusters)
	for i := range pairs {
		cl := fmt.Sprintf("member-%04d", i)
		pairs[i] = store.Pair{Cluster: cl, Resource: "configmaps"}
		c.Seed([]store.Watermark{{Cluster: cl, Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 5, Epoch: 1}})
	}
	c.CaughtUp()
	rv := 10
	apply := func(cl string) {
		ev := clusterEvent(cl, envelope.Added, fmt.Sprint("o", rv), rv, 1)
		q := stream.PartitionOf(ev.Key(), partitions)
		c.applyAt(stream.Message{Partition: q, Offset: offsets[q]}, func() { c.applyLocked(ev) })
		offsets[q]++
		rv++
	}
	for _, p := range pairs {
		apply(p.Cluster)
	}
	w, err := c.Start(b.Context(), pairs, map[store.Pair]int64{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	if evs, _, _, err := w.Read(); err != nil || len(evs) != clusters {
		b.Fatalf("first read: %d events, %v", len(evs), err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		apply(pairs[i%clusters].Cluster)
		i++
		b.StartTimer()
		if evs, _, _, err := w.Read(); err != nil || len(evs) != 1 {
			b.Fatalf("read: %d events, %v", len(evs), err)
		}
	}
}

// TestFleetReadsWhatChanged: a read of many pairs costs what changed since the last one, and says
// the same as asking each pair. It returns the events of its pairs in the stream's order (from the
// window's log when that is shorter, past the events the window gave up), the stable positions of
// the pairs that moved (by an event or without one, as a SYNC moves them) — every pair's at the
// first read and when the log of moves no longer reaches back to the last — and still sees a gap
// or a member that went back in any of its pairs.
func TestFleetReadsWhatChanged(t *testing.T) {
	c := New(Options{MaxEvents: 60, MaxBytes: 64 << 20})
	pairs := make([]store.Pair, 50)
	for i := range pairs {
		pairs[i] = store.Pair{Cluster: fmt.Sprintf("member-%02d", i), Resource: "configmaps"}
		c.Seed([]store.Watermark{{Cluster: pairs[i].Cluster, Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 5, Epoch: 1}})
	}
	c.ReadPartitionsForTest(4)
	c.CaughtUp()
	rv := 10
	apply := func(p store.Pair) {
		c.Apply(clusterEvent(p.Cluster, envelope.Added, fmt.Sprint("o", rv), rv, 1))
		rv++
	}
	for _, p := range pairs {
		apply(p)
	}
	for range 20 {
		apply(pairs[0]) // over the budget: pairs[0] gives up its oldest events, which stay in the log
	}
	if len(c.win.log) <= c.win.count {
		t.Fatalf("the log holds %d entries for %d events: no evicted entry to skip", len(c.win.log), c.win.count)
	}
	want := func(ps []store.Pair, next uint64) []*Event {
		var out []*Event
		for _, p := range ps {
			out = append(out, c.win.since(p, next)...)
		}
		slices.SortFunc(out, func(a, b *Event) int { return cmp.Compare(a.Seq, b.Seq) })
		return out
	}
	keys := func(m map[store.Pair]int64) []string {
		var out []string
		for p, rv := range m {
			if c.stable[p] != rv {
				t.Errorf("%s's stable position read as %d, want %d", p.Cluster, rv, c.stable[p])
			}
			out = append(out, p.Cluster)
		}
		slices.Sort(out)
		return out
	}
	from := func(ps []store.Pair) map[store.Pair]int64 {
		m := map[store.Pair]int64{}
		for _, p := range ps {
			m[p] = c.floor[p] // where the window starts
		}
		return m
	}
	w, err := c.Start(t.Context(), pairs, from(pairs))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	first := want(pairs, 0)
	evs, stable, _, err := w.Read()
	if err != nil || !slices.Equal(evs, first) || len(stable) != len(pairs) {
		t.Fatalf("first read: %d events (want %d), %d positions (want %d), %v", len(evs), len(first), len(stable), len(pairs), err)
	}
	// Events of three pairs, and a move without an event of a fourth.
	next := c.nextSeq
	for _, i := range []int{7, 3, 7, 12} {
		apply(pairs[i])
	}
	c.mu.Lock()
	c.setStableLocked(pairs[30], 400)
	c.mu.Unlock()
	evs, stable, _, err = w.Read()
	if err != nil || !slices.Equal(evs, want(pairs, next)) {
		t.Fatalf("second read: %d events, %v", len(evs), err)
	}
	if got := keys(stable); !slices.Equal(got, []string{"member-03", "member-07", "member-12", "member-30"}) {
		t.Errorf("second read's moved pairs: %v", got)
	}
	// Nothing since: nothing read, no position.
	if evs, stable, _, err = w.Read(); err != nil || len(evs) != 0 || len(stable) != 0 {
		t.Errorf("an idle read: %d events, %d positions, %v", len(evs), len(stable), err)
	}
	// More moves than the log keeps, all of other pairs: every position again.
	c.mu.Lock()
	for range 2*maxMovedLog + 1 {
		c.noteMovedLocked(store.Pair{Cluster: "elsewhere", Resource: "configmaps"})
	}
	c.mu.Unlock()
	if _, stable, _, err = w.Read(); err != nil || len(stable) != len(pairs) {
		t.Errorf("a read the log of moves no longer reaches: %d positions, want %d (%v)", len(stable), len(pairs), err)
	}
	// A pair churning past the window: the watch of it has a gap; one of other pairs does not.
	quiet, err := c.Start(t.Context(), pairs[40:], from(pairs[40:]))
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Stop()
	if _, _, _, err := quiet.Read(); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		apply(pairs[1])
	}
	if _, _, _, err := w.Read(); !errors.Is(err, ErrTooOld) {
		t.Errorf("a read past its pair's evicted events: %v, want ErrTooOld", err)
	}
	next = c.nextSeq
	apply(pairs[45])
	if evs, _, _, err := quiet.Read(); err != nil || len(evs) != 1 || evs[0].Pair != pairs[45] || evs[0].Seq != next {
		t.Errorf("the quiet watch: %d events, %v", len(evs), err)
	}
	// A member of the quiet watch went back: its next read ends it.
	c.mu.Lock()
	c.resets[pairs[41]]++
	c.resetCount++
	c.mu.Unlock()
	if _, _, _, err := quiet.Read(); !errors.Is(err, ErrTooOld) {
		t.Errorf("a read after a member went back: %v, want ErrTooOld", err)
	}
}
