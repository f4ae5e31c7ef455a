package blevestore

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/store/storetest"
)

// TestContractSnapshotLimits runs the contract's case of the snapshot bounds on the embedded
// store (the whole suite runs on both backends in tests/e2e).
func TestContractSnapshotLimits(t *testing.T) {
	s, err := New(Options{Dir: t.TempDir(), TokenKey: testKey, KeepAlive: storetest.KeepAlive, Limits: storetest.Limits})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.RunCase(t, s, storetest.SnapshotLimitsCase)
}

// TestContractSameUID runs the contract's case of one uid in two members (a member registered
// under two names, members cloned from one etcd snapshot): a document each, and neither's delete
// or SYNC touches the other's.
func TestContractSameUID(t *testing.T) {
	s, err := New(Options{Dir: t.TempDir(), TokenKey: testKey, KeepAlive: storetest.KeepAlive, Limits: storetest.Limits})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.RunCase(t, s, storetest.SameUIDCase)
}

// TestSnapshotsPerSubject: a poller of limit=1 first pages holds at most its share of snapshots
// (each holds an index reader), and closes its own, not another subject's.
func TestSnapshotsPerSubject(t *testing.T) {
	s, err := New(Options{Dir: t.TempDir(), TokenKey: testKey, Limits: store.Limits{SnapshotsPerSubject: 2, Snapshots: 100}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ops []store.Op
	for i := range 5 {
		ops = append(ops, pod("east", "shop", fmt.Sprintf("p%d", i), 1, nil, "", "Running", "nginx").op(t))
	}
	write(t, s, ops...)
	first := func(subject string) string {
		t.Helper()
		q := parse(t, "limit=1")
		q.Subject = subject
		res := find(t, s, q)
		if res.Continue == "" || len(res.Warnings) > 0 {
			t.Fatalf("first page of %s: continue %q, warnings %q", subject, res.Continue, res.Warnings)
		}
		return res.Continue
	}
	bob := first("bob")
	alice := []string{first("alice"), first("alice")}
	for range 100 {
		first("alice")
	}
	if n, all := s.snaps.Count("alice"); n != 2 || all != 3 {
		t.Errorf("alice holds %d of %d snapshots; want 2 of 3", n, all)
	}
	q := parse(t, "limit=1")
	q.Subject = "alice"
	for _, tok := range alice {
		q.Continue = tok
		if _, err := s.Search(t.Context(), q); !errors.Is(err, store.ErrExpired) || !strings.Contains(err.Error(), "at most 2") {
			t.Errorf("alice's oldest token = %v; want ErrExpired naming the bound", err)
		}
	}
	q.Subject, q.Continue = "bob", bob
	if _, err := s.Search(t.Context(), q); err != nil {
		t.Errorf("bob's token: %v", err)
	}
}

// TestFuzzySearchesPerSubject: with a subject's searches by fuzzy name at its bound, its next one
// is ErrThrottled; another subject's, and its searches of other kinds, are not.
func TestFuzzySearchesPerSubject(t *testing.T) {
	s, err := New(Options{Dir: t.TempDir(), TokenKey: testKey, Limits: store.Limits{FuzzySearchesPerSubject: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write(t, s, pod("east", "shop", "nginx-1", 1, nil, "", "Running", "nginx").op(t))
	search := func(subject, params string) error {
		q := parse(t, params)
		q.Subject = subject
		_, err := s.Search(t.Context(), q)
		return err
	}
	done, err := s.fuzzy.Acquire("alice") // one of alice's runs
	if err != nil {
		t.Fatal(err)
	}
	if err := search("alice", "fuzzyName=ngnix"); !errors.Is(err, store.ErrThrottled) || !strings.Contains(err.Error(), "at most 1") {
		t.Errorf("alice's second fuzzy search = %v; want ErrThrottled naming the bound", err)
	}
	for _, c := range []struct{ subject, params string }{{"bob", "fuzzyName=ngnix"}, {"alice", "namePrefix=ng"}} {
		if err := search(c.subject, c.params); err != nil {
			t.Errorf("%s's %s: %v", c.subject, c.params, err)
		}
	}
	done()
	if err := search("alice", "fuzzyName=ngnix"); err != nil {
		t.Errorf("once the first answered: %v", err)
	}
}
