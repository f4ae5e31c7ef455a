package lifecycle

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Stop steps run after the workers returned, last added first; a service keeps running until its
// own step, so a server added first still answers while everything else drains.
func TestStopOrder(t *testing.T) {
	var (
		mu    sync.Mutex
		order []string
	)
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	ctx, cancel := context.WithCancel(t.Context())
	g := New(ctx)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })}
	g.Serve("http", srv, l)
	g.OnStop("client", func(context.Context) error { note("client"); return nil })
	flushed := make(chan struct{})
	g.Start("publisher", func(context.Context) error { <-flushed; note("publisher flushed"); return nil },
		func(context.Context) error {
			// The server still answers while the publisher drains.
			resp, err := http.Get("http://" + l.Addr().String())
			if err != nil {
				return err
			}
			resp.Body.Close()
			note("server answered while draining")
			close(flushed)
			return nil
		})
	g.Go("worker", func(ctx context.Context) error { <-ctx.Done(); note("worker"); return nil })
	cancel()
	if err := g.Wait(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	want := []string{"worker", "server answered while draining", "publisher flushed", "client"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %q, want %q", order, want)
	}
	if _, err := http.Get("http://" + l.Addr().String()); err == nil {
		t.Error("the server still answers after Wait")
	}
}

// A worker's error stops the others and is returned, named; a service that does not stop within the
// timeout is aborted and waited for, and that is an error too.
func TestFailureAndAbort(t *testing.T) {
	g := New(t.Context())
	aborted := make(chan struct{})
	g.Start("stuck", func(ctx context.Context) error { <-ctx.Done(); close(aborted); return ctx.Err() },
		func(context.Context) error { return nil })
	g.Go("other", func(ctx context.Context) error { <-ctx.Done(); return nil })
	g.Go("failing", func(context.Context) error { return errors.New("boom") })
	err := g.Wait(50 * time.Millisecond)
	select {
	case <-aborted:
	default:
		t.Fatal("the stuck service was not aborted")
	}
	if err == nil || !strings.Contains(err.Error(), "failing: boom") || !strings.Contains(err.Error(), "stop stuck: aborted") {
		t.Fatalf("Wait: %v", err)
	}
}
