// Package lifecycle is how every kubesearch component runs and stops, so all of them stop alike:
//
//   - workers (Go) do the component's work until its context ends; Wait waits for all of them
//     first;
//   - services (Start, Serve) run beside the workers and stop only in their own stop step, once the
//     workers returned: a publisher flushing what the workers handed it, an HTTP server answering
//     /metrics while the component drains;
//   - stop steps (OnStop, and each service's) run after the workers, the last added first — so what
//     was started first (the servers) stops last — all under one timeout. A service that has not
//     stopped when the timeout ends is aborted: its context is cancelled, and it is waited for.
//
// Every goroutine is owned by the Group and waited for. It leaves out what the parts do.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Group owns the workers, services and stop steps of a component.
type Group struct {
	ctx    context.Context // done when the component must stop, or a part of it failed
	cancel context.CancelFunc
	wg     sync.WaitGroup // the workers

	mu    sync.Mutex
	errs  []error
	steps []step
}

type step struct {
	name string
	fn   func(ctx context.Context) error
}

// New returns a Group whose context ends with parent's, or when a part of the Group fails.
func New(parent context.Context) *Group {
	ctx, cancel := context.WithCancel(parent)
	return &Group{ctx: ctx, cancel: cancel}
}

// Context is done once the component must stop.
func (g *Group) Context() context.Context { return g.ctx }

// Go runs a worker. An error from it stops the component and is returned by Wait, named.
func (g *Group) Go(name string, fn func(ctx context.Context) error) {
	g.wg.Go(func() {
		if err := fn(g.ctx); err != nil {
			g.fail(fmt.Errorf("%s: %w", name, err))
		}
	})
}

// Start runs a service: run until stop makes it return, in the service's stop step. run's context is
// cancelled only to abort it, when the stop step's timeout ends first. An error from run (other than
// after an abort) stops the component.
func (g *Group) Start(name string, run func(ctx context.Context) error, stop func(ctx context.Context) error) {
	ctx, abort := context.WithCancel(context.WithoutCancel(g.ctx))
	done := make(chan error, 1)
	go func() {
		err := run(ctx)
		if err != nil && ctx.Err() == nil {
			g.fail(fmt.Errorf("%s: %w", name, err))
		}
		done <- err
	}()
	g.OnStop(name, func(sctx context.Context) error {
		defer abort()
		err := stop(sctx)
		select {
		case <-done:
		case <-sctx.Done():
			abort()
			<-done
			return errors.Join(err, fmt.Errorf("aborted: %w", sctx.Err()))
		}
		return err
	})
}

// Serve runs an HTTP server as a service on l; its stop step shuts it down gracefully.
func (g *Group) Serve(name string, srv *http.Server, l net.Listener) {
	g.Start(name, func(context.Context) error {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}, srv.Shutdown)
}

// OnStop adds a stop step: it runs once every worker returned, before the steps added earlier.
func (g *Group) OnStop(name string, fn func(ctx context.Context) error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.steps = append(g.steps, step{name, fn})
}

// Wait waits for every worker, then runs every stop step, last added first, all within timeout
// (their context is not done with the Group's: they run because it is). It returns every error of
// every part, each named.
func (g *Group) Wait(timeout time.Duration) error {
	g.wg.Wait()
	g.cancel()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), timeout)
	defer cancel()
	for {
		g.mu.Lock()
		if len(g.steps) == 0 {
			err := errors.Join(g.errs...)
			g.mu.Unlock()
			return err
		}
		s := g.steps[len(g.steps)-1]
		g.steps = g.steps[:len(g.steps)-1]
		g.mu.Unlock()
		if err := s.fn(ctx); err != nil {
			g.fail(fmt.Errorf("stop %s: %w", s.name, err))
		}
	}
}

func (g *Group) fail(err error) {
	g.mu.Lock()
	g.errs = append(g.errs, err)
	g.mu.Unlock()
	g.cancel()
}

// Sleep waits d, or until ctx is done, and then returns ctx's error: the wait between retries of
// every component, never a bare time.Sleep that a shutdown cannot cut short.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
