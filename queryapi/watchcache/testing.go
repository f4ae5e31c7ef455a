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
