package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/lifecycle"
)

// FollowerConfig says what a Follower reads.
type FollowerConfig struct {
	Topic string
	// From is, per partition, the offset of the first message wanted — to resume, the offset of the
	// last message seen plus one — or FirstOffset or LastOffset.
	From map[int]int64
	// Default is where the partitions From leaves out start: an offset, FirstOffset or LastOffset.
	// The zero value is offset 0.
	Default int64
	// MaxBytes bounds one fetch from one partition; a larger message still comes whole. Default 4 MiB.
	MaxBytes int
	// MaxWait is how long a fetch at a partition's end waits for a message; default 500 ms.
	MaxWait time.Duration
}

// kafkaFollower reads every partition of a topic without a consumer group — nothing is committed, every
// follower reads everything — from the offsets it is given on: a watch of the event stream, or
// the compacted ledger read whole and then followed.
//
// It reads the partitions the topic has when Run starts. One added later is not picked up: a topic's
// partition count is fixed for its life (DESIGN section 3), and a resume position names the
// partitions it was taken from.
type kafkaFollower struct {
	client *Client
	cfg    FollowerConfig
}

// NewFollower checks cfg and returns a follower; it connects when Run is called.
func (c *Client) NewFollower(cfg FollowerConfig) (Follower, error) {
	var errs []error
	if cfg.Topic == "" {
		errs = append(errs, errors.New("no topic"))
	}
	if cfg.Default < FirstOffset {
		errs = append(errs, fmt.Errorf("default offset %d: want an offset, FirstOffset or LastOffset", cfg.Default))
	}
	for p, o := range cfg.From {
		if p < 0 || o < FirstOffset {
			errs = append(errs, fmt.Errorf("partition %d offset %d: want a partition and an offset, FirstOffset or LastOffset", p, o))
		}
	}
	if cfg.MaxBytes < 0 || cfg.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("max bytes %d, max wait %s: want positive values or zero for the default", cfg.MaxBytes, cfg.MaxWait))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("follower of topic %q: %w", cfg.Topic, err)
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 4 << 20
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	return &kafkaFollower{client: c, cfg: cfg}, nil
}

// Run reads until ctx is done, calling handle with each message, one at a time, from Run's goroutine;
// each partition's messages come in offset order, those of different partitions interleaved. It waits
// for Kafka and for the topic to exist, logging, and retries what may pass. It returns nil once ctx
// is done, handle's error as it is, or why a partition cannot be read: OutOfRange when a start offset
// is not (or a position reached is no longer) in its partition, so reading must start over. Every
// goroutine it starts has ended when it returns.
func (f *kafkaFollower) Run(ctx context.Context, handle func(ctx context.Context, m Message) error) error {
	starts, err := f.starts(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	read, stop := context.WithCancelCause(ctx)
	msgs := make(chan Message)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop(nil)
	for p, offset := range starts {
		wg.Go(func() {
			if err := f.follow(read, p, offset, msgs); err != nil {
				stop(err)
			}
		})
	}
	for {
		select {
		case m := <-msgs:
			if err := handle(read, m); err != nil {
				return err
			}
		case <-read.Done():
			if ctx.Err() != nil {
				return nil
			}
			return context.Cause(read)
		}
	}
}

// starts is the offset each partition is read from, checked against what the partition holds.
func (f *kafkaFollower) starts(ctx context.Context) (map[int]int64, error) {
	topic := f.cfg.Topic
	bo := followBackoff()
	for {
		ps, err := f.client.Partitions(ctx, topic)
		var spans map[int]span
		if err == nil {
			spans, err = f.client.offsets(ctx, topic, ps)
		}
		if err == nil {
			return f.resolve(spans)
		}
		if !retriable(err) {
			return nil, fmt.Errorf("follow topic %s: %w", topic, err)
		}
		delay := bo.Step()
		f.client.log.Warn("cannot list the partitions to follow, retrying", "topic", topic, "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return nil, fmt.Errorf("follow topic %s: %w", topic, err)
		}
	}
}

func (f *kafkaFollower) resolve(spans map[int]span) (map[int]int64, error) {
	held := make(map[int]Span, len(spans))
	for p, sp := range spans {
		held[p] = Span{First: sp.first, End: sp.end}
	}
	return resolveStarts(f.cfg, held)
}

// resolveStarts is the offset each partition is read from, for either broker: cfg's offsets, checked
// against what each partition holds; a partition or offset it does not hold is OutOfRange.
func resolveStarts(cfg FollowerConfig, spans map[int]Span) (map[int]int64, error) {
	var errs []error
	for p := range cfg.From {
		if _, ok := spans[p]; !ok {
			errs = append(errs, fmt.Errorf("partition %d is not in topic %s (%d partitions): %w", p, cfg.Topic, len(spans), kafka.OffsetOutOfRange))
		}
	}
	starts := make(map[int]int64, len(spans))
	for p, s := range spans {
		o, ok := cfg.From[p]
		if !ok {
			o = cfg.Default
		}
		switch {
		case o == FirstOffset:
			o = s.First
		case o == LastOffset:
			o = s.End
		case o < s.First || o > s.End:
			errs = append(errs, fmt.Errorf("topic %s partition %d holds offsets %d to %d, not %d: %w", cfg.Topic, p, s.First, s.End, o, kafka.OffsetOutOfRange))
		}
		starts[p] = o
	}
	return starts, errors.Join(errs...)
}

// follow reads one partition from offset into out until ctx is done (returning nil) or it cannot
// be read any more.
func (f *kafkaFollower) follow(ctx context.Context, partition int, offset int64, out chan<- Message) error {
	bo := followBackoff()
	for {
		msgs, next, err := f.client.fetch(ctx, f.cfg.Topic, partition, offset, f.cfg.MaxBytes, f.cfg.MaxWait)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if !retriable(err) {
				return fmt.Errorf("follow: %w", err)
			}
			delay := bo.Step()
			f.client.log.Warn("cannot read the partition followed, retrying", "topic", f.cfg.Topic, "partition", partition,
				"offset", offset, "retryIn", delay.Round(time.Millisecond), "err", err)
			if lifecycle.Sleep(ctx, delay) != nil {
				return nil
			}
			continue
		}
		bo = followBackoff()
		for _, m := range msgs {
			select {
			case out <- m:
			case <-ctx.Done():
				return nil
			}
		}
		offset = next
	}
}

func followBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 5 * time.Second, Steps: 1 << 30}
}
