package queryapi

import (
	"testing"
	"time"
)

func TestLimiterPerSubject(t *testing.T) {
	l := newLimiter(Options{RateLimit: 1, RateBurst: 3, MaxWatches: 2, MaxListsPerSubject: 1}, nil)
	for i := range 3 {
		if ok, _ := l.allow("alice"); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := l.allow("alice")
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("past the burst: ok %v, retry after %s; want refused, under a second", ok, wait)
	}
	if ok, _ := l.allow("bob"); !ok {
		t.Fatal("another subject is limited by alice's requests")
	}
	d1, ok1 := l.startWatch("alice")
	_, ok2 := l.startWatch("alice")
	if _, ok3 := l.startWatch("alice"); !ok1 || !ok2 || ok3 {
		t.Fatalf("watches: %v %v %v, want the third refused", ok1, ok2, ok3)
	}
	d1()
	d1() // done twice counts once
	if _, ok := l.startWatch("alice"); !ok {
		t.Fatal("a watch ended, yet a new one is refused")
	}
	if _, ok := l.startWatch("alice"); ok {
		t.Fatal("an ended watch's done, called twice, freed two places")
	}
	// Lists are counted apart from watches.
	l1, ok1 := l.startList("alice")
	if _, ok2 := l.startList("alice"); !ok1 || ok2 {
		t.Fatalf("lists: %v %v, want the second refused", ok1, ok2)
	}
	if _, ok := l.startList("bob"); !ok {
		t.Fatal("bob's list refused for alice's")
	}
	l1()
	if _, ok := l.startList("alice"); !ok {
		t.Fatal("a list ended, yet a new one is refused")
	}
}

// A nil limiter (a server built without bounds) bounds nothing.
func TestNilLimiter(t *testing.T) {
	var l *limiter
	if ok, _ := l.allow("alice"); !ok {
		t.Error("allow")
	}
	if _, ok := l.startList("alice"); !ok {
		t.Error("startList")
	}
	if _, ok := l.startRequest(); !ok {
		t.Error("startRequest")
	}
	if ok, _, knownOnly, _ := l.admitSource(source{}); !ok || knownOnly {
		t.Error("admitSource")
	}
	l.authFailed(source{})
	l.refuse(boundInFlight)
}
