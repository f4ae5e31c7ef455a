package watchcache

import "github.com/kubesearch/kubesearch/internal/store"

// SetHeadForTest sets how far the stream has shown pair p, without an event. It stands for a
// stream ahead of the index in the tests of package queryapi, which serve the facade from a cache
// they set up without a stream: a watch from a position up to the head is placed, and a
// consistent read waits for the index to reach it. Nothing else calls it.
func (c *Cache) SetHeadForTest(p store.Pair, rv int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.head[p] = rv
}

// ReadPartitionsForTest has the cache keep marks (marks.go) of a stream of n partitions read from
// offset 0, as Run does when it starts reading one; Apply and ApplyChange then apply each event as
// the next record of its pair's partition. Tests of package queryapi use it to check fleet
// positions written as marks. Nothing else calls it.
func (c *Cache) ReadPartitionsForTest(n int) {
	from := map[int]int64{}
	for q := range n {
		from[q] = 0
	}
	c.startMarks(from)
}
