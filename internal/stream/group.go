package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kubesearch/kubesearch/internal/lifecycle"
)

// GroupReaderConfig says what a GroupReader reads.
type GroupReaderConfig struct {
	Topic string
	// Group is the consumer group: its members share the topic's partitions, and it keeps their
	// committed offsets.
	Group string
	// MaxBytes bounds one fetch from one partition; it must exceed the largest message.
	MaxBytes int
}

// kafkaGroupReader reads a topic as a member of a consumer group: each partition assigned to it in order,
// from the group's committed offset (a new group from the first retained one). Offsets are committed
// only by Commit, synchronously, so a message is consumed again unless what it caused was done first.
// Partitions added to the topic later are read too. Fetch and Commit may be called from different
// goroutines.
type kafkaGroupReader struct {
	config kafka.ReaderConfig
	log    *slog.Logger

	once   sync.Once
	reader *kafka.Reader // set by the first Fetch or Commit; stays nil when Close comes first
}

// groupMaxWait bounds a fetch: kafka-go asks the broker to wait up to it for a message minus a
// second (a quarter when it is under 2 s), and gives up on the answer at it. At 500 ms a broker had
// 125 ms to answer after its wait, which a busy machine's brokers overran (make chaos at a load
// average above 30: 28 "i/o timeout" reads in 4.5 minutes over two indexers with no broker at
// fault, each a reconnect and a backoff on that partition, while the index fell a minute behind
// the stream the query APIs read without trouble).
// A fetch still returns as soon as a message is there, so a longer wait adds no latency; it delays
// only a reader's stop by up to a second.
const groupMaxWait = 2 * time.Second

// NewGroupReader checks cfg and returns a reader that joins the group on its first Fetch: making one
// connects to nothing, so a component's New can make it and report a bad configuration at once.
func (c *Client) NewGroupReader(cfg GroupReaderConfig) (GroupReader, error) {
	var errs []error
	if cfg.Topic == "" {
		errs = append(errs, errors.New("no topic"))
	}
	if cfg.Group == "" {
		errs = append(errs, errors.New("no consumer group"))
	}
	if cfg.MaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("fetch max bytes: want a positive size, got %d", cfg.MaxBytes))
	}
	rc := kafka.ReaderConfig{
		Brokers:  c.brokers,
		GroupID:  cfg.Group,
		Topic:    cfg.Topic,
		Dialer:   c.conn.dialer(c.dialer),
		MinBytes: 1,
		MaxBytes: cfg.MaxBytes,
		MaxWait:  groupMaxWait,
		// A new group starts at the beginning of what the topic retains.
		StartOffset:           kafka.FirstOffset,
		WatchPartitionChanges: true,
		// A member that stops heartbeating (its process killed or hung, its coordinator broker lost)
		// loses its partitions after SessionTimeout: 10 s instead of kafka-go's 30 s bounds how long
		// a partition goes unread (Kafka's group.min.session.timeout.ms is 6 s). Heartbeats at a
		// third of it or less, as Kafka advises.
		SessionTimeout:    10 * time.Second,
		HeartbeatInterval: 2 * time.Second,
		// Commits are synchronous: CommitMessages returns once Kafka has them.
		CommitInterval: 0,
		ErrorLogger: kafka.LoggerFunc(func(msg string, args ...any) {
			c.log.Warn(fmt.Sprintf(msg, args...), "topic", cfg.Topic, "source", "kafka-go")
		}),
	}
	if len(errs) == 0 {
		// kafka.NewReader panics on what this refuses.
		if err := rc.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("kafka reader of topic %q in group %q: %w", cfg.Topic, cfg.Group, err)
	}
	return &kafkaGroupReader{config: rc, log: c.log}, nil
}

// start joins the group, unless Close came first; it returns nil then.
func (r *kafkaGroupReader) start() *kafka.Reader {
	r.once.Do(func() { r.reader = kafka.NewReader(r.config) })
	return r.reader
}

// Fetch returns the next message, blocking until there is one. It returns an error wrapping ctx's
// once ctx is done, and io.EOF once the reader is closed.
//
// Other errors are logged here and never returned. kafka-go's reader retries every broker error on
// its own (each partition's reader with its own backoff, the group's join with its own), and queues
// what it retried among the messages as a report: a broker killed for ten seconds leaves dozens in
// the queue, ahead of the messages written once its partitions had new leaders. Each one returned
// and answered with a caller's backoff of seconds held those messages back for minutes (issue 26:
// the index caught up 2 to 3 minutes after a broker's loss instead of 20 s).
func (r *kafkaGroupReader) Fetch(ctx context.Context) (Message, error) {
	reader := r.start()
	if reader == nil {
		return Message{}, io.EOF
	}
	var (
		reports  int
		reported time.Time
	)
	for {
		m, err := reader.FetchMessage(ctx)
		switch {
		case err == nil:
			if reports > 0 {
				r.log.Info("kafka reader reading again", "topic", r.config.Topic, "errorsRetried", reports)
			}
			return fromKafka(&m), nil
		case errors.Is(err, io.EOF):
			return Message{}, io.EOF
		case ctx.Err() != nil:
			return Message{}, fmt.Errorf("fetch from topic %s: %w", r.config.Topic, ctx.Err())
		}
		reports++
		if time.Since(reported) >= reportEvery {
			r.log.Warn("kafka reader retrying", "topic", r.config.Topic, "errorsRetried", reports, "err", err)
			reported = time.Now()
		}
		// The reports come at the pace of kafka-go's retries; the pause bounds the loop should one
		// ever come back at once, repeatedly.
		if err := lifecycle.Sleep(ctx, 10*time.Millisecond); err != nil {
			return Message{}, fmt.Errorf("fetch from topic %s: %w", r.config.Topic, err)
		}
	}
}

// reportEvery is how often a reader that keeps retrying says so.
const reportEvery = 10 * time.Second

// Commit commits, for each partition, the offset after its message in msgs: pass the last message
// of each partition whose work is done. A failed commit (a rebalance moved the partition, say)
// means those messages are consumed again.
func (r *kafkaGroupReader) Commit(ctx context.Context, msgs ...Message) error {
	reader := r.start()
	if reader == nil {
		return io.EOF
	}
	km := make([]kafka.Message, len(msgs))
	for i, m := range msgs {
		km[i] = kafka.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
	}
	if err := reader.CommitMessages(ctx, km...); err != nil {
		return fmt.Errorf("commit offsets of topic %s: %w", r.config.Topic, err)
	}
	return nil
}

// Close leaves the group, so its partitions move to the other members without waiting for the
// session timeout, and ends what Fetch and Commit wait for.
func (r *kafkaGroupReader) Close() error {
	r.once.Do(func() {}) // a Fetch after Close must not join
	if r.reader == nil {
		return nil
	}
	if err := r.reader.Close(); err != nil {
		return fmt.Errorf("close kafka reader of topic %s: %w", r.config.Topic, err)
	}
	return nil
}
