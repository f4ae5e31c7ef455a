package collector

import (
	"context"
	"errors"
	"sync"

	"github.com/kubesearch/kubesearch/internal/envelope"
)

// errGateClosed is what a stopped collection's late Publish gets.
var errGateClosed = errors.New("collection stopped: event not published")

// gate is a collection's only way to the publisher. Closing it is final: once close has returned, no
// event of the collection reaches the stream, not even from a goroutine the collection left behind
// (a stopped client-go Reflector does not wait for its list goroutine, which goes on calling
// Publish). That is what lets a selection's PURGE be the last event it ever sends: the collector
// closes the gate, then publishes the PURGE.
type gate struct {
	sink   sink
	cancel context.CancelFunc // the collection's context: unblocks a Publish waiting for buffer room

	mu     sync.RWMutex // held for reading by every Publish in flight, for writing by close
	closed bool
}

func newGate(s sink, cancel context.CancelFunc) *gate { return &gate{sink: s, cancel: cancel} }

// Publish hands ev to the sink unless the gate is closed. ctx must be done once the gate's cancel
// is called, or close would wait for a Publish blocked on a full buffer.
func (g *gate) Publish(ctx context.Context, ev *envelope.Event) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return errGateClosed
	}
	return g.sink.Publish(ctx, ev)
}

// close cancels the collection and returns once every Publish in flight has returned; every later
// one is refused.
func (g *gate) close() {
	g.cancel()
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}
