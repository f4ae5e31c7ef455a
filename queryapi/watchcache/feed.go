package watchcache

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// Reading the change feed (package changes, Options.Changes) instead of the event stream: the
// indexers publish what they change in the index, deletions by SYNC and PURGE markers included,
// and nothing for a re-list's unchanged objects. The cache then keeps no identity per object — no
// seeding from the index at start, no memory growing with the fleet — only, per object with an
// event in the window, the seq of its newest one (for Event.PrevSeq), and per pair the positions
// it keeps in either mode.

// fillFeed is fill for the change feed: it reads the feed from the indexers' bookmark
// (changes.BookmarkGroup) less replaySlack, which holds every change a LIST served from the index
// may not show yet (written since the last refresh, or not written yet).
func (c *Cache) fillFeed(ctx context.Context, kafka stream.Broker, feed, indexerGroup string, src Index) error {
	// The indexers create the feed when they start: a query API started beside them on a first
	// install waits for it a little, rather than following the event stream and switching later.
	spans, err := kafka.Spans(ctx, feed)
	for deadline := time.Now().Add(feedWait); stream.UnknownTopic(err) && time.Now().Before(deadline); {
		if err := lifecycle.Sleep(ctx, time.Second); err != nil {
			return err
		}
		spans, err = kafka.Spans(ctx, feed)
	}
	if err != nil {
		return err
	}
	marks, err := kafka.CommittedOffsets(ctx, changes.BookmarkGroup(indexerGroup), feed)
	if err != nil {
		return err
	}
	from, behind, toRead, unmarked := startOffsets(spans, marks)
	if len(unmarked) > 0 {
		c.log.Info("the indexers have no bookmark on these partitions of the change feed yet: the watch cache reads them from their start (if this repeats at every start, check that --indexer-group is the indexers' --group and that they publish the feed)",
			"indexerGroup", indexerGroup, "topic", feed, "partitions", unmarked)
	}
	wms, err := src.Watermarks(ctx)
	if err != nil {
		return fmt.Errorf("watermarks: %w", err)
	}
	c.Seed(wms)
	if len(behind) == 0 {
		c.CaughtUp()
	}
	c.log.Info("watch cache reading the change feed", "topic", feed, "partitions", len(spans), "replaying", len(behind), "recordsToReplay", toRead)
	f, err := kafka.NewFollower(stream.FollowerConfig{Topic: feed, From: from})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.feedMode = true
	c.mu.Unlock()
	c.startMarks(from)
	return f.Run(ctx, func(_ context.Context, m stream.Message) error {
		rec, err := changes.Unmarshal(m.Value)
		c.applyAt(m, func() {
			if err == nil {
				c.applyChangeLocked(rec)
			}
		})
		if end, ok := behind[m.Partition]; ok && m.Offset+1 >= end {
			delete(behind, m.Partition)
			if len(behind) == 0 {
				c.CaughtUp()
				c.log.Info("watch cache caught up with the change feed")
			}
		}
		return nil
	})
}

// startOffsets is where reading a topic starts, per partition: replaySlack before the committed
// offset (the whole partition where nothing is committed), with, per partition with something to
// read, its end now (behind), their total, and the partitions without a commit.
func startOffsets(spans map[int]stream.Span, committed map[int]int64) (from, behind map[int]int64, toRead int64, uncommitted []int) {
	from, behind = map[int]int64{}, map[int]int64{}
	for p, sp := range spans {
		at := sp.First
		if co, ok := committed[p]; ok && co >= 0 {
			at = max(sp.First, min(co, sp.End)-replaySlack)
		} else if sp.End > sp.First {
			uncommitted = append(uncommitted, p)
		}
		from[p] = at
		if sp.End > at {
			behind[p] = sp.End
			toRead += sp.End - at
		}
	}
	return from, behind, toRead, uncommitted
}

// feedWait is how long a start waits for the change feed to exist before following the event
// stream instead.
const feedWait = 30 * time.Second

// objectKey names an object of a pair in lastSeq.
func objectKey(p store.Pair, uid string) string { return p.ID() + "/" + uid }

// ApplyChange turns one record of the change feed into watch events, as Apply turns an event of
// the stream. Run applies every record it reads in feed mode.
func (c *Cache) ApplyChange(rec *changes.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextRecordLocked(rec.Event.Pair(), func() { c.applyChangeLocked(rec) })
}

func (c *Cache) applyChangeLocked(rec *changes.Record) {
	src := rec.Source
	if b, ok := c.batches[src.Partition]; ok && src.Batch < b {
		return // a late batch of an indexer that lost the partition (package changes)
	}
	c.batches[src.Partition] = src.Batch
	ev := &rec.Event
	pair := ev.Pair()
	rv, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64)
	switch {
	case ev.Type == envelope.Sync:
		var ok bool
		if rv, ok = c.applySyncLocked(ev, pair); !ok {
			return
		}
	case ev.Type == envelope.Purge:
		return // its deletions came before it
	case rec.Marker == envelope.Sync:
		// The list found the object gone: deleted at the list's position, as Apply deletes at a SYNC.
		if ev.Epoch < c.eventScopeLocked(pair, ev.Namespace).wentBackAt {
			return // a SYNC of the numbering the member left
		}
		listRV, _ := strconv.ParseInt(ev.ListResourceVersion, 10, 64)
		rv = max(listRV, c.head[pair])
		c.deleteLocked(rec, pair, rv)
	case rec.Marker == envelope.Purge:
		// The selection is gone: its deletions come after everything seen of the pair, at one
		// position past it per PURGE.
		if c.purging[pair] != src {
			c.purging[pair] = src
			c.head[pair]++
			c.setStableLocked(pair, c.head[pair])
		}
		c.deleteLocked(rec, pair, c.head[pair])
		rv = c.head[pair]
	default:
		if c.oldNumberingLocked(pair, ev.Namespace, ev.Epoch, rv) {
			return
		}
		if ev.Type == envelope.Deleted {
			if ev.Epoch <= c.synced[pair] {
				c.setStableLocked(pair, max(c.stable[pair], rv))
			}
			c.deleteLocked(rec, pair, rv)
			break
		}
		obj, err := document.Object(ev)
		if err != nil {
			return // the indexer dead-letters it: it never reaches the index either
		}
		if ev.Epoch <= c.synced[pair] {
			// Else a list of a newer epoch is in progress: positions wait for its SYNC.
			c.setStableLocked(pair, max(c.stable[pair], rv))
		}
		key := objectKey(pair, ev.UID)
		e := &Event{Type: watch.Added, Pair: pair, Namespace: ev.Namespace, UID: ev.UID, RV: rv, Object: obj}
		if rec.Previous != nil {
			e.Type, e.PrevLabels, e.PrevSeq = watch.Modified, previousLabels(rec), c.lastSeq[key]
		}
		c.appendLocked(e)
		c.lastSeq[key] = e.Seq
	}
	if rv > c.head[pair] {
		c.head[pair] = rv
	}
	c.notifyLocked()
}

// deleteLocked appends the DELETED of a record at resourceVersion rv.
func (c *Cache) deleteLocked(rec *changes.Record, pair store.Pair, rv int64) {
	ev := rec.Event
	ev.ResourceVersion = strconv.FormatInt(rv, 10)
	obj, err := document.Object(&ev)
	if err != nil {
		// No last state (the stream's DELETED may carry none): its identity.
		obj = identityOf(&ev, previousLabels(rec))
	}
	key := objectKey(pair, ev.UID)
	e := &Event{Type: watch.Deleted, Pair: pair, Namespace: ev.Namespace, UID: ev.UID, RV: rv, Object: obj,
		PrevLabels: previousLabels(rec), PrevSeq: c.lastSeq[key]}
	c.appendLocked(e)
	delete(c.lastSeq, key)
}

// previousLabels are a record's previous labels as Event.PrevLabels says them: "" when the index
// held nothing, "{}" for an object without labels.
func previousLabels(rec *changes.Record) string {
	switch {
	case rec.Previous == nil:
		return ""
	case len(rec.Previous.Labels) == 0:
		return "{}"
	}
	return string(rec.Previous.Labels)
}

// identityOf is the metadata-only object of an event without one, as deletedAt writes it.
func identityOf(ev *envelope.Event, labels string) []byte {
	apiVersion := ev.Version
	if ev.Group != "" {
		apiVersion = ev.Group + "/" + ev.Version
	}
	rv, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64)
	if labels == "" {
		labels = "{}"
	}
	st := &objState{ns: ev.Namespace, name: ev.Name, rv: rv, labels: labels, apiVersion: intern(apiVersion), kind: intern(ev.Kind)}
	return deletedAt(st, ev.Pair(), ev.UID, rv)
}

// Sync waits, when the cache follows the change feed, until it has read the changes of every event
// of pairs that the collectors published before the call: the indexers' committed offsets on the
// event topic's partitions of those pairs reach the ends those partitions had at the call, and the
// cache has read the feed's same partitions to their ends after that. Heads taken then are what a
// consistent read waits for the index to reach, as they are when the cache follows the event
// stream itself. Only the pairs' partitions are waited on, so how long it takes says nothing of
// other pairs. Following the event stream it returns at once.
func (c *Cache) Sync(ctx context.Context, pairs []store.Pair) error {
	o := c.opts
	c.mu.Lock()
	feed := c.feedMode
	c.mu.Unlock()
	if !feed {
		return nil
	}
	ends, err := o.Stream.HighWaterMarks(ctx, o.Topic)
	if err != nil {
		return err
	}
	parts := map[int]bool{}
	for _, p := range pairs {
		parts[stream.PartitionOf([]byte(p.ID()), len(ends))] = true
	}
	for {
		committed, err := o.Stream.CommittedOffsets(ctx, o.IndexerGroup, o.Topic)
		if err != nil {
			return err
		}
		behind := false
		for p := range parts {
			if committed[p] < ends[p] {
				behind = true
			}
		}
		if !behind {
			break
		}
		if err := lifecycle.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("the indexers are behind the event stream: %w", err)
		}
	}
	feedEnds, err := o.Stream.HighWaterMarks(ctx, o.Changes)
	if err != nil {
		return err
	}
	for {
		c.mu.Lock()
		read, ch := true, c.changed
		for p := range parts {
			if c.readTo[p] < feedEnds[p] {
				read = false
			}
		}
		c.mu.Unlock()
		if read {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("the watch cache is behind the change feed: %w", ctx.Err())
		}
	}
}
