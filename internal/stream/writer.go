package stream

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"
)

// WriterOptions are what differs between writers; the rest (acks, partitioning, timeouts, retries)
// is the same for every writer and set in NewWriter.
type WriterOptions struct {
	// Topic is where messages that name no topic go; without it every message names its own.
	Topic string
	// BatchSize bounds the messages of one produce request to one partition; default 100.
	BatchSize int
	// BatchBytes bounds one produce request to one partition, and so one message: a larger one is
	// refused before it is sent (TooLarge; Message.Size is how it is measured). Set it to the topic's
	// max.message.bytes, which the broker measures the request's record batch against. Default 1 MiB,
	// the broker's default limit.
	BatchBytes int
	// Compress compresses record batches (snappy): worth it for JSON events, not for a few small
	// records. Not lz4: kafka-go's lz4 writer compresses in 4 MiB blocks whatever the batch's size,
	// two buffers of 4 MiB per writer pooled and reallocated after every GC, which made lz4 the
	// largest item of the collector's heap while it listed (make bench-collector: 24 MiB of its
	// peak RSS). Snappy's buffers grow with the batch, and it costs about as much CPU.
	Compress bool
}

// kafkaWriter writes messages in order, each acknowledged by every in-sync replica; a message's partition
// is its key's hash (Partition and Offset are ignored). It is safe for concurrent use.
type kafkaWriter struct {
	w     *kafka.Writer
	topic string
}

// NewWriter returns a writer; it connects on the first Write.
func (c *Client) NewWriter(o WriterOptions) Writer {
	w := &kafka.Writer{
		Addr: kafka.TCP(c.brokers...),
		// Keys name what must stay in order (for events, cluster/group/resource); Hash keeps each key
		// in one partition. kafka-go's default round-robin would scatter it and break the
		// per-resource order SYNC relies on.
		Balancer: &kafka.Hash{},
		// kafka-go's default is no acknowledgement at all.
		RequiredAcks: kafka.RequireAll,
		// Callers batch themselves and wait for each Write: a Write is sent whole at once. kafka-go
		// sends a partition's batch when it is full (BatchSize, BatchBytes) or BatchTimeout after its
		// first message, so the last, partial batch of every Write waited out the timeout: its default
		// 1 s made synchronous writes crawl, and even 5 ms was most of a small Write's time (a watch
		// event, a SYNC; see BenchmarkWriteLatency). A Write appends all of its messages to a
		// partition's batches under the partition's lock, which the timer must take before it sends a
		// batch, so a timeout this short sends the partial batch right after the Write appended its
		// last message, and never splits it.
		BatchTimeout: time.Nanosecond,
		BatchSize:    o.BatchSize,
		BatchBytes:   int64(o.BatchBytes),
		MaxAttempts:  3,
		WriteTimeout: 30 * time.Second,
		Transport:    c.transport,
	}
	if o.Compress {
		w.Compression = kafka.Snappy
	}
	return &kafkaWriter{w: w, topic: o.Topic}
}

// SetBatchBytes changes BatchBytes (WriterOptions), e.g. to a topic limit learnt after the writer
// was made. Call it only before the first Write.
func (w *kafkaWriter) SetBatchBytes(n int) { w.w.BatchBytes = int64(n) }

// Write writes msgs and returns once Kafka acknowledged them all, or with an error: WriteErrors when
// some of them failed (say which), or one error for all of them (ctx done, Kafka away, a message over
// BatchBytes refused before anything was sent). kafka-go retries each request a few times first.
// Messages of one key are written in the order given.
func (w *kafkaWriter) Write(ctx context.Context, msgs ...Message) error {
	km := make([]kafka.Message, len(msgs))
	for i := range msgs {
		km[i] = msgs[i].kafka()
		if km[i].Topic == "" {
			km[i].Topic = w.topic
		}
	}
	err := w.w.WriteMessages(ctx, km...)
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		return WriteErrors(werrs)
	}
	return err
}

// Close flushes nothing (Write is synchronous) and releases the writer.
func (w *kafkaWriter) Close() error { return w.w.Close() }

// PartitionOf is the partition of a topic with n partitions that a message keyed key goes to, as
// every Writer (and the Local log) chooses it.
func PartitionOf(key []byte, n int) int {
	ps := make([]int, n)
	for i := range ps {
		ps[i] = i
	}
	return (&kafka.Hash{}).Balance(kafka.Message{Key: key}, ps...)
}
