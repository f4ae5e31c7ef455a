package watchcache

import (
	"cmp"
	"container/heap"
	"slices"
	"sort"

	"github.com/kubesearch/kubesearch/internal/store"
)

// eventWindow is the watch cache's window: the newest events of every pair, within a budget of
// events and bytes shared by all pairs. When it is over budget, the pair holding the largest share
// gives up its oldest event. So a pair's history is taken only by pairs holding no more than it
// does: a member churning (or a tenant churning its namespace) shortens its own history first, and
// never forces a quiet pair's watches to re-list, nor tells them of that churn by a 410. A single
// window evicted by age, as kube-apiserver keeps one per resource, would let any member's traffic
// age every other's positions out.
//
// Sequence numbers are global (the stream's order) and rise within each pair's ring.
type eventWindow struct {
	maxEvents int
	maxBytes  int64

	pairs  map[store.Pair]*pairEvents
	byLoad loadHeap // pairs holding events, the largest share first
	count  int
	bytes  int64
	// log is every event held, in the stream's order, among events no longer held (a pair gives
	// up its oldest, not the window's oldest): a watch of many pairs reads what came after it here
	// instead of asking each pair. It is compacted when those outnumber the events held.
	log []*Event
	// newestEvicted is the highest seq of an event that left the window: the log holds every
	// event above it. stale and staleBytes count the log's entries no longer held, and what they
	// hold: the log is compacted before they pass the events held, or an eighth of the budget.
	newestEvicted uint64
	stale         int
	staleBytes    int64
}

// pairEvents are one pair's events in the window.
type pairEvents struct {
	events []*Event // oldest first
	bytes  int64
	// evicted is the seq of the pair's newest event that left the window, 0 if none: a watch that
	// had not read it has a gap.
	evicted uint64
	load    float64 // the larger of its fractions of the two budgets
	at      int     // index in byLoad, -1 while it holds no event
}

func newEventWindow(maxEvents int, maxBytes int64) *eventWindow {
	return &eventWindow{maxEvents: max(maxEvents, 1), maxBytes: max(maxBytes, 1), pairs: map[store.Pair]*pairEvents{}}
}

func (w *eventWindow) measure(pe *pairEvents) {
	pe.load = max(float64(len(pe.events))/float64(w.maxEvents), float64(pe.bytes)/float64(w.maxBytes))
}

func (w *eventWindow) add(e *Event) {
	pe := w.pairs[e.Pair]
	if pe == nil {
		pe = &pairEvents{at: -1}
		w.pairs[e.Pair] = pe
	}
	pe.events = append(pe.events, e)
	w.log = append(w.log, e)
	pe.bytes += e.size()
	w.count++
	w.bytes += e.size()
	w.measure(pe)
	if pe.at < 0 {
		heap.Push(&w.byLoad, pe)
	} else {
		heap.Fix(&w.byLoad, pe.at)
	}
}

// evictOne takes the oldest event of the pair holding the largest share while the window is over
// budget; nil when it is within it. One event always stays, however large.
func (w *eventWindow) evictOne() *Event {
	if w.count <= 1 || (w.count <= w.maxEvents && w.bytes <= w.maxBytes) {
		return nil
	}
	pe := w.byLoad[0]
	old := pe.events[0]
	pe.events[0] = nil
	pe.events = pe.events[1:]
	pe.bytes -= old.size()
	pe.evicted = old.Seq
	w.newestEvicted = max(w.newestEvicted, old.Seq)
	w.stale++
	w.staleBytes += old.size()
	w.count--
	w.bytes -= old.size()
	w.measure(pe)
	if len(pe.events) == 0 {
		heap.Remove(&w.byLoad, pe.at)
		pe.events = nil // drop the backing array
	} else {
		heap.Fix(&w.byLoad, pe.at)
	}
	for len(w.log) > 0 && !w.holds(w.log[0]) {
		w.stale--
		w.staleBytes -= w.log[0].size()
		w.log[0] = nil
		w.log = w.log[1:]
	}
	if w.stale > w.count+1024 || w.staleBytes > w.maxBytes/8 {
		// Each compaction frees at least an eighth of the budget or as many entries as are held:
		// its cost is spread over the evictions that made it due.
		w.log = slices.DeleteFunc(w.log, func(e *Event) bool { return !w.holds(e) })
		w.stale, w.staleBytes = 0, 0
	}
	return old
}

// holds says whether the window still holds e (a pair's events leave it oldest first).
func (w *eventWindow) holds(e *Event) bool {
	pe := w.pairs[e.Pair]
	return pe != nil && len(pe.events) > 0 && pe.events[0].Seq <= e.Seq
}

// logSince is the log from the first event with a seq at or above seq (shared: the caller must not
// change it); entries at or below newestEvicted may be events no longer held.
func (w *eventWindow) logSince(seq uint64) []*Event {
	i := sort.Search(len(w.log), func(i int) bool { return w.log[i].Seq >= seq })
	return w.log[i:]
}

// since are the pair's events with a seq at or above seq (shared: the caller must not change it).
func (w *eventWindow) since(p store.Pair, seq uint64) []*Event {
	pe := w.pairs[p]
	if pe == nil {
		return nil
	}
	i := sort.Search(len(pe.events), func(i int) bool { return pe.events[i].Seq >= seq })
	return pe.events[i:]
}

// held is how many of the pair's events the window holds.
func (w *eventWindow) held(p store.Pair) int {
	if pe := w.pairs[p]; pe != nil {
		return len(pe.events)
	}
	return 0
}

// evicted is the seq of the pair's newest event that left the window, 0 if none.
func (w *eventWindow) evicted(p store.Pair) uint64 {
	if pe := w.pairs[p]; pe != nil {
		return pe.evicted
	}
	return 0
}

// get is the pair's event with seq, nil when the window does not hold it.
func (w *eventWindow) get(p store.Pair, seq uint64) *Event {
	evs := w.since(p, seq)
	if len(evs) == 0 || evs[0].Seq != seq {
		return nil
	}
	return evs[0]
}

// all are the window's events in the stream's order (for tests and small windows).
func (w *eventWindow) all() []*Event {
	var out []*Event
	for _, pe := range w.pairs {
		out = append(out, pe.events...)
	}
	slices.SortFunc(out, func(a, b *Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// loadHeap orders the pairs holding events by load, the largest first (container/heap).
type loadHeap []*pairEvents

func (h loadHeap) Len() int           { return len(h) }
func (h loadHeap) Less(i, j int) bool { return h[i].load > h[j].load }
func (h loadHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}

func (h *loadHeap) Push(x any) {
	pe := x.(*pairEvents)
	pe.at = len(*h)
	*h = append(*h, pe)
}

func (h *loadHeap) Pop() any {
	old := *h
	pe := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	pe.at = -1
	return pe
}
