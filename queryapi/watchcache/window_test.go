package watchcache

import (
	"testing"

	"github.com/kubesearch/kubesearch/internal/store"
)

// TestEventWindowEvictsTheLargestByBytes: the budget in bytes is shared the same way: a pair of
// large objects gives up its own before a pair of small ones.
func TestEventWindowEvictsTheLargestByBytes(t *testing.T) {
	w := newEventWindow(1000, 10_000)
	small, large := store.Pair{Cluster: "a", Resource: "pods"}, store.Pair{Cluster: "b", Resource: "configmaps"}
	seq := uint64(0)
	add := func(p store.Pair, n int) {
		seq++
		w.add(&Event{Seq: seq, Pair: p, Object: make([]byte, n)})
	}
	for range 5 {
		add(small, 40) // 200 bytes each with the overhead
	}
	for range 20 {
		add(large, 2000)
		for w.evictOne() != nil {
		}
	}
	if got := len(w.since(small, 0)); got != 5 {
		t.Errorf("the small pair kept %d of its 5 events", got)
	}
	if w.bytes > 10_000 || w.evicted(small) != 0 || w.evicted(large) == 0 {
		t.Errorf("window %d bytes, evicted small through %d, large through %d", w.bytes, w.evicted(small), w.evicted(large))
	}
}

// TestWindowLogKeepsToTheBudget: the window's log (read by fleet watches) keeps events the window
// gave up behind a quiet pair's old event until it is compacted: what those hold stays within the
// window's budget, however large the events.
func TestWindowLogKeepsToTheBudget(t *testing.T) {
	const budget = 1 << 20
	w := newEventWindow(100000, budget)
	quiet := store.Pair{Cluster: "quiet", Resource: "configmaps"}
	busy := store.Pair{Cluster: "busy", Resource: "configmaps"}
	seq := uint64(1)
	add := func(p store.Pair, size int) {
		w.add(&Event{Seq: seq, Pair: p, Object: make([]byte, size)})
		seq++
		for w.evictOne() != nil {
		}
	}
	add(quiet, 10)
	most := int64(0)
	for range 3000 {
		add(busy, 100<<10)
		var retained int64
		for _, e := range w.log {
			if !w.holds(e) {
				retained += e.size()
			}
		}
		most = max(most, retained)
	}
	t.Logf("window holds %d events, %d bytes; the log retained up to %d MB of evicted events", w.count, w.bytes, most>>20)
	if most > budget {
		t.Errorf("evicted events retained by the log: %d bytes, over the window's budget of %d", most, budget)
	}
}
