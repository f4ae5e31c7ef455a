// Package stream is kubesearch's one place for the event stream (DESIGN section 3): the components
// reach it through a Broker, and only this package imports Kafka's client library (kafka-go). A Broker
// is Kafka (NewClient) or, in the standalone mode, the in-process log (NewLocal), which keeps Kafka's
// semantics that the components rely on: partitions chosen by key hash, offsets, consumer groups with
// committed offsets, compacted topics, message size limits. The package also holds what the components
// agree on — the topics' defaults and how they are created, the client security (TLS and SASL, with
// credentials from files), the headers of a dead letter, which collectors and indexers both write to
// the same dead-letter topic — and the ways they use the stream, each configured once here:
//
//   - Broker: topics (create, ensure, their message size limit), offsets (HighWaterMarks, Spans,
//     CommittedOffsets), and reading a small partition whole (ReadPartition);
//   - Writer: ordered, acknowledged writes, keyed to partitions by hash;
//   - GroupReader: reading a topic in a consumer group, committing offsets explicitly;
//   - Follower: reading every partition of a topic from given offsets, without a group.
//
// Messages are this package's Message, so no caller names a client library's type; errors are told
// apart with TooLarge, Refused, UnknownTopic, OutOfRange and WriteErrors. It leaves out what flows
// through the stream (internal/envelope) and what each component does with it.
package stream

import "context"

// Broker is the event stream: topics, their offsets, and the writers and readers of them. Every
// method is safe for concurrent use.
type Broker interface {
	// EnsureTopic creates the topic when it does not exist, retrying until the broker answers or ctx
	// ends; CreateTopic tries once. A topic that exists is left as it is.
	EnsureTopic(ctx context.Context, t Topic) error
	CreateTopic(ctx context.Context, t Topic) error
	// TopicMaxMessageBytes is the topic's message size limit; 0 when the broker does not say.
	TopicMaxMessageBytes(ctx context.Context, topic string) (int, error)
	// HighWaterMarks is, per partition, its end: the offset the next message written there gets.
	HighWaterMarks(ctx context.Context, topic string) (map[int]int64, error)
	// Spans is, per partition, the offsets it holds.
	Spans(ctx context.Context, topic string) (map[int]Span, error)
	// CommittedOffsets is, per partition, the offset a consumer group committed (the next one it
	// reads), or -1 for a partition it has not committed yet.
	CommittedOffsets(ctx context.Context, group, topic string) (map[int]int64, error)
	// CommitOffsets commits offsets (per partition, the next one to read) for a group that no
	// consumer joins: a bookmark others read with CommittedOffsets (the change feed's, see
	// package changes).
	CommitOffsets(ctx context.Context, group, topic string, offsets map[int]int64) error
	// ReadPartition returns every message a partition holds, up to its end as of the call; a topic
	// not created yet holds nothing.
	ReadPartition(ctx context.Context, topic string, partition int) ([]Message, error)
	NewWriter(o WriterOptions) Writer
	NewGroupReader(cfg GroupReaderConfig) (GroupReader, error)
	NewFollower(cfg FollowerConfig) (Follower, error)
	// Close releases the broker's connections; call it once what it made is closed.
	Close()
}

// Writer writes messages in order, each acknowledged (for Kafka, by every in-sync replica); a
// message's partition is its key's hash (Partition and Offset are ignored). It is safe for
// concurrent use.
type Writer interface {
	// Write returns once every message is acknowledged, or with an error: WriteErrors when some of
	// them failed (say which), or one error for all of them (ctx done, the broker away, a message
	// over BatchBytes refused before anything was sent). Messages of one key are written in the
	// order given.
	Write(ctx context.Context, msgs ...Message) error
	// SetBatchBytes changes WriterOptions.BatchBytes, e.g. to a topic limit learnt after the writer
	// was made. Call it only before the first Write.
	SetBatchBytes(n int)
	Close() error
}

// GroupReader reads a topic as a member of a consumer group: each partition assigned to it in order,
// from the group's committed offset (a new group from the first retained one). Offsets are committed
// only by Commit, synchronously, so a message is consumed again unless what it caused was done first.
// Fetch and Commit may be called from different goroutines.
type GroupReader interface {
	// Fetch returns the next message, blocking until there is one. It returns an error wrapping
	// ctx's once ctx is done, and io.EOF once the reader is closed; another error is worth a retry.
	Fetch(ctx context.Context) (Message, error)
	// Commit commits, for each partition, the offset after its message in msgs: pass the last
	// message of each partition whose work is done.
	Commit(ctx context.Context, msgs ...Message) error
	// Close leaves the group and ends what Fetch and Commit wait for.
	Close() error
}

// Follower reads every partition of a topic without a consumer group — nothing is committed, every
// follower reads everything — from the offsets it is given on.
type Follower interface {
	// Run reads until ctx is done, calling handle with each message, one at a time, from Run's
	// goroutine; each partition's messages come in offset order. It returns nil once ctx is done,
	// handle's error as it is, or why a partition cannot be read: OutOfRange when a start offset is
	// not (or a position reached is no longer) in its partition, so reading must start over.
	Run(ctx context.Context, handle func(ctx context.Context, m Message) error) error
}

// Defaults of the event topic. The partition count is fixed for a topic's life: all events of one
// (cluster, resource) share a partition (the key), so fleet parallelism comes from the pairs.
const (
	DefaultTopic      = "kubesearch.events"
	DefaultPartitions = 12
	// DefaultMaxMessageBytes fits the largest Kubernetes objects (about 1.5 MiB) with room.
	DefaultMaxMessageBytes = 2 << 20
)

// DeadLetterRoom is what a dead letter may need beyond its event: its headers.
const DeadLetterRoom = 64 << 10

// DeadLetterTopic is where events that can never be applied go, with why in their headers: one topic
// for the collectors' and the indexers' dead letters alike.
func DeadLetterTopic(topic string) string { return topic + ".dlq" }

// Headers of a dead letter. Its key is the original event's; its value too, unless HeaderValueDropped
// says it was left out (too large), in which case the other headers locate the event.
const (
	HeaderReason    = "kubesearch-dlq-reason"    // a short code
	HeaderError     = "kubesearch-dlq-error"     // the error in words
	HeaderTopic     = "kubesearch-dlq-topic"     // where the event was read, or was meant for
	HeaderPartition = "kubesearch-dlq-partition" // decimal, for an event that was read
	HeaderOffset    = "kubesearch-dlq-offset"    // decimal, for an event that was read
	HeaderIndex     = "kubesearch-dlq-index"     // the index written to, when there was one
	HeaderTime      = "kubesearch-dlq-time"      // RFC 3339, when it was dead-lettered
	// HeaderNamespace, HeaderName and HeaderUID name the object of a letter without its value.
	HeaderNamespace    = "kubesearch-dlq-namespace"
	HeaderName         = "kubesearch-dlq-name"
	HeaderUID          = "kubesearch-dlq-uid"
	HeaderValueDropped = "kubesearch-dlq-value-dropped"
	// MaxErrorHeader bounds the error text a header carries.
	MaxErrorHeader = 4 << 10
)
