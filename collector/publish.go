package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/envelope"
)

// publisher writes events to Kafka in the order they were handed in. Callers block once the bounded
// buffer is full — while Kafka is slow or down, the reflectors stop reading from their members instead
// of the collector growing without bound. A failed write is retried with backoff until it succeeds or
// the publisher is aborted; nothing handed in is dropped, except an event over the message size limit,
// which Kafka would refuse forever (counted, logged).
type publisher struct {
	writer     *kafka.Writer
	client     *kafka.Client
	topic      string
	partitions int
	maxBytes   int
	batch      int
	queue      chan pending
	log        *slog.Logger
	metrics    *metrics
}

type pending struct {
	msg      kafka.Message
	cluster  string
	resource string
	typ      envelope.Type
	at       time.Time
}

type publisherOptions struct {
	Brokers         []string
	Topic           string
	Partitions      int
	MaxMessageBytes int
	Buffer          int
	Batch           int
	Transport       *kafka.Transport
}

func newPublisher(o publisherOptions, log *slog.Logger) *publisher {
	p := &publisher{
		topic: o.Topic, partitions: o.Partitions, maxBytes: o.MaxMessageBytes, batch: o.Batch,
		queue: make(chan pending, o.Buffer),
		log:   log,
	}
	var transport kafka.RoundTripper = kafka.DefaultTransport
	if o.Transport != nil {
		transport = o.Transport
	}
	p.client = &kafka.Client{Addr: kafka.TCP(o.Brokers...), Transport: transport, Timeout: 30 * time.Second}
	p.writer = &kafka.Writer{
		Addr:  kafka.TCP(o.Brokers...),
		Topic: o.Topic,
		// The key is cluster/group/resource; Hash keeps each key in one partition (kafka-go's default
		// round-robin would scatter it and break the per-resource order SYNC relies on).
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		// The default 1 s makes every synchronous write wait a second; batches fill from the buffer.
		BatchTimeout: 5 * time.Millisecond,
		BatchSize:    o.Batch,
		BatchBytes:   int64(o.MaxMessageBytes),
		Compression:  kafka.Lz4,
		MaxAttempts:  3,
		WriteTimeout: 30 * time.Second,
		Transport:    transport,
	}
	return p
}

// Publish hands an event to the publisher, blocking while the buffer is full.
func (p *publisher) Publish(ctx context.Context, ev *envelope.Event) error {
	value, err := ev.Marshal()
	if err != nil {
		return fmt.Errorf("encode %s event for %s/%s: %w", ev.Type, ev.Namespace, ev.Name, err)
	}
	if len(value) > p.maxBytes {
		p.metrics.oversized.Inc()
		p.log.Error("event exceeds the Kafka message size limit, dropped", "cluster", ev.Cluster,
			"resource", ev.Resource, "namespace", ev.Namespace, "name", ev.Name, "bytes", len(value), "limit", p.maxBytes)
		return nil
	}
	item := pending{msg: kafka.Message{Key: ev.Key(), Value: value}, cluster: ev.Cluster, resource: ev.Resource, typ: ev.Type, at: time.Now()}
	select {
	case p.queue <- item:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close tells run that no more events come; run then flushes what is buffered and returns.
// Call it only once every caller of Publish has returned.
func (p *publisher) close() { close(p.queue) }

// run writes buffered events until close was called and the buffer is empty, or ctx is done (an abort:
// what is still buffered is lost, and the next list of each collection repairs the index).
func (p *publisher) run(ctx context.Context) error {
	if err := p.ensureTopic(ctx); err != nil {
		return err
	}
	batch := make([]pending, 0, p.batch)
	for {
		item, ok := <-p.queue
		if !ok {
			return nil
		}
		batch = append(batch[:0], item)
	fill:
		for len(batch) < p.batch {
			select {
			case item, ok := <-p.queue:
				if !ok {
					break fill
				}
				batch = append(batch, item)
			default:
				break fill
			}
		}
		if err := p.write(ctx, batch); err != nil {
			return err
		}
	}
}

func (p *publisher) write(ctx context.Context, batch []pending) error {
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 10 * time.Second, Steps: 1 << 30}
	for {
		msgs := make([]kafka.Message, len(batch))
		for i := range batch {
			msgs[i] = batch[i].msg
		}
		err := p.writer.WriteMessages(ctx, msgs...)
		if err == nil {
			now := time.Now()
			for _, it := range batch {
				p.metrics.published.WithLabelValues(it.cluster, it.resource, string(it.typ)).Inc()
				p.metrics.publishLatency.Observe(now.Sub(it.at).Seconds())
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("publish to %s aborted with %d events unwritten: %w", p.topic, len(batch), ctx.Err())
		}
		p.metrics.publishErrors.Inc()
		// Keep only what failed, in order: each partition's batch fails or succeeds as a whole, so the
		// retried events still follow everything of their partition that was written.
		var werrs kafka.WriteErrors
		if errors.As(err, &werrs) && len(werrs) == len(batch) {
			failed := batch[:0:0]
			for i, e := range werrs {
				if e != nil {
					failed = append(failed, batch[i])
				}
			}
			batch = failed
		}
		delay := backoff.Step()
		p.log.Warn("kafka write failed, retrying", "topic", p.topic, "events", len(batch), "retryIn", delay.Round(time.Millisecond), "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("publish to %s aborted with %d events unwritten: %w", p.topic, len(batch), ctx.Err())
		case <-time.After(delay):
		}
	}
}

// ensureTopic creates the topic when it does not exist, with a message size limit that fits the
// largest Kubernetes objects. It retries until Kafka answers: without the topic nothing can be written.
func (p *publisher) ensureTopic(ctx context.Context) error {
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 10 * time.Second, Steps: 1 << 30}
	for {
		resp, err := p.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
			Topic: p.topic, NumPartitions: p.partitions, ReplicationFactor: -1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: fmt.Sprint(p.maxBytes)}},
		}}})
		if err == nil {
			err = resp.Errors[p.topic]
			if errors.Is(err, kafka.TopicAlreadyExists) {
				err = nil
			}
		}
		if err == nil {
			return nil
		}
		delay := backoff.Step()
		p.log.Warn("cannot ensure the Kafka topic, retrying", "topic", p.topic, "retryIn", delay.Round(time.Millisecond), "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("ensure topic %s: %w", p.topic, ctx.Err())
		case <-time.After(delay):
		}
	}
}
