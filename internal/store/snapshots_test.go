package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// open admits and holds a snapshot named v, as a backend does for a first page with more pages.
func open(t *testing.T, s *Snapshots[string], subject string, drain bool, v string, now time.Time) (string, []string) {
	t.Helper()
	id, evicted, expired, err := s.Open(subject, drain, now)
	if len(expired) > 0 {
		t.Fatalf("Open(%s, %s) expired %q", subject, v, expired)
	}
	if err != nil {
		t.Fatalf("Open(%s, %s): %v", subject, v, err)
	}
	if !s.Hold(id, v, now.Add(time.Minute)) {
		t.Fatalf("Hold(%s) = false", v)
	}
	return id, evicted
}

// TestSnapshotsPerSubject: past its share, a subject's first page closes its own least recently
// used idle snapshot, never another subject's, and that token then answers ErrExpired saying why.
func TestSnapshotsPerSubject(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewSnapshots[string](Limits{SnapshotsPerSubject: 3, Snapshots: 100})
	bob, _ := open(t, s, "bob", false, "bob-1", now)
	ids := map[string]string{}
	for _, v := range []string{"a1", "a2", "a3"} {
		ids[v], _ = open(t, s, "alice", false, v, now)
	}
	// a1 is used again: a2 is now the least recently used.
	if _, ok := s.Acquire(ids["a1"]); !ok {
		t.Fatal("Acquire(a1) = false")
	}
	s.Release(ids["a1"], "a1", now.Add(time.Minute))
	a4, evicted := open(t, s, "alice", false, "a4", now)
	if !slices.Equal(evicted, []string{"a2"}) {
		t.Fatalf("evicted %q; want [a2], alice's least recently used", evicted)
	}
	if n, all := s.Count("alice"); n != 3 || all != 4 {
		t.Errorf("Count = %d of alice, %d in all; want 3, 4", n, all)
	}
	if _, ok := s.Acquire(ids["a2"]); ok {
		t.Error("Acquire(a2) after its eviction = true")
	}
	if err := s.Gone(ids["a2"]); !errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), "at most 3") {
		t.Errorf("Gone(a2) = %v; want ErrExpired naming the bound", err)
	}
	if _, ok := s.Acquire(bob); !ok {
		t.Error("bob's snapshot went for alice's")
	}
	s.Release(bob, "bob-1", now.Add(time.Minute))

	// A page being read is never closed: with all three of alice's busy, the next goes without.
	for _, id := range []string{ids["a1"], ids["a3"], a4} {
		if _, ok := s.Acquire(id); !ok {
			t.Fatal("Acquire = false")
		}
	}
	if _, evicted, _, err := s.Open("alice", false, now); !errors.Is(err, ErrNoSnapshot) || len(evicted) > 0 {
		t.Errorf("Open with every snapshot busy = %v, evicted %q; want ErrNoSnapshot, none", err, evicted)
	}
}

// TestSnapshotsReserve: client tokens take three quarters of the server's snapshots; the rest
// stays for queries the server reads to the end (drain), which take from the clients' part too,
// are never closed to make room, and are refused only when every snapshot is theirs or busy.
func TestSnapshotsReserve(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewSnapshots[string](Limits{SnapshotsPerSubject: 10, Snapshots: 8})
	var evictedAll []string
	for i := range 7 { // six fit; the seventh closes the oldest
		_, evicted := open(t, s, fmt.Sprintf("user%d", i), false, fmt.Sprintf("c%d", i), now)
		evictedAll = append(evictedAll, evicted...)
	}
	if !slices.Equal(evictedAll, []string{"c0"}) {
		t.Fatalf("evicted %q; want [c0]: clients hold at most 6 of 8", evictedAll)
	}
	// The reserve: two drained snapshots without closing anything.
	d1, evicted := open(t, s, "facade-user", true, "d1", now)
	d2, evicted2 := open(t, s, "facade-user", true, "d2", now)
	if len(evicted)+len(evicted2) > 0 {
		t.Fatalf("drained snapshots closed %q %q; want none: the reserve is theirs", evicted, evicted2)
	}
	// The server is full: a third drained one closes a client's.
	if _, evicted = open(t, s, "other", true, "d3", now); !slices.Equal(evicted, []string{"c1"}) {
		t.Fatalf("evicted %q; want [c1]", evicted)
	}
	// A client's first page closes another client's, never a drained one.
	for range 5 {
		_, evicted = open(t, s, "late", false, "late", now)
		if slices.ContainsFunc(evicted, func(v string) bool { return strings.HasPrefix(v, "d") }) {
			t.Fatalf("a drained snapshot was closed: %q", evicted)
		}
	}
	if _, all := s.Count(""); all != 8 {
		t.Errorf("%d snapshots; want 8", all)
	}
	// Drained ones go when read to the end.
	for _, id := range []string{d1, d2} {
		if v, free := s.Remove(id); !free || v == "" {
			t.Errorf("Remove(%s) = %q, %v", id, v, free)
		}
	}
	if _, all := s.Count(""); all != 6 {
		t.Errorf("%d snapshots; want 6", all)
	}
}

// TestSnapshotsFairShare: when the process holds its share, the snapshot closed is one of the
// subject holding the most; so greedy subjects, each within its own bound, close each other's and
// never those of a subject within its fair share (the clients' room divided among the holders),
// which a process-wide least recently used rule would close first.
func TestSnapshotsFairShare(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewSnapshots[string](Limits{}) // 20 per subject, 150 of 200 for client tokens
	// carol is the modest subject: two open pages, the oldest of all.
	carolPages := []string{"carol-1", "carol-2"}
	var carol []string
	for _, v := range carolPages {
		id, _ := open(t, s, "carol", false, v, now)
		carol = append(carol, id)
	}
	const greedy = 8
	var closed []string
	for round := range 60 { // 8 subjects × 60 first pages, 3 times their bound
		for g := range greedy {
			_, evicted := open(t, s, fmt.Sprintf("greedy%d", g), false, fmt.Sprintf("g%d-%d", g, round), now)
			closed = append(closed, evicted...)
		}
	}
	if slices.ContainsFunc(closed, func(v string) bool { return strings.HasPrefix(v, "carol") }) {
		t.Fatalf("carol's snapshots closed for the greedy subjects' (closed: %d, among them carol's)", len(closed))
	}
	for i, id := range carol {
		if _, ok := s.Acquire(id); !ok || s.Evicted(id) {
			t.Fatalf("carol's page %d is gone", i+1)
		}
		s.Release(id, carolPages[i], now.Add(time.Minute))
	}
	// The greedy share what is left: 148 between 8, none past its bound.
	for g := range greedy {
		if n, all := s.Count(fmt.Sprintf("greedy%d", g)); n < 18 || n > 19 || all != 150 {
			t.Errorf("greedy%d holds %d of %d; want 18 or 19 of 150", g, n, all)
		}
	}
	// A newcomer gets a snapshot, a greedy subject's.
	if _, evicted := open(t, s, "dave", false, "dave-1", now); len(evicted) != 1 || !strings.HasPrefix(evicted[0], "g") {
		t.Errorf("dave's first page closed %q; want one greedy subject's", evicted)
	}
	// With every greedy snapshot busy, none is closed: carol (within her share) keeps hers, and
	// the newcomer pages without one.
	for g := range greedy {
		for round := range 60 {
			_, _ = s.Acquire(findID(t, s, fmt.Sprintf("g%d-%d", g, round)))
		}
	}
	if _, evicted, _, err := s.Open("erin", false, now); !errors.Is(err, ErrNoSnapshot) || len(evicted) > 0 {
		t.Errorf("erin's first page with the greedy snapshots busy = %v, closing %q; want ErrNoSnapshot, none", err, evicted)
	}
	for _, id := range carol {
		if s.Evicted(id) {
			t.Error("carol's snapshot closed while the greedy subjects' were busy")
		}
	}
}

// findID is the id of the snapshot holding v ("" when none does).
func findID(t *testing.T, s *Snapshots[string], v string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.byID {
		if e.v == v && !e.gone {
			return id
		}
	}
	return ""
}

// TestSnapshotsLifecycle: expiry frees idle snapshots only; a removal while a page is read frees
// at its last Release; a snapshot Open admitted and then not made is forgotten.
func TestSnapshotsLifecycle(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewSnapshots[string](Limits{SnapshotsPerSubject: 5, Snapshots: 20})
	idle, _ := open(t, s, "u", false, "idle", now)
	busy, _ := open(t, s, "u", false, "busy", now)
	if _, ok := s.Acquire(busy); !ok {
		t.Fatal("Acquire = false")
	}
	if got := s.Expire(now.Add(2 * time.Minute)); !slices.Equal(got, []string{"idle"}) {
		t.Errorf("Expire = %q; want [idle]", got)
	}
	if _, ok := s.Acquire(idle); ok {
		t.Error("an expired snapshot can be acquired")
	}
	if v, free := s.Remove(busy); free || v != "" {
		t.Errorf("Remove of a busy snapshot = %q, %v; want nothing to free yet", v, free)
	}
	if n, _ := s.Count("u"); n != 0 {
		t.Errorf("a removed snapshot still counts: %d", n)
	}
	if _, ok := s.Acquire(busy); ok {
		t.Error("a removed snapshot can be acquired")
	}
	if !s.Release(busy, "busy", now) {
		t.Error("the last Release of a removed snapshot does not free it")
	}
	id, _, _, err := s.Open("u", false, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, free := s.Remove(id); free {
		t.Error("a snapshot never made is to be freed")
	}
	if n, all := s.Count("u"); n != 0 || all != 0 {
		t.Errorf("Count = %d, %d; want 0, 0", n, all)
	}
	if s.Hold(id, "late", now) {
		t.Error("Hold after Remove = true; the caller must free what it made")
	}
}

// TestInFlight: a subject's costly searches past the bound are ErrThrottled; others' are not, and
// an ended one makes room.
func TestInFlight(t *testing.T) {
	f := NewInFlight(2, "searches by fuzzyName")
	d1, err := f.Acquire("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Acquire("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Acquire("alice"); !errors.Is(err, ErrThrottled) || !strings.Contains(err.Error(), "at most 2") {
		t.Fatalf("third search = %v; want ErrThrottled naming the bound", err)
	}
	if _, err := f.Acquire("bob"); err != nil {
		t.Errorf("bob's search = %v", err)
	}
	d1()
	d1() // twice is once
	if _, err := f.Acquire("alice"); err != nil {
		t.Errorf("after one ended: %v", err)
	}
	if _, err := f.Acquire("alice"); !errors.Is(err, ErrThrottled) {
		t.Errorf("a repeated done freed two places: %v", err)
	}
}

// TestSnapshotsOpenExpires: Open forgets the idle snapshots whose keep-alive passed and returns
// them apart from those it closes to make room, which a backend frees at once; an expired one it
// may leave to expire by itself (osstore: another replica may be paging in it).
func TestSnapshotsOpenExpires(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewSnapshots[string](Limits{SnapshotsPerSubject: 1, Snapshots: 20})
	for _, h := range []struct {
		subject, v string
		keep       time.Duration
	}{{"u", "old", time.Minute}, {"v", "lru", 10 * time.Minute}} {
		id, _, _, err := s.Open(h.subject, false, now)
		if err != nil || !s.Hold(id, h.v, now.Add(h.keep)) {
			t.Fatalf("Open/Hold %s: %v", h.v, err)
		}
	}
	_, evicted, expired, err := s.Open("v", false, now.Add(2*time.Minute))
	if err != nil || !slices.Equal(evicted, []string{"lru"}) || !slices.Equal(expired, []string{"old"}) {
		t.Errorf("Open past old's keep-alive with v's share full = evicted %q, expired %q, %v; want [lru], [old], nil", evicted, expired, err)
	}
	if n, all := s.Count("u"); n != 0 || all != 1 {
		t.Errorf("after Open: u holds %d of %d snapshots; want 0 of 1", n, all)
	}
}
