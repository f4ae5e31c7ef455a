package osstore

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// inItsPIT answers a search with more than a page of hits, in the PIT it was asked in.
func inItsPIT(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	const pod = `{"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}}`
	resp := strings.Replace(hitsOf(2, 500, pod), `"pit_id":"pit-1"`, fmt.Sprintf(`"pit_id":%q`, gjson.GetBytes(body, "pit.id").Str), 1)
	fmt.Fprint(w, resp)
}

// paged runs a first page of limit 1 for subject, which takes a PIT, and returns its query (for
// the next page) and whether it carried a warning.
func paged(t *testing.T, s *Store, subject string, drain bool) (*query.Query, bool) {
	t.Helper()
	q, err := query.Parse(url.Values{query.ParamLimit: {"1"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	q.Subject, q.Drain = subject, drain
	res, err := s.Search(t.Context(), q)
	if err != nil || res.Continue == "" {
		t.Fatalf("first page of %s: continue %q, %v", subject, res.Continue, err)
	}
	q.Continue = res.Continue
	return q, len(res.Warnings) > 0
}

// closedNow waits for the PITs being closed in the background, and lists every one closed.
func closedNow(s *Store, f *fakeOpenSearch) []string {
	s.closing.Wait()
	return f.closedPITs()
}

// TestSearchPITsPerSubject: a subject that keeps limit=1 tokens holds at most its share of PITs:
// its next first page closes its own least recently used one (whose token answers ErrExpired,
// saying why, without asking OpenSearch), never another subject's.
func TestSearchPITsPerSubject(t *testing.T) {
	f := &fakeOpenSearch{t: t, search: inItsPIT}
	s := newLimitedFakeStore(t, f, store.Limits{SnapshotsPerSubject: 2, Snapshots: 100})
	bob, _ := paged(t, s, "bob", false) // pit-1
	a1, _ := paged(t, s, "alice", false)
	a2, _ := paged(t, s, "alice", false)
	if got := closedNow(s, f); len(got) != 0 {
		t.Fatalf("PITs closed within the share: %q", got)
	}
	for i := range 20 {
		if _, warned := paged(t, s, "alice", false); warned {
			t.Fatalf("first page %d past the share has no snapshot", i)
		}
	}
	closed := closedNow(s, f)
	if len(closed) != 20 || !slices.Contains(closed, "pit-2") || !slices.Contains(closed, "pit-3") || slices.Contains(closed, "pit-1") {
		t.Fatalf("PITs closed: %q; want 20, alice's oldest first, never bob's pit-1", closed)
	}
	if n, all := s.pits.Count("alice"); n != 2 || all != 3 {
		t.Errorf("alice holds %d of %d PITs; want 2 of 3", n, all)
	}
	opened := f.openedPITs()
	for _, q := range []*query.Query{a1, a2} {
		_, err := s.Search(t.Context(), q)
		if !errors.Is(err, store.ErrExpired) || !strings.Contains(err.Error(), "at most 2") {
			t.Errorf("next page of an evicted token = %v; want ErrExpired naming the bound", err)
		}
	}
	if _, err := s.Search(t.Context(), bob); err != nil {
		t.Errorf("bob's next page: %v", err)
	}
	if f.openedPITs() != opened {
		t.Errorf("next pages opened PITs")
	}
}

// TestSearchPITReserve: continue tokens handed to clients hold three quarters of the process's
// PITs; the facade's own lists (Drain) still get one, taking a client's least recently used when
// every PIT is held, and are never closed for another.
func TestSearchPITReserve(t *testing.T) {
	f := &fakeOpenSearch{t: t, search: inItsPIT}
	s := newLimitedFakeStore(t, f, store.Limits{SnapshotsPerSubject: 10, Snapshots: 4})
	for i := range 3 {
		paged(t, s, fmt.Sprintf("user%d", i), false) // pit-1 to pit-3: the clients' three quarters
	}
	d1, warned := paged(t, s, "facade", true)
	if got := closedNow(s, f); warned || len(got) != 0 {
		t.Fatalf("a drained list in the reserve: warned %v, closed %q; want a PIT, none closed", warned, got)
	}
	if _, warned := paged(t, s, "facade", true); warned || !slices.Equal(closedNow(s, f), []string{"pit-1"}) {
		t.Fatalf("a second drained list: warned %v, closed %q; want a PIT for pit-1", warned, f.closedPITs())
	}
	for i := range 5 {
		paged(t, s, fmt.Sprintf("late%d", i), false)
	}
	if got := closedNow(s, f); slices.Contains(got, "pit-4") || slices.Contains(got, "pit-5") {
		t.Fatalf("a drained list's PIT was closed for a client: %q", got)
	}
	if _, err := s.Search(t.Context(), d1); err != nil {
		t.Errorf("drained list's next page: %v", err)
	}
	if _, all := s.pits.Count(""); all != 4 {
		t.Errorf("%d PITs held; want 4", all)
	}
}

// TestSearchReleaseFreesShare: a released token's PIT leaves its subject's share, so the next
// first page closes nothing.
func TestSearchReleaseFreesShare(t *testing.T) {
	f := &fakeOpenSearch{t: t, search: inItsPIT}
	s := newLimitedFakeStore(t, f, store.Limits{SnapshotsPerSubject: 1, Snapshots: 100})
	q, _ := paged(t, s, "alice", false)
	s.Release(t.Context(), q.Continue)
	paged(t, s, "alice", false)
	if got := closedNow(s, f); !slices.Equal(got, []string{"pit-1"}) {
		t.Errorf("PITs closed: %q; want pit-1 only, by Release", got)
	}
}

// TestSearchPITPagedOnAnotherReplica: replicas behind a load balancer share PITs through their
// continue tokens. The replica that opened one stops counting it when its keep-alive passes in its
// own ledger, but must not close it then: another replica may have read pages in it since, which
// kept it alive in OpenSearch, and the client's next page would be a 410.
func TestSearchPITPagedOnAnotherReplica(t *testing.T) {
	f := &fakeOpenSearch{t: t, search: inItsPIT}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	clock := now
	replica := func() *Store {
		s, err := New(Options{Addresses: []string{srv.URL}, TokenKey: []byte("0123456789abcdef"), KeepAlive: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.now = func() time.Time { return clock }
		return s
	}
	a, b := replica(), replica()
	q, _ := paged(t, a, "alice", false) // pit-1, in a's ledger
	for range 3 {
		clock = clock.Add(4 * time.Minute) // within the keep-alive of the last page, past a's after two
		res, err := b.Search(t.Context(), q)
		if err != nil || res.Continue == "" {
			t.Fatalf("page on the other replica at +%s: continue %q, %v", clock.Sub(now), res.Continue, err)
		}
		q.Continue = res.Continue
		paged(t, a, "bob", false) // a's next first page forgets what expired in its ledger
	}
	if n, _ := a.pits.Count("alice"); n != 0 {
		t.Errorf("the replica that opened alice's PIT still counts it %s later", clock.Sub(now))
	}
	if got := closedNow(a, f); slices.Contains(got, "pit-1") {
		t.Errorf("PITs closed: %q; pit-1 was paged in on the other replica within its keep-alive", got)
	}
}

// TestSearchFuzzyPerSubject: a subject's searches by fuzzy name past its bound are ErrThrottled
// while the others run; other subjects' are not, and other searches are not.
func TestSearchFuzzyPerSubject(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	var blocking atomic.Int32
	const pod = `{"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}}`
	f := &fakeOpenSearch{t: t, search: func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// The first two searches by fuzzy name run until the test ends them; others answer.
		if strings.Contains(string(body), "wildcard") && blocking.Add(1) <= 2 {
			entered.Done()
			<-release
		}
		fmt.Fprint(w, hitsOf(1, 1, pod))
	}}
	s := newLimitedFakeStore(t, f, store.Limits{FuzzySearchesPerSubject: 2})
	search := func(subject, fuzzy string) error {
		v := url.Values{}
		if fuzzy != "" {
			v.Set(query.ParamFuzzyName, fuzzy)
		}
		q, err := query.Parse(v, now)
		if err != nil {
			t.Fatal(err)
		}
		q.Subject = subject
		_, err = s.Search(t.Context(), q)
		return err
	}
	var running sync.WaitGroup
	entered.Add(2)
	for range 2 {
		running.Go(func() {
			if err := search("alice", "ngnix"); err != nil {
				t.Error(err)
			}
		})
	}
	entered.Wait()
	if err := search("alice", "ngnix"); !errors.Is(err, store.ErrThrottled) || !strings.Contains(err.Error(), "at most 2") {
		t.Errorf("third fuzzy search = %v; want ErrThrottled naming the bound", err)
	}
	for _, c := range []struct{ subject, fuzzy string }{{"alice", ""}, {"bob", "ngnix"}} {
		if err := search(c.subject, c.fuzzy); err != nil {
			t.Errorf("%s's search (fuzzyName %q): %v", c.subject, c.fuzzy, err)
		}
	}
	close(release)
	running.Wait()
	if err := search("alice", "ngnix"); err != nil {
		t.Errorf("after they answered: %v", err)
	}
}
