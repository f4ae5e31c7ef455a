package store

import (
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Snapshots is a backend's ledger of the snapshots it holds between the pages of queries: who
// holds each, whether a page is being read in it, when it was last used and when its keep-alive
// runs out. It applies Limits the same way for every backend: T is what the backend frees when a
// snapshot goes (a point-in-time id, an index reader). It is safe for concurrent use.
//
// A snapshot is named by an id of the ledger's own, which the continue token carries: a token
// minted before a restart never names a snapshot of this process.
type Snapshots[T any] struct {
	perSubject, total, held int // held: the bound of snapshots of client tokens

	mu        sync.Mutex
	byID      map[string]*snapshotEntry[T] // also those removed while a page is read in them
	subjects  map[string]int               // snapshots per subject
	clients   int                          // snapshots of client tokens (not Drain)
	live      int                          // snapshots counted, of both kinds
	tick      uint64                       // orders uses, for least recently used
	evicted   map[string]string
	evictedAt []string // evicted ids, oldest first, so the memory of them stays bounded
}

type snapshotEntry[T any] struct {
	v       T
	subject string
	drain   bool
	opening bool   // admitted by Open, not made yet (Hold)
	busy    int    // pages being read
	used    uint64 // tick of the last use
	expires time.Time
	gone    bool // removed while a page is read in it: its last Release frees it
}

// NewSnapshots makes a ledger of the limits' snapshot bounds (zero fields: defaults).
func NewSnapshots[T any](l Limits) *Snapshots[T] {
	l = l.WithDefaults()
	return &Snapshots[T]{perSubject: l.SnapshotsPerSubject, total: l.Snapshots, held: l.Snapshots - l.Snapshots/4,
		byID: map[string]*snapshotEntry[T]{}, subjects: map[string]int{}, evicted: map[string]string{}}
}

// ErrNoSnapshot: no snapshot could be made room for; the query pages without one.
var ErrNoSnapshot = errors.New("no snapshot available")

// Open admits a new snapshot of subject's query, before it is made; until Hold it counts, and
// cannot be closed to make room. drain marks a query the server reads to the end at once
// (query.Query.Drain). Room is made by closing an idle snapshot of a client token: the subject's
// least recently used one when it holds its share (SnapshotsPerSubject); when the process holds
// its own, one of the subject holding the most (evictFairLocked). evicted are the values the
// caller frees; expired those of idle snapshots whose keep-alive passed, forgotten first, which the
// caller frees unless its backend frees them by itself (see osstore: another replica may still be
// paging in an OpenSearch point-in-time). Without such a snapshot to close, Open fails with
// ErrNoSnapshot, saying why.
func (s *Snapshots[T]) Open(subject string, drain bool, now time.Time) (id string, evicted, expired []T, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	expired = s.expireLocked(now)
	if s.subjects[subject] >= s.perSubject {
		v, ok := s.evictLocked(func(e *snapshotEntry[T]) bool { return e.subject == subject },
			fmt.Sprintf("one subject holds at most %d", s.perSubject))
		if !ok {
			return "", evicted, expired, fmt.Errorf("%w: each of the %d snapshots of this subject is in use", ErrNoSnapshot, s.subjects[subject])
		}
		evicted = append(evicted, v)
	}
	if (!drain && s.clients >= s.held) || s.live >= s.total {
		v, ok := s.evictFairLocked(subject, drain)
		if !ok {
			return "", evicted, expired, fmt.Errorf("%w: every snapshot this server may hold is in use, or its subject's within a fair share", ErrNoSnapshot)
		}
		evicted = append(evicted, v)
	}
	var b [16]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	id = hex.EncodeToString(b[:])
	s.tick++
	s.byID[id] = &snapshotEntry[T]{subject: subject, drain: drain, opening: true, used: s.tick}
	s.subjects[subject]++
	s.live++
	if !drain {
		s.clients++
	}
	return id, evicted, expired, nil
}

// evictLocked closes the least recently used snapshot of a client token that no page is being read
// in, among those of which; why is what its token's ErrExpired will say.
func (s *Snapshots[T]) evictLocked(which func(*snapshotEntry[T]) bool, why string) (T, bool) {
	var (
		victim   *snapshotEntry[T]
		victimID string
	)
	for id, e := range s.byID {
		if !e.evictable() || !which(e) {
			continue
		}
		if victim == nil || e.used < victim.used {
			victim, victimID = e, id
		}
	}
	if victim == nil {
		var zero T
		return zero, false
	}
	return s.closeLocked(victimID, victim, why), true
}

// evictable says whether e may be closed to make room: a client token's, made, no page being
// read in it.
func (e *snapshotEntry[T]) evictable() bool {
	return !e.drain && !e.opening && e.busy == 0 && !e.gone
}

// evictFairLocked makes room in the process for a snapshot of subject's (drain: one the server
// reads to the end) by closing the least recently used idle client snapshot of the subject
// holding the most client snapshots (the one being opened counted) among those with one idle;
// between subjects holding as many, of the one whose idle snapshot is the least recently used.
// Only a subject holding more than its fair share loses one: the room clients have once this
// snapshot is admitted, divided among the subjects holding any.
//
// A process-wide least recently used rule would let a few subjects, each within its own bound,
// close everyone else's continue tokens just by asking: with this one a subject within its fair
// share keeps its snapshots whatever others ask, and one asking past it recycles its own.
func (s *Snapshots[T]) evictFairLocked(subject string, drain bool) (T, bool) {
	type holder struct {
		n      int // client snapshots
		idle   *snapshotEntry[T]
		idleID string // least recently used evictable one
	}
	holders := map[string]*holder{}
	of := func(subject string) *holder {
		h := holders[subject]
		if h == nil {
			h = &holder{}
			holders[subject] = h
		}
		return h
	}
	for id, e := range s.byID {
		if e.gone || e.drain {
			continue
		}
		h := of(e.subject)
		h.n++
		if e.evictable() && (h.idle == nil || e.used < h.idle.used) {
			h.idle, h.idleID = e, id
		}
	}
	drains := s.live - s.clients
	if drain {
		drains++
	} else {
		of(subject).n++
	}
	room := min(s.held, s.total-drains) // for client snapshots, once this one is admitted
	var victim *holder
	for _, h := range holders {
		if h.idle == nil || h.n*len(holders) <= room {
			continue
		}
		if victim == nil || h.n > victim.n || h.n == victim.n && h.idle.used < victim.idle.used {
			victim = h
		}
	}
	if victim == nil {
		var zero T
		return zero, false
	}
	why := fmt.Sprintf("the server holds at most %d for continue tokens, and closes those of the subjects holding the most", s.held)
	return s.closeLocked(victim.idleID, victim.idle, why), true
}

// closeLocked forgets e, closed to make room, remembering why for its token's ErrExpired.
func (s *Snapshots[T]) closeLocked(id string, e *snapshotEntry[T], why string) T {
	s.forgetLocked(id, e)
	s.evicted[id] = why
	s.evictedAt = append(s.evictedAt, id)
	if len(s.evictedAt) > 4*s.total {
		delete(s.evicted, s.evictedAt[0])
		s.evictedAt = s.evictedAt[1:]
	}
	return e.v
}

// forgetLocked stops counting e; it stays known, as gone, while a page is read in it.
func (s *Snapshots[T]) forgetLocked(id string, e *snapshotEntry[T]) {
	if e.busy > 0 {
		e.gone = true
	} else {
		delete(s.byID, id)
	}
	if s.subjects[e.subject]--; s.subjects[e.subject] == 0 {
		delete(s.subjects, e.subject)
	}
	s.live--
	if !e.drain {
		s.clients--
	}
}

// Hold records the snapshot Open admitted as made: v, kept until expires. False when the ledger
// forgot it meanwhile (Close): the caller frees v.
func (s *Snapshots[T]) Hold(id string, v T, expires time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byID[id]
	if e == nil || !e.opening {
		return false
	}
	s.tick++
	e.v, e.opening, e.used, e.expires = v, false, s.tick, expires
	return true
}

// Acquire marks a page being read in id's snapshot, which is not closed to make room meanwhile;
// false when the ledger does not hold id.
func (s *Snapshots[T]) Acquire(id string) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byID[id]
	if e == nil || e.gone || e.opening {
		var zero T
		return zero, false
	}
	e.busy++
	return e.v, true
}

// Release ends a page Acquire began, the snapshot now v and kept until expires. When it was
// removed meanwhile and this was its last page being read, free is true: the caller frees v.
func (s *Snapshots[T]) Release(id string, v T, expires time.Time) (free bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byID[id]
	if e == nil || e.busy == 0 {
		return false
	}
	s.tick++
	e.v, e.busy, e.used = v, e.busy-1, s.tick
	if e.gone {
		if e.busy == 0 {
			delete(s.byID, id)
			return true
		}
		return false
	}
	e.expires = expires
	return false
}

// Remove forgets id's snapshot (its last page was read, its token released, or Open's snapshot
// was not made after all). free says the caller frees v now; when a page is being read in it, the
// last Release says so instead.
func (s *Snapshots[T]) Remove(id string) (v T, free bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byID[id]
	if e == nil || e.gone {
		return v, false
	}
	s.forgetLocked(id, e)
	if e.busy > 0 || e.opening {
		return v, false
	}
	return e.v, true
}

// Expire forgets the idle snapshots whose keep-alive passed, and returns them to be freed.
func (s *Snapshots[T]) Expire(now time.Time) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expireLocked(now)
}

func (s *Snapshots[T]) expireLocked(now time.Time) []T {
	var out []T
	for id, e := range s.byID {
		if !e.gone && !e.opening && e.busy == 0 && now.After(e.expires) {
			s.forgetLocked(id, e)
			out = append(out, e.v)
		}
	}
	return out
}

// Close forgets every snapshot and returns the idle ones to be freed; those being read are
// returned by their last Release.
func (s *Snapshots[T]) Close() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []T
	for id, e := range s.byID {
		if e.gone {
			continue
		}
		s.forgetLocked(id, e)
		if e.busy == 0 && !e.opening {
			out = append(out, e.v)
		}
	}
	return out
}

// Gone is the error of a token whose snapshot the ledger does not hold: ErrExpired, saying it was
// closed to make room when it was.
func (s *Snapshots[T]) Gone(id string) error {
	s.mu.Lock()
	why, ok := s.evicted[id]
	s.mu.Unlock()
	if ok {
		return fmt.Errorf("%w: the snapshot of this query was closed to make room for newer ones (%s); start again without continue", ErrExpired, why)
	}
	return fmt.Errorf("%w: the snapshot of this query is gone; start again without continue", ErrExpired)
}

// Evicted says whether id's snapshot was closed to make room (as far as the ledger remembers).
func (s *Snapshots[T]) Evicted(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.evicted[id]
	return ok
}

// Count is how many snapshots the ledger holds: of subject, and in all.
func (s *Snapshots[T]) Count(subject string) (ofSubject, all int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subjects[subject], s.live
}
