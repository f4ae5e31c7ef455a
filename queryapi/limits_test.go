package queryapi

import (
	"testing"
	"time"
)

func TestLimiterPerSubject(t *testing.T) {
	l := newLimiter(1, 3, 2)
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
	if _, ok := l.startWatch("alice"); !ok {
		t.Fatal("a watch ended, yet a new one is refused")
	}
}
