package watchcache

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// Marks: a watch position any replica can read back, whatever the number of clusters.
//
// A fleet view's position is one resourceVersion per cluster: ~33 KB at 1,000 clusters, carried
// by every event and bookmark (issue 25). But every replica reads the same stream (the change
// feed, or the event stream), and a pair's stable position is a function of the records of its
// partition it has applied. So a place in the stream — per partition, the offset of the first
// record not applied: a Mark — says every pair's position at once, in a few bytes per partition.
// The cache keeps, per pair, how its stable position moved with the offsets (a history), back to
// its oldest event in the window; a mark older than that is 410, as a position below the window's
// floor is.
//
// Replicas agree on a mark's meaning where their histories overlap. Where they may not (a replica
// started later seeds its pairs from the index, not from the records before its start), the
// facade checks what it reads back against a sum of the position it issued, and answers 410 when
// they differ: never a resume from the wrong place.

// A Mark is a place in the stream the cache follows: per partition, the offset of the first record
// not applied.
type Mark map[int]int64

// history is how a pair's stable position moved: at marks from from on, its position is base until
// the first change, then each change's stable from the record after it.
type history struct {
	from    int64
	base    int64
	changes []change // by at, ascending
}

// change says the record at offset at left the pair at stable.
type change struct{ at, stable int64 }

// noOffset is Event.Offset of an event applied without one (Apply, ApplyChange: tests and callers
// that read the stream themselves): marks then say nothing of its pair.
const noOffset = -1

// at is the record being applied, while applyAt applies it.
type at struct {
	partition int
	offset    int64
}

// applyAt applies the record of m (apply, under the lock), noting its offset: the history of every
// pair whose position it moves, and how far the partition is read.
func (c *Cache) applyAt(m stream.Message, apply func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur = &at{m.Partition, m.Offset}
	apply()
	c.cur = nil
	c.readTo[m.Partition] = m.Offset + 1
	c.notifyLocked()
}

// nextRecordLocked applies a record given without its offset (Apply, ApplyChange): as the next of
// its pair's partition when the cache keeps marks, so that a caller reading a stream of its own
// (tests) gets them too.
func (c *Cache) nextRecordLocked(p store.Pair, apply func()) {
	if c.partitions == 0 {
		apply()
		return
	}
	q := c.partitionOf(p)
	c.cur = &at{q, c.readTo[q]}
	apply()
	c.cur = nil
	c.readTo[q]++
}

// startMarks says where reading begins, per partition: marks below it say nothing.
func (c *Cache) startMarks(from map[int]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partitions = len(from)
	for p, off := range from {
		c.started[p], c.readTo[p] = off, off
	}
}

// maxMovedLog is how many moves of stable positions the cache keeps at least (Cache.movedLog): a
// watch reading less often than that many moves reads all its pairs' positions.
const maxMovedLog = 1 << 15

// noteMovedLocked logs that p's stable position moved.
func (c *Cache) noteMovedLocked(p store.Pair) {
	c.movedLog = append(c.movedLog, p)
	if len(c.movedLog) > 2*maxMovedLog {
		n := len(c.movedLog) - maxMovedLog
		c.movedBase += uint64(n)
		c.movedLog = slices.Clone(c.movedLog[n:])
	}
}

// setStableLocked moves a pair's stable position, in its history when the record moving it is
// known.
func (c *Cache) setStableLocked(p store.Pair, v int64) {
	old := c.stable[p]
	if old == v {
		return
	}
	c.stable[p] = v
	c.noteMovedLocked(p)
	if c.partitions == 0 {
		return // not reading a stream (Apply, tests): no marks
	}
	h := c.hist[p]
	if h == nil {
		h = &history{from: c.started[c.partitionOf(p)], base: old}
		c.hist[p] = h
	}
	if c.cur == nil || c.cur.partition != c.partitionOf(p) {
		// Moved by no record of its partition (a PURGE in the event stream reaches every
		// resource of its kind): the history says nothing of marks before now.
		h.from, h.base, h.changes = c.readTo[c.partitionOf(p)], v, nil
		return
	}
	if n := len(h.changes); n > 0 && h.changes[n-1].at == c.cur.offset {
		h.changes[n-1].stable = v // one record moving it twice (a SYNC's deletions, then its position)
		return
	}
	h.changes = append(h.changes, change{c.cur.offset, v})
	// Changes without events (SYNCs of lists that changed nothing) are not dropped with the
	// window's events: beyond the pair's events plus a few, the oldest go, so a quiet pair
	// re-listed for days does not grow its history.
	if extra := len(h.changes) - c.win.held(p) - quietChanges; extra > 0 {
		h.base, h.from = h.changes[extra-1].stable, h.changes[extra-1].at+1
		h.changes = slices.Delete(h.changes, 0, extra)
	}
}

// quietChanges is how many changes of a pair's position its history keeps beyond its events in the
// window.
const quietChanges = 64

// forgetLocked drops the history a pair's evicted event (at offset off) held: marks at or below it
// are 410 for the pair, as the floor says of positions below the event.
func (c *Cache) forgetLocked(p store.Pair, off int64) {
	if off == noOffset || c.partitions == 0 {
		return
	}
	h := c.hist[p]
	if h == nil {
		h = &history{base: c.stable[p]}
		c.hist[p] = h
	}
	if off+1 <= h.from {
		return
	}
	i := sort.Search(len(h.changes), func(i int) bool { return h.changes[i].at > off })
	if i > 0 {
		h.base = h.changes[i-1].stable
	}
	h.changes = slices.Delete(h.changes, 0, i)
	h.from = off + 1
}

// partitionOf is the partition holding a pair's records (they are keyed by the pair).
func (c *Cache) partitionOf(p store.Pair) int {
	if n, ok := c.parts[p]; ok {
		return n
	}
	n := stream.PartitionOf([]byte(p.ID()), c.partitions)
	c.parts[p] = n
	return n
}

// PartitionOf is the partition of the stream holding a pair's records, -1 while the cache reads
// none.
func (c *Cache) PartitionOf(p store.Pair) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitions == 0 {
		return -1
	}
	return c.partitionOf(p)
}

// stableAtLocked is the pair's stable position at mark offset off of its partition; ok false when
// the cache cannot tell (before its history, or of a partition it has not read that far).
func (c *Cache) stableAtLocked(p store.Pair, off int64) (int64, bool) {
	q := c.partitionOf(p)
	if off < c.started[q] || off > c.readTo[q] {
		return 0, false
	}
	h := c.hist[p]
	if h == nil {
		return c.stable[p], true
	}
	if off < h.from {
		return 0, false
	}
	i := sort.Search(len(h.changes), func(i int) bool { return h.changes[i].at >= off })
	if i == 0 {
		return h.base, true
	}
	return h.changes[i-1].stable, true
}

// At is every pair's stable position at mark m: ErrTooOld when the cache cannot tell one (the mark
// is older than the pair's history, or of another stream), ErrTooNew when the stream has not
// reached it before ctx ends. It waits for the cache to be ready.
func (c *Cache) At(ctx context.Context, m Mark, pairs []store.Pair) (map[store.Pair]int64, error) {
	for {
		c.mu.Lock()
		if c.ready && c.partitions == 0 {
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: this replica reads no stream, so it cannot place a position given as a mark", ErrTooOld)
		}
		if c.ready {
			out, err := c.atLocked(m, pairs)
			if err != errAhead {
				c.mu.Unlock()
				return out, err
			}
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: the watch cache did not reach the position: %v", ErrTooNew, ctx.Err())
		}
	}
}

// errAhead is a mark past what the cache has read (At waits for it).
var errAhead = fmt.Errorf("%w: the mark is ahead of the stream", ErrTooNew)

func (c *Cache) atLocked(m Mark, pairs []store.Pair) (map[store.Pair]int64, error) {
	out := make(map[store.Pair]int64, len(pairs))
	for _, p := range pairs {
		q := c.partitionOf(p)
		off, ok := m[q]
		if !ok {
			return nil, fmt.Errorf("%w: the position says nothing of %s/%s", ErrTooOld, p.Cluster, groupResourceOf(p))
		}
		if off > c.readTo[q] {
			return nil, errAhead
		}
		v, ok := c.stableAtLocked(p, off)
		if !ok {
			return nil, fmt.Errorf("%w: %s/%s: the position is older than the watch window", ErrTooOld, p.Cluster, groupResourceOf(p))
		}
		out[p] = v
	}
	return out, nil
}

// MarkOf is a mark at which as many of the pairs as it can find are at their positions in pos, per
// partition the latest place where one of them got there (an index read is a prefix of each
// partition, so the others are there too); nil when the cache reads no stream. Pairs the mark does
// not place at their positions must be told beside it (At then differs for them).
func (c *Cache) MarkOf(pos map[store.Pair]int64) Mark {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitions == 0 || !c.ready {
		return nil
	}
	m := Mark{}
	for p, v := range pos {
		q := c.partitionOf(p)
		if _, ok := m[q]; !ok {
			m[q] = c.started[q]
		}
		if off, ok := c.reachedLocked(p, v); ok {
			m[q] = max(m[q], off)
		}
	}
	return m
}

// reachedLocked is the first mark at which the pair was at position v, in its latest stay there.
func (c *Cache) reachedLocked(p store.Pair, v int64) (int64, bool) {
	h := c.hist[p]
	if h == nil {
		return c.started[c.partitionOf(p)], c.stable[p] == v
	}
	for i := len(h.changes) - 1; i >= 0; i-- {
		if h.changes[i].stable == v {
			return h.changes[i].at + 1, true
		}
	}
	return h.from, h.base == v
}

// Unevented is what a read tells a watch of the moves of its pairs' positions that no event of
// theirs carried (a SYNC marker, a renumbering) between its previous read's mark and this one's:
// the pairs moved so, and the partitions the cache cannot tell of (before its record of them, or
// the watch's first read). A watch keeping its sealed position in step event by event asks At only
// about those, so it takes the cache's lock per read, not per event.
type Unevented struct {
	Pairs      []store.Pair
	Partitions []int
}

// unevented is a move of pair's position by the record at offset at that made no event of it.
type unevented struct {
	at   int64
	pair store.Pair
}

// maxUnevented bounds the moves kept per partition; a watch reading from before the oldest is told
// the whole partition.
const maxUnevented = 4096

// uneventedLocked notes that the record being applied moved p's position without (necessarily) an
// event of p.
func (c *Cache) uneventedLocked(p store.Pair) {
	if c.cur == nil || c.partitions == 0 || c.partitionOf(p) != c.cur.partition {
		return
	}
	q := c.cur.partition
	l := append(c.moves[q], unevented{c.cur.offset, p})
	if len(l) > maxUnevented {
		c.movesFrom[q] = l[0].at + 1
		l = slices.Delete(l, 0, 1)
	}
	c.moves[q] = l
}

// uneventedSinceLocked is Unevented for a read whose previous mark was from (nil: its first) and
// whose mark is to.
func (c *Cache) uneventedSinceLocked(from, to Mark, want map[store.Pair]bool) Unevented {
	var u Unevented
	for q, end := range to {
		start, ok := from[q]
		if !ok || start < max(c.movesFrom[q], c.started[q]) {
			u.Partitions = append(u.Partitions, q)
			continue
		}
		l := c.moves[q]
		for i := sort.Search(len(l), func(i int) bool { return l[i].at >= start }); i < len(l) && l[i].at < end; i++ {
			if want[l[i].pair] {
				u.Pairs = append(u.Pairs, l[i].pair)
			}
		}
	}
	return u
}

// Unevented is what the watch's last Read said of its pairs' moves without events.
func (w *Watch) Unevented() Unevented { return w.cur.unevented }

// Mark is where the watch's last Read left the stream, per partition of its pairs: the pairs'
// stable positions it returned are At this mark.
func (w *Watch) Mark() Mark { return w.cur.mark }
