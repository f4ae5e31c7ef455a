package simulate

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kubesearch/kubesearch/internal/envelope"
)

// churnTick is how often each writer publishes the changes that came due: a change waits at most
// this long (plus Kafka's acknowledgement) between being made and being published.
const churnTick = 20 * time.Millisecond

// churnAll makes ChurnRate changes per second across the fleet, for ChurnDuration or until ctx
// ends. Each cluster makes its share (ChurnRate / Clusters), its changes drawn from its own random
// source, so a cluster's sequence of operations depends on the seed only.
func (s *Simulator) churnAll(ctx context.Context) error {
	s.setPhase("churning")
	start := time.Now()
	before := s.stats.total()
	cctx := ctx
	if s.opts.ChurnDuration > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, s.opts.ChurnDuration)
		defer cancel()
	}
	g := errgroup.Group{}
	for _, mine := range s.shares() {
		rate := s.opts.ChurnRate * float64(len(mine)) / float64(len(s.clusters))
		g.Go(func() error { return s.churn(cctx, mine, rate) })
	}
	err := g.Wait()
	s.mu.Lock()
	s.report.ChurnEvents = s.stats.total() - before
	s.report.ChurnSeconds = time.Since(start).Seconds()
	s.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// churn makes one writer's changes, rate per second, round robin over its clusters.
func (s *Simulator) churn(ctx context.Context, mine []*cluster, rate float64) error {
	if len(mine) == 0 || rate <= 0 {
		return nil
	}
	w, r := s.newWriter(), &renderer{}
	// What is batched when the churn ends is published: a change made is never lost.
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = w.flush(fctx)
	}()
	tick := time.NewTicker(churnTick)
	defer tick.Stop()
	start := time.Now()
	var made int64
	next := 0
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return nil
		case now = <-tick.C:
		}
		due := int64(rate*now.Sub(start).Seconds()) - made
		for ; due > 0; due-- {
			c := mine[next%len(mine)]
			next++
			made++
			c.mu.Lock()
			ev, err := s.change(r, c, now.UTC())
			c.mu.Unlock()
			if err != nil {
				return err
			}
			if ev == nil {
				continue
			}
			if err := w.add(ctx, ev); err != nil {
				return ended(ctx, err)
			}
		}
		if err := w.flush(ctx); err != nil {
			return ended(ctx, err)
		}
	}
}

// ended is nil when err comes from ctx's end (the deferred flush writes what is left), else err.
func ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Churn operations.
const (
	opUpdate = iota
	opCreate
	opDelete
)

// change makes the cluster's next change and returns its event; nil when the cluster has nothing
// to change. Called with c.mu held.
func (s *Simulator) change(r *renderer, c *cluster, now time.Time) (*envelope.Event, error) {
	total := 0
	for k, p := range c.pairs {
		if p != nil {
			total += kinds[k].weight
		}
	}
	if total == 0 {
		return nil, nil
	}
	pick := c.rng.IntN(total)
	k := 0
	for ; k < kindCount; k++ {
		if c.pairs[k] == nil {
			continue
		}
		if pick < kinds[k].weight {
			break
		}
		pick -= kinds[k].weight
	}
	p := c.pairs[k]
	op := opUpdate
	if kinds[k].creatable {
		// As many creates as deletes: a cluster's population stays about the same.
		switch x := c.rng.IntN(10); {
		case x < 2:
			op = opCreate
		case x < 4:
			op = opDelete
		}
	}
	if len(p.objs) == 0 {
		if !kinds[k].creatable {
			return nil, nil
		}
		op = opCreate
	}
	if op == opCreate && c.apps == 0 {
		return nil, nil // a cluster too small to run an app (--objects 1) creates nothing
	}
	rv := c.nextRV(now)
	var (
		o   object
		typ envelope.Type
	)
	switch op {
	case opUpdate:
		i := c.rng.IntN(len(p.objs))
		p.objs[i].gen++
		p.objs[i].rv, p.objs[i].changed = rv, now.UnixMicro()
		o, typ = p.objs[i], envelope.Modified
	case opCreate:
		o = object{app: int32(c.rng.IntN(c.apps)), ord: c.next, rv: rv, created: now.Unix(), changed: now.UnixMicro()}
		c.next++
		switch k {
		case kPod:
			o.aux = podState(c.rng.Uint64())
		case kEvent:
			o.aux = uint32(eventBackOff + c.rng.IntN(eventReasons-eventBackOff))
		}
		p.objs = append(p.objs, o)
		typ = envelope.Added
	case opDelete:
		i := c.rng.IntN(len(p.objs))
		o = p.objs[i]
		o.rv, o.changed = rv, now.UnixMicro() // a watch's DELETED carries the object at the deletion
		p.objs[i] = p.objs[len(p.objs)-1]
		p.objs = p.objs[:len(p.objs)-1]
		typ = envelope.Deleted
	}
	ev, err := s.event(r, c, k, &o, typ, p.epoch, now)
	if err != nil {
		return nil, err
	}
	p.lastRV, p.publishedAt = rv, now
	p.last = &Change{Type: typ, Cluster: c.name, Group: ev.Group, Version: ev.Version, Resource: ev.Resource,
		Namespace: ev.Namespace, Name: ev.Name, UID: ev.UID, ResourceVersion: ev.ResourceVersion}
	return ev, nil
}
