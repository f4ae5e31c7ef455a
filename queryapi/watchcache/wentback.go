package watchcache

import (
	"fmt"

	"github.com/kubesearch/kubesearch/internal/store"
)

// A member whose resourceVersions go backwards (etcd restored from a snapshot, the cluster rebuilt
// under the same name) starts a new numbering of its pairs: the epoch rule (DESIGN sections 4 and
// 6) holds in the watch cache too. The cache tells it from a scope's list: a namespace scope's
// list is a consistent read, which a member that kept its numbering answers at or above everything
// that scope showed before; a list below that (its SYNC's listResourceVersion) means the member
// went back. Comparing with the pair's head instead would take the usual lag between the lists of
// two namespace scopes for a reset.
//
// The pair then starts over at that list: head, stable position and floor are its
// resourceVersion, open watches of the pair end with 410 (their clients list again), and the
// window's events of the old numbering are not sent to watches placed in the new one. A position
// is only a number, so one from the old numbering is told by what the new numbering gave out: up to
// the highest position of the old numbering (ceiling), a position the new numbering never issued
// (no event, SYNC or bookmark of the pair carried it) is 410; an old position that happens to equal
// one it issued is taken for it — the one ambiguity left, as in kube-apiserver after a restore
// without a revision bump. A position above the ceiling is ahead, as before (a wait, then 504).
// What the new numbering issued is kept while the window may hold it; once the floor passes the
// ceiling, every old position is below the floor and the judgement is dropped.
//
// The other namespace scopes of the pair come over to the new numbering as they list again, each
// below what it showed: each ends the open watches again (their clients may hold that namespace's
// objects of the old numbering), and positions the new numbering issued stay valid.

// scopeState is what the cache keeps of one namespace scope of a pair: one list and watch of a
// collector ("" for a cluster-wide selection), as the indexer keeps it (indexer/watermark.go).
type scopeState struct {
	epoch  int64 // of its last SYNC; 0 before its first
	newest int64 // the newest epoch of its events
	// seen is the highest resourceVersion the scope showed in its numbering: its last list's and
	// those of its events since (and of older epochs in the same numbering).
	seen int64
	// gen is the pair's numbering (Cache.gens) at its last SYNC.
	gen uint64
	// wentBackAt is the epoch of the list that found the member had gone back: events and SYNCs of
	// older epochs are of the old numbering (a late event of the superseded collector, a replay)
	// and are dropped, as the indexer drops them.
	wentBackAt int64
}

// renumbering is what the cache keeps of a pair whose member went back, while positions of both
// numberings may be held (see above).
type renumbering struct {
	ceiling int64 // the highest position of the old numbering
	// since is the seq of the first event of the new numbering: a watch placed in it skips the
	// pair's earlier events (their resourceVersions are of the old numbering). 0 when the window
	// holds none (the old events were dropped at the start, see learnLocked).
	since  uint64
	issued map[int64]struct{} // the positions of the pair the new numbering gave out
}

func (r *renumbering) issue(rv int64) { r.issued[rv] = struct{}{} }

func (c *Cache) scopesOf(p store.Pair) map[string]*scopeState {
	m := c.scopes[p]
	if m == nil {
		m = map[string]*scopeState{}
		c.scopes[p] = m
	}
	return m
}

// eventScopeLocked is the scope an object event belongs to, as the indexer finds it: the
// cluster-wide scope when there is one, else its namespace's (provisional until its first SYNC).
func (c *Cache) eventScopeLocked(p store.Pair, ns string) *scopeState {
	m := c.scopesOf(p)
	if sc := m[""]; sc != nil {
		return sc
	}
	sc := m[ns]
	if sc == nil {
		sc = &scopeState{}
		m[ns] = sc
	}
	return sc
}

// oldNumberingLocked tells whether an object event is of a numbering the member left (to be
// dropped), and notes what the event shows of its scope otherwise.
func (c *Cache) oldNumberingLocked(p store.Pair, ns string, epoch, rv int64) bool {
	sc := c.eventScopeLocked(p, ns)
	if epoch < sc.wentBackAt {
		c.oldReachedLocked(p, rv)
		return true
	}
	if c.replaying && epoch < sc.epoch && rv > sc.seen {
		// Read at the start, before the list the index stands on (the seeded scope), and above
		// it: only a member that went back between them shows that.
		c.learnLocked(p, sc, rv)
		return true
	}
	sc.newest = max(sc.newest, epoch)
	if epoch <= sc.epoch {
		sc.seen = max(sc.seen, rv)
	}
	return false
}

// syncScopeLocked applies a SYNC to its scope: true when the SYNC is of a numbering the member
// left (to be dropped). A list of a newer epoch below what the scope showed renumbers the pair.
func (c *Cache) syncScopeLocked(p store.Pair, ns string, epoch, listRV int64) bool {
	m := c.scopesOf(p)
	sc := m[ns]
	if sc == nil {
		sc = &scopeState{}
		m[ns] = sc
	}
	switch {
	case epoch < sc.wentBackAt:
		c.oldReachedLocked(p, listRV)
		return true
	case epoch < sc.epoch && c.replaying && listRV > sc.seen:
		c.learnLocked(p, sc, listRV)
		return true
	case epoch <= sc.epoch:
		return false // a replayed or superseded marker: the scope stays as it is
	}
	if sc.epoch > 0 && listRV < sc.seen {
		c.wentBackLocked(p, sc, listRV)
		sc.wentBackAt = epoch
	}
	sc.epoch, sc.newest, sc.seen, sc.gen = epoch, max(sc.newest, epoch), listRV, c.gens[p]
	if ns == "" {
		// A cluster-wide scope covers every namespace: provisional scopes were guesses.
		for n, s := range m {
			if n != "" && s.epoch == 0 {
				delete(m, n)
			}
		}
	}
	return false
}

// wentBackLocked starts the pair over at the list of sc at listRV, below what sc showed.
func (c *Cache) wentBackLocked(p store.Pair, sc *scopeState, listRV int64) {
	c.resets[p]++ // open watches of the pair end
	c.resetCount++
	wake(c.subs[p])
	r := c.renumbered[p]
	if r != nil && sc.gen != c.gens[p] {
		// Another scope comes over to the numbering the pair is in: the pair's positions are of
		// the new numbering already.
		c.log.Info("a namespace of a member that went back listed again: open watches end with 410",
			"cluster", p.Cluster, "gvr", groupResourceOf(p), "resourceVersion", listRV, "before", sc.seen)
		r.ceiling = max(r.ceiling, sc.seen)
		c.floor[p] = min(c.floor[p], listRV)
		r.issue(listRV)
		return
	}
	c.log.Warn("member's resourceVersions went back (etcd restored or the cluster rebuilt): its watches start over, open ones end with 410",
		"cluster", p.Cluster, "gvr", groupResourceOf(p), "resourceVersion", listRV, "before", max(sc.seen, c.head[p]))
	c.gens[p]++
	ceiling := max(c.head[p], sc.seen)
	if r != nil {
		ceiling = max(ceiling, r.ceiling)
	}
	r = &renumbering{ceiling: ceiling, since: c.nextSeq, issued: map[int64]struct{}{}}
	r.issue(listRV)
	c.renumbered[p] = r
	c.head[p], c.floor[p] = listRV, listRV
	c.setStableLocked(p, listRV)
	c.uneventedLocked(p)
	delete(c.relisting, p) // positions inside the old numbering's lists
	delete(c.truncated, p)
}

// learnLocked notes, at the start, an event or SYNC of sc read before the list the index stands on
// and above it (at rv): the member went back in between. Everything the window holds of the pair
// so far is of the new numbering (the events of the old one above it are dropped).
func (c *Cache) learnLocked(p store.Pair, sc *scopeState, rv int64) {
	sc.wentBackAt = max(sc.wentBackAt, sc.epoch)
	r := c.renumbered[p]
	if r == nil {
		c.log.Warn("member's resourceVersions went back (etcd restored or the cluster rebuilt) before the watch cache started: positions from before are 410",
			"cluster", p.Cluster, "gvr", groupResourceOf(p), "resourceVersion", sc.seen, "before", rv)
		c.gens[p]++
		r = &renumbering{issued: map[int64]struct{}{}}
		for _, e := range c.win.since(p, 0) {
			r.issue(e.RV)
			r.issue(e.Stable)
		}
		r.issue(c.floor[p])
		r.issue(c.head[p])
		r.issue(c.stable[p])
		c.renumbered[p] = r
	}
	sc.gen = c.gens[p]
	r.ceiling = max(r.ceiling, rv)
}

// seedRenumberingLocked starts the judgement of old positions for a pair whose member went back
// before this process started, as the index remembers it (store.WatermarkScope.Ceiling): the
// stream's replay may no longer hold the old numbering's events that learnLocked tells it by.
// What the new numbering issued before the start is known only as far as the watermarks and the
// replayed events show: a client's position of the new numbering below the ceiling and between
// them is 410 too — a re-list it did not need, never a gap.
func (c *Cache) seedRenumberingLocked(w store.Watermark) {
	var ceiling int64
	for _, s := range w.Scopes {
		ceiling = max(ceiling, s.Ceiling)
	}
	if ceiling == 0 {
		return
	}
	p := w.Pair()
	c.gens[p]++
	r := &renumbering{ceiling: ceiling, issued: map[int64]struct{}{}}
	r.issue(w.ResourceVersion)
	for _, s := range w.Scopes {
		r.issue(s.ResourceVersion)
		if sc := c.scopesOf(p)[s.Namespace]; sc != nil && s.Ceiling > 0 {
			// In the new numbering; the pair's other scopes come over as they list again.
			sc.gen, sc.wentBackAt = c.gens[p], sc.epoch
		}
	}
	c.renumbered[p] = r
}

// oldReachedLocked notes that the numbering the pair's member left reached rv.
func (c *Cache) oldReachedLocked(p store.Pair, rv int64) {
	if r := c.renumbered[p]; r != nil {
		r.ceiling = max(r.ceiling, rv)
	}
}

// oldPositionLocked is the 410 of a position of the pair from before its member went back, nil for
// any other.
func (c *Cache) oldPositionLocked(p store.Pair, rv int64) error {
	r := c.renumbered[p]
	if r == nil || rv > r.ceiling {
		return nil
	}
	if _, ok := r.issued[rv]; ok {
		return nil
	}
	return fmt.Errorf("%w: %s/%s at %d: a position from before the member's resourceVersions went back (it listed again below them: etcd restored or the cluster rebuilt)",
		ErrTooOld, p.Cluster, groupResourceOf(p), rv)
}

// evictedLocked notes that an event of the pair left the window, after the floor moved.
func (c *Cache) evictedLocked(e *Event) {
	r := c.renumbered[e.Pair]
	if r == nil {
		return
	}
	f := c.floor[e.Pair]
	if f > r.ceiling {
		delete(c.renumbered, e.Pair) // every old position is below the floor
		return
	}
	for _, rv := range []int64{e.RV, e.Stable} {
		if rv < f {
			delete(r.issued, rv)
		}
	}
}
