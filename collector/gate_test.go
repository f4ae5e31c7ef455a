package collector

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// TestGateShutsOutLatePublishers: goroutines the collection left behind (a stopped Reflector's list
// goroutine) keep calling Publish; once close has returned, none of their events reaches the sink,
// so the PURGE published next is the last event of the selection.
func TestGateShutsOutLatePublishers(t *testing.T) {
	sink := &recordingSink{}
	ctx, cancel := context.WithCancel(t.Context())
	g := newGate(sink, cancel)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = g.Publish(ctx, &envelope.Event{Type: envelope.Added})
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	g.close()
	_ = sink.Publish(t.Context(), &envelope.Event{Type: envelope.Purge})
	time.Sleep(20 * time.Millisecond) // the late publishers go on meanwhile
	close(stop)
	wg.Wait()
	evs := sink.take()
	if len(evs) < 2 || evs[len(evs)-1].Type != envelope.Purge {
		t.Fatalf("the PURGE is not the last event: %d events, last %v", len(evs), evs[len(evs)-1].Type)
	}
	if err := g.Publish(t.Context(), &envelope.Event{}); !errors.Is(err, errGateClosed) {
		t.Errorf("Publish after close: %v, want errGateClosed", err)
	}
}

// TestGateCloseUnblocksFullBuffer: a collection blocked on a full publish buffer (Kafka away) is
// stopped at once; close does not wait for Kafka.
func TestGateCloseUnblocksFullBuffer(t *testing.T) {
	pub := newPublisher(stream.NewClient([]string{"127.0.0.1:1"}, stream.Connection{}, nil), publisherOptions{Topic: "t", Partitions: 1,
		MaxMessageBytes: 1 << 20, Buffer: 1, Batch: 1}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	pub.metrics = newMetrics(func() float64 { return 0 })
	ctx, cancel := context.WithCancel(t.Context())
	g := newGate(pub, cancel)
	ev := &envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: "m", Version: "v1", Resource: "pods", Kind: "Pod"}
	if err := g.Publish(ctx, ev); err != nil { // fills the buffer
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() { blocked <- g.Publish(ctx, ev) }()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan struct{})
	go func() { g.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("close waited for a Publish blocked on the full buffer")
	}
	if err := <-blocked; err == nil {
		t.Error("the blocked Publish succeeded after close")
	}
}
