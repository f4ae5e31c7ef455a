package indexer

import (
	"context"
	"fmt"

	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// The change feed (package changes) is published before the changes are written: a crash in
// between publishes them again when the events are consumed again (a repeat), where publishing
// after writing would lose them (consumed again, the events then find their changes in the index
// and make no records). Garbage collection's deletions likewise: each page of documents a marker
// removes is published, then deleted; the marker's own record follows its last page.

// publishChanges publishes the records of the ops about to be written (owners[i] is the event of
// ops[i]), judged against what the index holds (one read per batch), retrying until published or
// ctx ends.
func (c *consumer) publishChanges(ctx context.Context, ops []store.Op, owners []*item) error {
	if c.changes == nil {
		return nil
	}
	bo := c.backoff()
	var priors []store.Prior
	for {
		var err error
		if priors, err = c.docs.Priors(ctx, ops); err == nil {
			break
		}
		if err := c.wait(ctx, &bo, "change feed: reading the stored documents failed", len(ops), err); err != nil {
			return err
		}
	}
	t := changes.NewTracker()
	for i, o := range ops {
		t.Prior(o, priors[i])
	}
	var recs []*changes.Record
	for i, o := range ops {
		it := owners[i]
		if r := t.Change(o, it.ev, c.source(it)); r != nil {
			recs = append(recs, r)
		}
	}
	return c.publish(ctx, recs)
}

// publishGone publishes the DELETED records of documents a marker's collection is about to delete.
func (c *consumer) publishGone(ctx context.Context, marker *item, gone []store.Gone) error {
	recs := make([]*changes.Record, len(gone))
	for i, g := range gone {
		recs[i] = changes.Gone(marker.ev, g, c.source(marker))
	}
	return c.publish(ctx, recs)
}

// publishMarker publishes a marker's own record, once its collection is done.
func (c *consumer) publishMarker(ctx context.Context, marker *item) error {
	if c.changes == nil {
		return nil
	}
	return c.publish(ctx, []*changes.Record{changes.Marker(marker.ev, c.source(marker))})
}

func (c *consumer) source(it *item) changes.Source {
	return changes.Source{Partition: it.msg.Partition, Offset: it.msg.Offset, Batch: c.batchEnd[it.msg.Partition]}
}

// feedBookmarks is what the consumer needs of the stream for the feed's bookmark
// (changes.BookmarkGroup).
type feedBookmarks interface {
	HighWaterMarks(ctx context.Context, topic string) (map[int]int64, error)
	CommitOffsets(ctx context.Context, group, topic string, offsets map[int]int64) error
}

// publish writes records to the feed, in order, retrying until written or ctx ends: a record
// skipped would be a change no reader of the feed ever learns of.
func (c *consumer) publish(ctx context.Context, recs []*changes.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if c.feedStart == nil {
		// The feed's end before the batch publishes: the bookmark once the batch is written.
		bo := c.backoff()
		for {
			ends, err := c.bookmarks.HighWaterMarks(ctx, c.feedTopic)
			if err == nil {
				c.feedStart = ends
				break
			}
			if err := c.wait(ctx, &bo, "change feed: reading the feed's end failed", len(recs), err); err != nil {
				return err
			}
		}
	}
	msgs := make([]stream.Message, len(recs))
	for i, r := range recs {
		b, err := r.Marshal()
		if err != nil {
			return fmt.Errorf("change feed: encode the record of %s %s: %w", r.Pair().ID(), r.UID, err)
		}
		msgs[i] = stream.Message{Key: r.Key(), Value: b}
	}
	bo := c.backoff()
	for {
		err := c.changes.Write(ctx, msgs...)
		if err == nil {
			c.metrics.changes.Add(float64(len(msgs)))
			return nil
		}
		if err := c.wait(ctx, &bo, "change feed: publishing failed", len(msgs), err); err != nil {
			return err
		}
	}
}

// bookmark commits, once a batch that published records is written and committed, the feed's end
// before it for the batch's partitions. A failure is logged: the bookmark stays behind, and readers
// starting then read more of the feed, nothing less.
func (c *consumer) bookmark(ctx context.Context) {
	if c.feedStart == nil {
		return
	}
	at := map[int]int64{}
	for p := range c.batchEnd {
		if o, ok := c.feedStart[p]; ok {
			at[p] = o
		}
	}
	c.feedStart = nil
	if err := c.bookmarks.CommitOffsets(ctx, c.feedGroup, c.feedTopic, at); err != nil {
		c.log.Warn("change feed: bookmark not committed; readers starting now read from an older one", "group", c.feedGroup, "err", err)
	}
}
