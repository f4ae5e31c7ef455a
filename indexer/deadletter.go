package indexer

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/kubesearch/kubesearch/internal/stream"
)

// A dead letter's key and value are the original event's, byte for byte; its headers are
// stream's (stream.HeaderReason and the others).

// Reasons a dead letter gives.
const (
	ReasonMalformedEnvelope  = "malformed-envelope"           // not JSON, or fields missing (envelope.ErrMalformed)
	ReasonUnsupportedVersion = "unsupported-envelope-version" // written by a collector of another envelope version
	ReasonMalformedObject    = "malformed-object"             // the object cannot become a document (document.ErrMalformed)
	ReasonRejected           = "rejected"                     // OpenSearch refused it for good (a mapping conflict, say)
)

// deadLetter is an event that will never be applied, and why.
type deadLetter struct {
	msg    stream.Message
	reason string
	err    string
	index  string
}

// message builds the dead letter's Kafka message.
func (d deadLetter) message(now time.Time) stream.Message {
	errText := d.err
	if len(errText) > stream.MaxErrorHeader {
		errText = errText[:stream.MaxErrorHeader]
	}
	h := []stream.Header{
		{Key: stream.HeaderReason, Value: []byte(d.reason)},
		{Key: stream.HeaderError, Value: []byte(errText)},
		{Key: stream.HeaderTopic, Value: []byte(d.msg.Topic)},
		{Key: stream.HeaderPartition, Value: strconv.AppendInt(nil, int64(d.msg.Partition), 10)},
		{Key: stream.HeaderOffset, Value: strconv.AppendInt(nil, d.msg.Offset, 10)},
	}
	if d.index != "" {
		h = append(h, stream.Header{Key: stream.HeaderIndex, Value: []byte(d.index)})
	}
	h = append(h, stream.Header{Key: stream.HeaderTime, Value: now.UTC().AppendFormat(nil, time.RFC3339)})
	// The original headers follow ours (the collector sets none today).
	h = append(h, d.msg.Headers...)
	return stream.Message{Key: d.msg.Key, Value: d.msg.Value, Headers: h}
}

// messageWriter is what dead-lettering needs of a stream.Writer.
type messageWriter interface {
	Write(ctx context.Context, msgs ...stream.Message) error
}

// writeDeadLetters writes the dead letters, retrying until they are written or ctx ends: the events'
// offsets are committed only after. A letter too large for the topic goes without its value.
func (c *consumer) writeDeadLetters(ctx context.Context, letters []deadLetter) error {
	if len(letters) == 0 {
		return nil
	}
	now := c.now()
	msgs := make([]stream.Message, len(letters))
	for i, d := range letters {
		msgs[i] = d.message(now)
	}
	bo := c.backoff()
	for {
		err := c.dlq.Write(ctx, msgs...)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
		// Keep what failed; a letter the broker finds too large goes again without its value.
		var werrs stream.WriteErrors
		if errors.As(err, &werrs) && len(werrs) == len(msgs) {
			failed := msgs[:0:0]
			for i, e := range werrs {
				if e == nil {
					continue
				}
				if stream.TooLarge(e) {
					dropValue(&msgs[i])
				}
				failed = append(failed, msgs[i])
			}
			msgs = failed
		} else if stream.TooLarge(err) && dropLargestValue(msgs) {
			continue // refused before anything was sent
		}
		if err := c.wait(ctx, &bo, "dead-letter write failed", len(msgs), err); err != nil {
			return err
		}
	}
	for _, d := range letters {
		c.metrics.deadLetters.WithLabelValues(d.reason).Inc()
		c.metrics.failed.WithLabelValues(d.index, d.reason).Inc()
		c.log.Warn("event dead-lettered", "topic", d.msg.Topic, "partition", d.msg.Partition, "offset", d.msg.Offset,
			"index", d.index, "reason", d.reason, "err", d.err)
	}
	return nil
}

// dropLargestValue leaves out the largest value still carried, so a letter too large for the topic
// still tells what failed and where the original is. It reports whether there was one to drop.
func dropLargestValue(msgs []stream.Message) bool {
	largest := -1
	for i := range msgs {
		if msgs[i].Value != nil && (largest < 0 || len(msgs[i].Value) > len(msgs[largest].Value)) {
			largest = i
		}
	}
	if largest < 0 {
		return false
	}
	dropValue(&msgs[largest])
	return true
}

func dropValue(m *stream.Message) {
	if m.Value == nil {
		return
	}
	m.Value = nil
	m.Headers = append(m.Headers, stream.Header{Key: stream.HeaderValueDropped, Value: []byte("true")})
}
