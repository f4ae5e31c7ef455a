package queryapi

import (
	"cmp"
	"hash/maphash"
	"math"
	"slices"
	"sync"
)

// presence is what the client of a streaming watch (initial events, or no resourceVersion) holds:
// for each object sent, the resourceVersion it got. The watch needs it to skip events older than
// what the initial events showed, and to tell an object leaving the selectors (DELETED) or entering
// them (ADDED) from one the client never had.
//
// It is kept small because a watch keeps it for its whole life (up to a day) and a subject may
// run many: an object is a 64-bit hash of its id (store.DocID: cluster and uid — a uid repeats
// across members registered twice or cloned) and its resourceVersion, 16 bytes in a slice sorted
// once the initial events are sent, where a map of uid strings took about 170. Objects that arrive
// later go to a small map, merged into the slice as it grows. Two ids of one watch sharing a hash (about 1 in 10^9 for 100,000 objects) would be taken for one object.
//
// Each subject's watches together hold at most a budget of objects (watchObjects): past it, a
// watch stops tracking and judges events as a watch resumed from a resourceVersion does, by the
// object's previous state in the window (what a LIST then WATCH gets).
type presence struct {
	seed   maphash.Seed
	base   []heldObject // sorted by key once sealed; a removed object has rv removed
	extra  map[uint64]int64
	sealed bool
	live   int // objects held

	budget  *watchObjects
	subject string
	taken   int // of the subject's budget
}

type heldObject struct {
	key uint64
	rv  int64
}

// DefaultMaxWatchObjectsPerSubject is the default of Options.MaxWatchObjectsPerSubject: ten
// streaming informers over 100,000 objects, about 16 MB.
const DefaultMaxWatchObjectsPerSubject = 1_000_000

// removed marks an object of base that left: slots are reclaimed at the next merge.
const removed = math.MinInt64

// takeChunk is the most of the budget a watch takes at once, so the budget's lock is not taken
// per object; a watch of few objects takes less.
const takeChunk = 1024

func newPresence(budget *watchObjects, subject string) *presence {
	return &presence{seed: maphash.MakeSeed(), budget: budget, subject: subject}
}

func (p *presence) key(uid string) uint64 { return maphash.String(p.seed, uid) }

// hold records that the client got uid at rv. Past the subject's budget the watch stops tracking
// what its client holds, and judges later events as a resumed watch does.
func (w *watcher) hold(uid string, rv int64) {
	if w.present != nil && !w.present.set(uid, rv) {
		w.s.log.Info("watch stops tracking the objects its client holds: the subject's watches hold as many as they may (--max-watch-objects-per-subject)",
			"path", w.r.path, "user", w.present.subject)
		w.present = nil
	}
}

// set records that the client got uid at rv. False when the subject's budget is spent: the
// presence is then released, and the caller stops using it.
func (p *presence) set(uid string, rv int64) bool {
	k := p.key(uid)
	if !p.sealed {
		// Initial events: sorted once they end (seal). A uid twice (pages read without a snapshot)
		// keeps its last.
		if !p.take() {
			return false
		}
		p.base = append(p.base, heldObject{k, rv})
		p.live++
		return true
	}
	if i, ok := p.find(k); ok {
		if p.base[i].rv == removed {
			if !p.take() {
				return false
			}
			p.live++
		}
		p.base[i].rv = rv
		return true
	}
	if _, ok := p.extra[k]; !ok {
		if !p.take() {
			return false
		}
		p.live++
	}
	if p.extra == nil {
		p.extra = map[uint64]int64{}
	}
	p.extra[k] = rv
	if len(p.extra) > max(256, len(p.base)/8) {
		p.merge()
	}
	return true
}

// take counts one more object against the budget, taking a chunk of it when needed.
func (p *presence) take() bool {
	if p.live < p.taken {
		return true
	}
	n := p.budget.take(p.subject, min(max(p.taken/2, 64), takeChunk)) // little for a small list
	if n == 0 {
		p.release()
		return false
	}
	p.taken += n
	return true
}

// get is the resourceVersion the client got of uid, if it holds it.
func (p *presence) get(uid string) (int64, bool) {
	k := p.key(uid)
	if rv, ok := p.extra[k]; ok {
		return rv, true
	}
	if i, ok := p.find(k); ok && p.base[i].rv != removed {
		return p.base[i].rv, true
	}
	return 0, false
}

// remove records that the client no longer holds uid.
func (p *presence) remove(uid string) {
	k := p.key(uid)
	if _, ok := p.extra[k]; ok {
		delete(p.extra, k)
		p.live--
		return
	}
	if i, ok := p.find(k); ok && p.base[i].rv != removed {
		p.base[i].rv = removed
		p.live--
	}
}

func (p *presence) find(k uint64) (int, bool) {
	p.seal()
	return slices.BinarySearchFunc(p.base, k, func(h heldObject, k uint64) int { return cmp.Compare(h.key, k) })
}

// seal sorts what the initial events sent, keeping the last state of a uid sent twice, and gives
// back the slice's spare room.
func (p *presence) seal() {
	if p.sealed {
		return
	}
	p.sealed = true
	slices.SortStableFunc(p.base, func(a, b heldObject) int { return cmp.Compare(a.key, b.key) })
	out := p.base[:0]
	for i, h := range p.base {
		if i+1 < len(p.base) && p.base[i+1].key == h.key {
			p.live--
			continue
		}
		out = append(out, h)
	}
	p.base = slices.Clone(out)
}

// merge moves the objects of extra into base, dropping the removed ones.
func (p *presence) merge() {
	out := make([]heldObject, 0, p.live)
	for _, h := range p.base {
		if h.rv != removed {
			out = append(out, h)
		}
	}
	for k, rv := range p.extra {
		out = append(out, heldObject{k, rv})
	}
	slices.SortFunc(out, func(a, b heldObject) int { return cmp.Compare(a.key, b.key) })
	p.base, p.extra = out, nil
}

// release gives the presence's budget back; it holds nothing after. Safe on nil.
func (p *presence) release() {
	if p == nil {
		return
	}
	p.budget.give(p.subject, p.taken)
	p.base, p.extra, p.live, p.taken = nil, nil, 0, 0
}

// watchObjects bounds the objects each subject's streaming watches hold together (presence).
type watchObjects struct {
	max int // per subject

	mu   sync.Mutex
	held map[string]int
}

// holding is how many objects subject's watches hold.
func (b *watchObjects) holding(subject string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held[subject]
}

func newWatchObjects(max int) *watchObjects {
	return &watchObjects{max: max, held: map[string]int{}}
}

// take gives up to n objects of subject's budget: what is left of it, 0 when spent. A nil budget
// gives what is asked.
func (b *watchObjects) take(subject string, n int) int {
	if b == nil {
		return n
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, b.max-b.held[subject])
	if n <= 0 {
		return 0
	}
	b.held[subject] += n
	return n
}

func (b *watchObjects) give(subject string, n int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[subject] -= n; b.held[subject] <= 0 {
		delete(b.held, subject)
	}
}
