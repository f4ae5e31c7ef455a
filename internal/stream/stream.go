// Package stream is kubesearch's one place for Kafka (DESIGN section 3): the components reach Kafka
// through it, and only it imports the client library (kafka-go). It holds what the components agree on — the topics' defaults and
// how they are created, the client security (TLS and SASL, with credentials from files), the headers
// of a dead letter, which collectors and indexers both write to the same dead-letter topic — and the
// ways they use Kafka, each configured once here:
//
//   - Client: topics (create, ensure, their message size limit), offsets (HighWaterMarks), and
//     reading a small partition whole (ReadPartition);
//   - Writer: ordered, acknowledged writes, keyed to partitions by hash;
//   - GroupReader: reading a topic in a consumer group, committing offsets explicitly;
//   - Follower: reading every partition of a topic from given offsets, without a group.
//
// Messages are this package's Message, so no caller names a client library's type; errors are told
// apart with TooLarge, Refused, UnknownTopic, OutOfRange and WriteErrors. It leaves out what flows
// through the stream (internal/envelope) and what each component does with it.
package stream

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
