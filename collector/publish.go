package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/semaphore"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// publisher writes events to Kafka in the order they were handed in. Callers block once the bounded
// buffer is full — while Kafka is slow or down, the reflectors stop reading from their members instead
// of the collector growing without bound. The buffer is bounded in bytes as well as in events: the
// events not yet acknowledged (waiting or being written) hold at most bufferBytes, since a bound in
// events alone bounds memory only by the size of the largest objects (1,000 Pods of 10 KB are
// 10 MiB; 1,000 objects near Kafka's limit, 2 GiB). A failed write is retried with backoff until it
// succeeds or the publisher is aborted. An event Kafka refuses for its size, which no retry would change, is
// published in a smaller form (oversize.go): its object truncated and annotated, or for an ADDED or
// MODIFIED that even so does not fit, a DELETED without object — then it is also logged as an error,
// dead-lettered and reported to dropped, since the object leaves the index. Only an event of which
// nothing fits is dropped. Either way it is counted, and the events behind it go on.
type publisher struct {
	writer     stream.Writer // one writer for the topic and the dead-letter topic: every message names its topic
	client     stream.Broker
	topic      string
	dlqTopic   string
	partitions int
	maxBytes   int // the flag
	limit      int // min(maxBytes, the topic's max.message.bytes); set by run before the first write
	batch      int
	// batchBytes bounds a write (half of bufferBytes), so the next batch fills while one is written.
	batchBytes int
	// inFlight holds a weight for every byte of the events handed to Publish and not yet written
	// or dropped (bufferBytes in all).
	inFlight    *semaphore.Weighted
	bufferBytes int64
	queue       chan pending
	done        chan struct{} // closed when run returns
	log         *slog.Logger
	metrics     *metrics

	// dropped, when set (before run), learns of every event that can never be published, so the
	// collection's status can say so. It is called from run's goroutine: it must return quickly and
	// never call Publish or flush (with the buffer full they would wait for run, which waits for it).
	dropped func(droppedEvent)
}

// droppedEvent is an object left out of the index because Kafka will never take its event: not
// published at all, or published as a DELETED.
type droppedEvent struct {
	cluster, group, resource, namespace, name string
	reason                                    string
}

type pending struct {
	msg stream.Message
	// weight is what the event holds of inFlight until it is written or dropped.
	weight int64
	// Who the event is about, for metrics, logs and dead letters (the event itself is not kept: its
	// object would double the buffer's memory).
	cluster, group, resource, namespace, name, uid string
	typ                                            envelope.Type
	form                                           form // what of its object msg carries
	at                                             time.Time
	// flushed, when set, makes this item a barrier rather than an event: run closes it once everything
	// queued before it is written or dropped.
	flushed chan struct{}
}

type publisherOptions struct {
	Topic      string
	Partitions int
	// MaxMessageBytes bounds an event's size as the writer counts it (stream.Message.Size); the
	// topic's own max.message.bytes lowers it when smaller.
	MaxMessageBytes int
	// Buffer bounds the events not yet written, BufferBytes their size (stream.Message.Size; an
	// event larger than BufferBytes waits until it is the only one); Batch bounds the events of one
	// write, and half of BufferBytes its size.
	Buffer      int
	BufferBytes int
	Batch       int
	// DeadLetterTopic receives the events Kafka refuses for their size; default "<Topic>.dlq", the
	// indexer's dead-letter topic, so an operator reads every kind of dead letter in one place.
	DeadLetterTopic string
}

// defaultPublishBufferBytes is the default of Options.PublishBufferBytes, about what the default
// 1,000 events take for Pods of 8 KB (pruned): enough to go on listing while the publisher starts
// (it ensures the topics and learns their limit, about 0.2 s on the test bed) and while Kafka
// acknowledges a write of half of it. With 4 MiB, a 3,000-Pod list stood still after 480 events
// until the first write was acknowledged (make bench-collector, traced).
const defaultPublishBufferBytes = 8 << 20

const (
	// reasonTooLarge is the stream.HeaderReason of an event Kafka refuses for its size.
	reasonTooLarge = "message-too-large"
	// deadLetterAttempts bounds the tries of one dead letter: the event is already counted, logged and
	// reported, and a dead-letter topic that cannot be written must not stop the stream.
	deadLetterAttempts = 5
)

func newPublisher(client stream.Broker, o publisherOptions, log *slog.Logger) *publisher {
	if o.BufferBytes <= 0 {
		o.BufferBytes = defaultPublishBufferBytes
	}
	p := &publisher{
		client: client, topic: o.Topic, dlqTopic: o.DeadLetterTopic, partitions: o.Partitions,
		maxBytes: o.MaxMessageBytes, limit: o.MaxMessageBytes, batch: o.Batch,
		batchBytes: max(1, o.BufferBytes/2), inFlight: semaphore.NewWeighted(int64(o.BufferBytes)), bufferBytes: int64(o.BufferBytes),
		queue: make(chan pending, o.Buffer),
		done:  make(chan struct{}),
		log:   log,
	}
	if p.dlqTopic == "" {
		p.dlqTopic = stream.DeadLetterTopic(o.Topic)
	}
	p.writer = client.NewWriter(stream.WriterOptions{
		BatchSize: o.Batch,
		// Lowered to the topic's limit by run: the broker measures a whole partition batch against it.
		BatchBytes: o.MaxMessageBytes,
		Compress:   true,
	})
	return p
}

// Publish hands an event to the publisher, blocking while the buffer is full.
func (p *publisher) Publish(ctx context.Context, ev *envelope.Event) error {
	value, err := ev.Marshal()
	if err != nil {
		return fmt.Errorf("encode %s event for %s/%s: %w", ev.Type, ev.Namespace, ev.Name, err)
	}
	item := pending{
		msg:     stream.Message{Topic: p.topic, Key: ev.Key(), Value: value},
		cluster: ev.Cluster, group: ev.Group, resource: ev.Resource, namespace: ev.Namespace, name: ev.Name, uid: ev.UID,
		typ: ev.Type, at: time.Now(),
	}
	item.weight = min(int64(item.msg.Size()), p.bufferBytes)
	if err := p.inFlight.Acquire(ctx, item.weight); err != nil {
		return err
	}
	select {
	case p.queue <- item:
		return nil
	case <-ctx.Done():
		p.inFlight.Release(item.weight)
		return ctx.Err()
	}
}

// flush returns once every event handed to Publish before it was called is acknowledged by Kafka or
// dropped as undeliverable. Like Publish, call it only before close.
func (p *publisher) flush(ctx context.Context) error {
	// A barrier in the queue: run writes what came before it, then closes it, so FIFO order is the proof.
	flushed := make(chan struct{})
	select {
	case p.queue <- pending{flushed: flushed}:
	case <-p.done:
		return errors.New("flush: the publisher has stopped")
	case <-ctx.Done():
		return fmt.Errorf("flush: %w", ctx.Err())
	}
	select {
	case <-flushed:
		return nil
	case <-p.done:
		return errors.New("flush: the publisher has stopped")
	case <-ctx.Done():
		return fmt.Errorf("flush: %w", ctx.Err())
	}
}

// close tells run that no more events come; run then flushes what is buffered and returns.
// Call it only once every caller of Publish has returned.
func (p *publisher) close() { close(p.queue) }

// run writes buffered events until close was called and the buffer is empty, or ctx is done (an abort:
// what is still buffered is lost, and the next list of each collection repairs the index).
func (p *publisher) run(ctx context.Context) error {
	defer close(p.done)
	if err := p.ensureTopics(ctx); err != nil {
		return err
	}
	batch := make([]pending, 0, p.batch)
	var next *pending // taken from the queue for the next batch: it would have made this one too large
	for {
		var item pending
		ok := true
		if next != nil {
			item, next = *next, nil
		} else if item, ok = <-p.queue; !ok {
			return nil
		}
		batch = batch[:0]
		size := 0
		var barrier chan struct{}
	fill:
		for {
			if item.flushed != nil {
				barrier = item.flushed
				break
			}
			batch = append(batch, item)
			size += item.msg.Size()
			if len(batch) >= p.batch || size >= p.batchBytes {
				break
			}
			select {
			case item, ok = <-p.queue:
				if !ok {
					break fill
				}
				if item.flushed == nil && size+item.msg.Size() > p.batchBytes {
					next = &item
					break fill
				}
			default:
				break fill
			}
		}
		if err := p.write(ctx, batch); err != nil {
			return err
		}
		var written int64
		for _, it := range batch {
			written += it.weight
		}
		p.inFlight.Release(written)
		// The next batch reuses the array: without this its entries would keep the objects just
		// written (up to a batch's bytes) alive beside the ones the buffer admits in their place.
		clear(batch)
		if barrier != nil {
			close(barrier)
		}
		if !ok {
			return nil
		}
	}
}

// write writes a batch in order, retrying until every event is acknowledged or dropped as too large.
func (p *publisher) write(ctx context.Context, batch []pending) error {
	batch = p.admit(ctx, batch)
	backoff := publishBackoff()
	for len(batch) > 0 {
		err := p.writer.Write(ctx, messages(batch)...)
		if err == nil {
			p.published(batch)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("publish to %s aborted with %d events unwritten: %w", p.topic, len(batch), ctx.Err())
		}
		p.metrics.publishErrors.Inc()
		// The writer refusing a message over BatchBytes (nothing sent) cannot occur while admit drops by
		// Message.Size; should a kafka-go upgrade change its count, the message is isolated and dropped
		// below like a broker refusal, never retried forever.
		tooLarge := stream.TooLarge(err)
		var werrs stream.WriteErrors
		if errors.As(err, &werrs) && len(werrs) == len(batch) {
			batch, tooLarge = p.unwritten(batch, werrs)
		}
		if tooLarge {
			// The broker refused a partition batch as too large: the limit was lowered after start, or
			// an incompressible event within a few dozen bytes of it grew by the record batch's framing
			// and lz4's. The broker does not say which message; written one at a time, in order, the
			// one it refuses alone is dropped.
			return p.writeSingly(ctx, batch)
		}
		delay := backoff.Step()
		p.log.Warn("kafka write failed, retrying", "topic", p.topic, "events", len(batch), "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return fmt.Errorf("publish to %s aborted with %d events unwritten: %w", p.topic, len(batch), err)
		}
	}
	return nil
}

// unwritten is what a partly failed write must send again, and whether a failure was a size refusal.
//
// kafka-go splits one partition's messages into several produce requests (BatchSize, BatchBytes), sent
// one after the other by the partition's goroutine, and each fails or succeeds alone: a request that
// fails (after its MaxAttempts) does not stop the next one (writer.go, partitionWriter.writeBatches and
// writeBatch). Sending only the failed events again would put them after later events of their
// partition — a PURGE after the ADDEDs of the list that follows it, a SYNC before ADDEDs of its own list.
// So from the first failed event of a key on, every event of that key goes again, in the original
// order: the last copy of each event then still follows the last copy of every event before it. A key
// is one partition (Hash), and nothing relies on order across keys. Events already written are written
// twice; delivery is at-least-once and the indexer is idempotent.
func (p *publisher) unwritten(batch []pending, werrs stream.WriteErrors) (again []pending, tooLarge bool) {
	failedKeys := map[string]bool{}
	var done []pending
	for i, it := range batch {
		if werrs[i] != nil {
			failedKeys[string(it.msg.Key)] = true
			tooLarge = tooLarge || stream.TooLarge(werrs[i])
		}
		if failedKeys[string(it.msg.Key)] {
			again = append(again, it)
		} else {
			done = append(done, it)
		}
	}
	p.published(done)
	return again, tooLarge
}

// writeSingly writes the events one by one, in order, making smaller each that Kafka refuses for its
// size (dropped when nothing of it fits).
func (p *publisher) writeSingly(ctx context.Context, batch []pending) error {
	for i, it := range batch {
		backoff := publishBackoff()
		for {
			err := p.writer.Write(ctx, it.msg)
			if err == nil {
				p.published(batch[i : i+1])
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("publish to %s aborted with %d events unwritten: %w", p.topic, len(batch)-i, ctx.Err())
			}
			p.metrics.publishErrors.Inc()
			if stream.TooLarge(err) {
				// The broker's limit is below what the publisher knows: the next smaller form is
				// tried, down to a DELETED without object.
				reason := fmt.Sprintf("Kafka refused the %s event of %d bytes as too large for topic %s: %v", it.typ, it.msg.Size(), p.topic, err)
				var ok bool
				if it, ok = p.reduce(ctx, it, min(p.limit, it.msg.Size()-1), reason); !ok {
					break
				}
				batch[i] = it
				continue
			}
			delay := backoff.Step()
			p.log.Warn("kafka write failed, retrying", "topic", p.topic, "events", len(batch)-i, "retryIn", delay.Round(time.Millisecond), "err", err)
			if err := lifecycle.Sleep(ctx, delay); err != nil {
				return fmt.Errorf("publish to %s aborted with %d events unwritten: %w", p.topic, len(batch)-i, err)
			}
		}
	}
	return nil
}

// admit makes the events larger than the limit smaller (Kafka would refuse them forever), and
// drops those of which nothing fits.
func (p *publisher) admit(ctx context.Context, batch []pending) []pending {
	kept := batch[:0:0]
	for _, it := range batch {
		if n := it.msg.Size(); n > p.limit {
			var ok bool
			if it, ok = p.reduce(ctx, it, p.limit, fmt.Sprintf("the %s event is %d bytes, over the Kafka message size limit of %d bytes", it.typ, n, p.limit)); !ok {
				continue
			}
		}
		kept = append(kept, it)
	}
	return kept
}

// Outcomes of an event over the limit (the oversized metric's label).
const (
	outcomeTruncated = "truncated" // published with part of its object, or a DELETED with less of it
	outcomeDeleted   = "deleted"   // an ADDED or MODIFIED published as a DELETED: the object leaves the index
	outcomeDropped   = "dropped"   // nothing published
)

// reduce returns it in the next smaller form that fits limit (oversize.go), and records it: a
// truncation is counted and logged; an object published as a DELETED is recorded as drop records an
// event. false when no form fits: it is dropped.
func (p *publisher) reduce(ctx context.Context, it pending, limit int, reason string) (pending, bool) {
	value, f, typ, err := smaller(it.msg.Key, it.msg.Value, it.form, limit)
	if err != nil {
		p.drop(ctx, it, outcomeDropped, fmt.Sprintf("%s; %v", reason, err))
		return it, false
	}
	was := it
	it.msg.Value, it.form, it.typ = value, f, typ
	if typ == envelope.Deleted && was.typ != envelope.Deleted {
		p.drop(ctx, was, outcomeDeleted, reason+"; not even its metadata fits, so it is published as DELETED and is out of the index")
		return it, true
	}
	p.metrics.oversized.WithLabelValues(it.cluster, it.resource, outcomeTruncated).Inc()
	p.log.Warn("event over the Kafka message size limit published in a smaller form", "cluster", it.cluster, "resource", it.resource,
		"namespace", it.namespace, "name", it.name, "type", it.typ, "form", f.String(), "bytes", was.msg.Size(), "published", it.msg.Size(),
		"limit", limit, "reason", reason)
	return it, true
}

// drop records an object left out of the index: a metric, an error log, a dead letter and the
// dropped hook.
func (p *publisher) drop(ctx context.Context, it pending, outcome, reason string) {
	p.metrics.oversized.WithLabelValues(it.cluster, it.resource, outcome).Inc()
	msg := "event dropped: Kafka will never take it"
	if outcome == outcomeDeleted {
		msg = "object published as DELETED: Kafka will never take even its metadata"
	}
	p.log.Error(msg, "cluster", it.cluster, "resource", it.resource,
		"namespace", it.namespace, "name", it.name, "type", it.typ, "bytes", it.msg.Size(), "limit", p.limit, "err", reason)
	p.deadLetter(ctx, it, reason)
	if p.dropped != nil {
		p.dropped(droppedEvent{cluster: it.cluster, group: it.group, resource: it.resource, namespace: it.namespace, name: it.name, reason: reason})
	}
}

// deadLetter writes what locates an object left out of the index to the dead-letter topic, under the event's key. The
// value is left out (HeaderValueDropped, as the indexer does when a letter does not fit): the event is
// too large for Kafka, and a truncated prefix would not be an envelope. Bounded tries: see
// deadLetterAttempts.
func (p *publisher) deadLetter(ctx context.Context, it pending, reason string) {
	if len(reason) > stream.MaxErrorHeader {
		reason = reason[:stream.MaxErrorHeader]
	}
	msg := stream.Message{Topic: p.dlqTopic, Key: it.msg.Key, Headers: []stream.Header{
		{Key: stream.HeaderReason, Value: []byte(reasonTooLarge)},
		{Key: stream.HeaderError, Value: []byte(reason)},
		{Key: stream.HeaderTopic, Value: []byte(p.topic)},
		{Key: stream.HeaderTime, Value: time.Now().UTC().AppendFormat(nil, time.RFC3339)},
		{Key: stream.HeaderValueDropped, Value: []byte("true")},
		{Key: stream.HeaderNamespace, Value: []byte(it.namespace)},
		{Key: stream.HeaderName, Value: []byte(it.name)},
		{Key: stream.HeaderUID, Value: []byte(it.uid)},
	}}
	backoff := publishBackoff()
	for attempt := 1; ; attempt++ {
		err := p.writer.Write(ctx, msg)
		if err == nil {
			return
		}
		if ctx.Err() != nil || attempt == deadLetterAttempts {
			p.log.Error("dead letter not written", "topic", p.dlqTopic, "cluster", it.cluster, "resource", it.resource,
				"namespace", it.namespace, "name", it.name, "err", err)
			return
		}
		if lifecycle.Sleep(ctx, backoff.Step()) != nil {
			return
		}
	}
}

func (p *publisher) published(batch []pending) {
	now := time.Now()
	for _, it := range batch {
		p.metrics.published.WithLabelValues(it.cluster, it.resource, string(it.typ)).Inc()
		p.metrics.publishLatency.Observe(now.Sub(it.at).Seconds())
	}
}

func messages(batch []pending) []stream.Message {
	msgs := make([]stream.Message, len(batch))
	for i := range batch {
		msgs[i] = batch[i].msg
	}
	return msgs
}

func publishBackoff() wait.Backoff {
	return wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 5 * time.Second, Steps: 1 << 30}
}

// ensureTopics creates the topic when it does not exist, with a message size limit that fits the
// largest Kubernetes objects, and the dead-letter topic; then it learns the topic's effective limit.
// It retries until Kafka answers: without the topic nothing can be written.
func (p *publisher) ensureTopics(ctx context.Context) error {
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 5 * time.Second, Steps: 1 << 30}
	for {
		err := p.createTopic(ctx, p.topic, p.partitions, p.maxBytes)
		if err == nil {
			// One partition, as the indexer creates it; room for an event plus the indexer's headers.
			err = p.createTopic(ctx, p.dlqTopic, 1, p.maxBytes+stream.DeadLetterRoom)
			if stream.Refused(err) {
				p.log.Warn("cannot create the dead-letter topic; assuming it exists", "topic", p.dlqTopic, "err", err)
				err = nil
			}
		}
		if err == nil {
			err = p.learnLimit(ctx)
		}
		if err == nil {
			return nil
		}
		delay := backoff.Step()
		p.log.Warn("cannot ensure the Kafka topic, retrying", "topic", p.topic, "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return fmt.Errorf("ensure topic %s: %w", p.topic, err)
		}
	}
}

func (p *publisher) createTopic(ctx context.Context, topic string, partitions, maxBytes int) error {
	return p.client.CreateTopic(ctx, stream.Topic{Name: topic, Partitions: partitions, Config: stream.MaxMessageBytes(maxBytes)})
}

// learnLimit lowers the size limit to the topic's max.message.bytes (which is the broker's
// message.max.bytes unless the topic overrides it), so an event the topic would refuse is made smaller
// before it is sent, and kafka-go's batches fit what the broker accepts. A refusal to describe the topic (no
// DescribeConfigs permission) keeps the flag; a refused write is still caught (writeSingly).
func (p *publisher) learnLimit(ctx context.Context) error {
	topicLimit, err := p.client.TopicMaxMessageBytes(ctx, p.topic)
	switch {
	case stream.UnknownTopic(err):
		return err // just created; not everywhere yet
	case stream.Refused(err):
		p.log.Warn("cannot read the topic's max.message.bytes; limiting events to --kafka-max-message-bytes", "topic", p.topic, "limit", p.maxBytes, "err", err)
		return nil
	case err != nil:
		return err
	}
	p.limit = p.maxBytes
	if topicLimit > 0 && topicLimit < p.maxBytes {
		p.limit = topicLimit
		p.log.Warn("the topic accepts smaller messages than --kafka-max-message-bytes; larger events are truncated",
			"topic", p.topic, "topicLimit", topicLimit, "flag", p.maxBytes)
	}
	p.writer.SetBatchBytes(p.limit)
	return nil
}
