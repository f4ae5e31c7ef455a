package simulate

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// writer batches one publishing goroutine's events into writes of up to PublishBatch events. Each
// cluster is published by one writer, whose writes wait for Kafka's acknowledgement one after the
// other, so every (cluster, resource)'s events stay in order; writers share the stream.Writer,
// which merges their concurrent writes into its produce requests.
type writer struct {
	w     stream.Writer
	topic string
	batch int
	log   *slog.Logger
	stats *stats

	msgs  []stream.Message
	types []envelope.Type
}

// stats count what every writer published.
type stats struct {
	events [5]atomic.Int64 // by type, in typeIndex order
	bytes  atomic.Int64    // envelope bytes, before compression
	writes atomic.Int64
}

func typeIndex(t envelope.Type) int {
	switch t {
	case envelope.Added:
		return 0
	case envelope.Modified:
		return 1
	case envelope.Deleted:
		return 2
	case envelope.Sync:
		return 3
	}
	return 4
}

var typeOrder = [5]envelope.Type{envelope.Added, envelope.Modified, envelope.Deleted, envelope.Sync, envelope.Purge}

func (st *stats) total() int64 {
	var n int64
	for i := range st.events {
		n += st.events[i].Load()
	}
	return n
}

// add encodes ev into the batch, writing the batch once it is full.
func (w *writer) add(ctx context.Context, ev *envelope.Event) error {
	value, err := ev.Marshal()
	if err != nil {
		return fmt.Errorf("encode %s event of %s/%s: %w", ev.Type, ev.Namespace, ev.Name, err)
	}
	w.msgs = append(w.msgs, stream.Message{Topic: w.topic, Key: ev.Key(), Value: value})
	w.types = append(w.types, ev.Type)
	if len(w.msgs) >= w.batch {
		return w.flush(ctx)
	}
	return nil
}

// flush writes the batch and waits until Kafka acknowledged all of it.
func (w *writer) flush(ctx context.Context) error {
	if len(w.msgs) == 0 {
		return nil
	}
	if err := writeRetrying(ctx, w.w, w.msgs, w.log); err != nil {
		return fmt.Errorf("publish to %s: %w", w.topic, err)
	}
	var n int64
	for i := range w.msgs {
		n += int64(len(w.msgs[i].Value))
		w.stats.events[typeIndex(w.types[i])].Add(1)
	}
	w.stats.bytes.Add(n)
	w.stats.writes.Add(1)
	clear(w.msgs) // the values are garbage now
	w.msgs, w.types = w.msgs[:0], w.types[:0]
	return nil
}

// writeRetrying writes msgs until Kafka acknowledged every one of them, with backoff, or ctx ends.
// A failed write is repeated whole: of a partly failed one, the messages written go again, and the
// last copy of each message still follows the last copy of every message before it in its
// partition, as a collector's rewrite guarantees (delivery is at least once, the indexer
// idempotent). A message too large is not retried: no retry makes it fit.
func writeRetrying(ctx context.Context, w stream.Writer, msgs []stream.Message, log *slog.Logger) error {
	bo := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 10 * time.Second, Steps: 1 << 30}
	for {
		err := w.Write(ctx, msgs...)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || stream.TooLarge(err) {
			return err
		}
		delay := bo.Step()
		log.Warn("kafka write failed, retrying", "messages", len(msgs), "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return err
		}
	}
}
