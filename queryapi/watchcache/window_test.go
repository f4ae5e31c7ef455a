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
