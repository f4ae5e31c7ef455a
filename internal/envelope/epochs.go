package envelope

import (
	"context"
	"fmt"
	"time"
)

// Epochs hands out epochs that increase within a process and across restarts, whatever the clock
// does: microseconds since the Unix epoch, bumped by one when two are asked for within the same
// microsecond or the clock stepped back. Across restarts the ledger carries the bound: no epoch above
// reserved is handed out before reserve durably recorded a higher one, and a restarted collector
// starts above what its predecessor recorded (Restore). The collector and the fleet simulator,
// which writes what collectors would, hand them out alike. A clock stepped back therefore only makes
// epochs count on from the last one, never go lower.
type Epochs struct {
	// turn serialises Next (a reservation waits for Kafka) and is taken with a select on ctx, so a
	// collection being stopped never waits behind another's reservation.
	turn     chan struct{}
	last     int64
	reserved int64
	now      func() time.Time
	// reserve records that epochs up to upTo may be handed out; nil records nothing (tests).
	reserve func(ctx context.Context, upTo int64) error
}

// NewEpochs hands out epochs by the clock now, recording each reservation with reserve.
func NewEpochs(now func() time.Time, reserve func(ctx context.Context, upTo int64) error) *Epochs {
	return &Epochs{turn: make(chan struct{}, 1), now: now, reserve: reserve}
}

// ReserveAhead is how far ahead of the clock epochs are reserved: one ledger write per served
// cluster every this much time.
const ReserveAhead = 10 * time.Minute

// Restore makes every later epoch higher than floor. Call it before the first Next, and again when
// another process may have handed out epochs of the same clusters (a collector replica taking
// clusters over from another).
func (e *Epochs) Restore(floor int64) {
	e.turn <- struct{}{}
	defer func() { <-e.turn }()
	e.last, e.reserved = max(e.last, floor), max(e.reserved, floor)
}

// Next is a new epoch, above every one handed out or reserved before.
func (e *Epochs) Next(ctx context.Context) (int64, error) {
	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("next epoch: %w", ctx.Err())
	}
	defer func() { <-e.turn }()
	n := max(e.now().UnixMicro(), e.last+1)
	if e.reserve != nil && n > e.reserved {
		upTo := n + ReserveAhead.Microseconds()
		if err := e.reserve(ctx, upTo); err != nil {
			return 0, fmt.Errorf("reserve epochs: %w", err)
		}
		e.reserved = upTo
	}
	e.last = n
	return n, nil
}
