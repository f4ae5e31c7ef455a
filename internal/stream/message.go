package stream

import (
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Message is one Kafka record, read or to be written.
type Message struct {
	// Topic, Partition and Offset locate a message read. A message to write names its topic unless
	// its Writer has one; partition and offset are Kafka's to choose.
	Topic     string
	Partition int
	Offset    int64
	// HighWaterMark is, for a message read, its partition's end when it was fetched: the offset the
	// next message written will get. HighWaterMark-Offset-1 messages followed it then.
	HighWaterMark int64
	// Key picks the partition (Writer hashes it). A nil Value is a tombstone in a compacted topic.
	Key, Value []byte
	Headers    []Header
	// Time is when the message was written; zero on a message to write means now.
	Time time.Time
}

// Header is a message header.
type Header struct {
	Key   string
	Value []byte
}

// Offsets a reader may start at besides a partition's own.
const (
	// FirstOffset is the first offset a partition retains.
	FirstOffset int64 = -2
	// LastOffset is a partition's end: only what is written after the start is read.
	LastOffset int64 = -1
)

// Size is the size a Writer gives m and compares with its BatchBytes, refusing larger messages
// before sending them (TooLarge). It is kafka-go's count (v0.4.51 Message.totalSize, message.go:46-61
// and write.go:565-591): a v0 message's framing — CRC, magic byte, attributes, key and value with int32
// lengths, timestamp — plus the headers as varint-prefixed fields. It is exact, so callers checking a
// limit need no margin; the broker instead measures the compressed record batch, which only its
// answer can tell.
func (m *Message) Size() int {
	n := 4 + 1 + 1 + 4 + len(m.Key) + 4 + len(m.Value) + 8
	n += varintLen(len(m.Headers))
	for _, h := range m.Headers {
		n += varintLen(len(h.Key)) + len(h.Key) + varintLen(len(h.Value)) + len(h.Value)
	}
	return n
}

// varintLen is the length of n as a zig-zag varint.
func varintLen(n int) int {
	u, l := uint64(n)<<1, 1
	for ; u >= 0x80; u >>= 7 {
		l++
	}
	return l
}

func (m *Message) kafka() kafka.Message {
	k := kafka.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Time: m.Time}
	if len(m.Headers) > 0 {
		k.Headers = make([]kafka.Header, len(m.Headers))
		for i, h := range m.Headers {
			k.Headers[i] = kafka.Header(h)
		}
	}
	return k
}

func fromKafka(k *kafka.Message) Message {
	return Message{
		Topic: k.Topic, Partition: k.Partition, Offset: k.Offset, HighWaterMark: k.HighWaterMark,
		Key: k.Key, Value: k.Value, Headers: fromKafkaHeaders(k.Headers), Time: k.Time,
	}
}

func fromKafkaHeaders(hs []kafka.Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header(h)
	}
	return out
}

// WriteErrors are the errors of a Write some of whose messages failed, one per message in the order
// given, nil for a message written. Messages of one partition are sent in several requests (BatchSize,
// BatchBytes) that fail or succeed alone: a failed message may be followed in its partition by later
// ones that were written.
type WriteErrors []error

func (e WriteErrors) Error() string {
	failed := e.Unwrap()
	if len(failed) == 0 {
		return fmt.Sprintf("0 of %d messages failed", len(e))
	}
	return fmt.Sprintf("%d of %d messages not written, the first: %v", len(failed), len(e), failed[0])
}

// Unwrap makes errors.Is and errors.As, and so TooLarge, look at every failed message.
func (e WriteErrors) Unwrap() []error {
	var out []error
	for _, err := range e {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// TooLarge reports whether err says a message is too large: refused by a Writer before it was sent
// (over BatchBytes), or by the broker (over the topic's max.message.bytes, measured on the compressed
// batch). No retry changes that. For WriteErrors it says whether any message was.
func TooLarge(err error) bool { return errors.Is(err, kafka.MessageSizeTooLarge) }

// Refused reports whether err is Kafka's answer — an error code, such as a missing permission — rather
// than a failure to reach it.
func Refused(err error) bool {
	var kerr kafka.Error
	return errors.As(err, &kerr)
}

// UnknownTopic reports whether err says the topic (or partition) does not exist, or does not yet
// where the request went.
func UnknownTopic(err error) bool { return errors.Is(err, kafka.UnknownTopicOrPartition) }

// OutOfRange reports whether err says an offset is not in its partition: below the first it retains
// (retention removed it) or past its end (the topic was created again, say). A reader resuming there
// must start over, e.g. a watch answers 410 Gone.
func OutOfRange(err error) bool { return errors.Is(err, kafka.OffsetOutOfRange) }

// retriable reports whether a read that failed with err may succeed later: anything but Kafka
// refusing for good.
func retriable(err error) bool {
	var kerr kafka.Error
	if OutOfRange(err) {
		return false
	}
	if errors.As(err, &kerr) {
		return kerr.Temporary()
	}
	return true // not reached, or an answer that could not be read
}
