package envelope

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Epochs increase even when the clock stands still or steps back, so a restarted collector's lists
// always supersede the previous ones as long as its clock is not behind by more than the restart took.
func TestEpochsIncrease(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	e := NewEpochs(func() time.Time { return now }, nil)
	next := func() int64 {
		n, err := e.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := next()
	b := next()
	now = now.Add(-time.Second)
	c := next()
	now = now.Add(time.Hour)
	d := next()
	if !(a < b && b < c && c < d) {
		t.Fatalf("epochs %d %d %d %d are not increasing", a, b, c, d)
	}
	if a != time.Unix(1_700_000_000, 0).UnixMicro() {
		t.Fatalf("first epoch %d is not the clock in microseconds", a)
	}
}

// A restarted collector whose clock stepped back hands out epochs above every epoch the previous run
// used: the previous run reserved a bound before handing out anything above it, and the new run
// starts above that bound. Without it the new lists' SYNCs would delete nothing and their watermarks
// freeze.
func TestEpochsIncreaseAcrossRestartsWhateverTheClock(t *testing.T) {
	var ledger int64 // what the ledger holds across the restart
	reserve := func(_ context.Context, upTo int64) error { ledger = max(ledger, upTo); return nil }
	now := time.Unix(1_700_000_000, 0)
	first := NewEpochs(func() time.Time { return now }, reserve)
	var last int64
	for range 3 {
		n, err := first.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		last = n
		now = now.Add(7 * time.Minute) // past the reservation: a new one is written
	}
	if ledger < last {
		t.Fatalf("epoch %d handed out above the reserved %d", last, ledger)
	}

	now = now.Add(-6 * time.Hour) // the clock steps back across the restart
	second := NewEpochs(func() time.Time { return now }, reserve)
	second.Restore(ledger)
	n, err := second.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n <= last {
		t.Fatalf("after the restart epoch %d, not above the previous run's %d", n, last)
	}

	failing := NewEpochs(time.Now, func(context.Context, int64) error { return errors.New("kafka away") })
	if _, err := failing.Next(t.Context()); err == nil {
		t.Error("an epoch was handed out although it could not be reserved")
	}
}

// A collection being stopped is never held up by another's epoch reservation waiting for an absent
// Kafka: its next returns once its context ends.
func TestEpochsNextGivesUpWhenStopped(t *testing.T) {
	release := make(chan struct{})
	e := NewEpochs(time.Now, func(ctx context.Context, _ int64) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	go func() { _, _ = e.Next(context.Background()) }() // waits for Kafka, holding its turn
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := e.Next(ctx); done <- err }()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("an epoch was handed out to a stopped collection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("next waited behind another reservation after its context ended")
	}
	close(release)
}
