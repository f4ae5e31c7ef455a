package stream

import (
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"
)

// Span is what a partition holds: the offsets from First up to End, End excluded. First == End is
// an empty partition (or one whose records all expired).
type Span struct{ First, End int64 }

// Spans is the span of every partition of the topic: a reader of a compacted topic has seen all it
// held at the call once it has read up to each End.
func (c *Client) Spans(ctx context.Context, topic string) (map[int]Span, error) {
	ps, err := c.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	offs, err := c.offsets(ctx, topic, ps)
	if err != nil {
		return nil, err
	}
	out := make(map[int]Span, len(offs))
	for p, o := range offs {
		out[p] = Span{First: o.first, End: o.end}
	}
	return out, nil
}

// CommittedOffsets is, per partition of the topic, the offset a consumer group committed (the next
// one it reads), or -1 for a partition it has not committed yet. A group that does not exist has
// committed nothing.
func (c *Client) CommittedOffsets(ctx context.Context, group, topic string) (map[int]int64, error) {
	ps, err := c.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	resp, err := c.kc.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s on %s: %w", group, topic, err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("committed offsets of group %s on %s: %w", group, topic, resp.Error)
	}
	out := make(map[int]int64, len(ps))
	for _, p := range ps {
		out[p] = -1
	}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("committed offset of group %s on %s/%d: %w", group, topic, p.Partition, p.Error)
		}
		out[p.Partition] = p.CommittedOffset
	}
	return out, nil
}

// CommitOffsets implements Broker, as a consumer outside any group generation commits (Kafka takes
// a commit of generation -1 for a group without members).
func (c *Client) CommitOffsets(ctx context.Context, group, topic string, offsets map[int]int64) error {
	commits := make([]kafka.OffsetCommit, 0, len(offsets))
	for p, o := range offsets {
		commits = append(commits, kafka.OffsetCommit{Partition: p, Offset: o})
	}
	resp, err := c.kc.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: group, GenerationID: -1, Topics: map[string][]kafka.OffsetCommit{topic: commits}})
	if err != nil {
		return fmt.Errorf("commit offsets of group %s on %s: %w", group, topic, err)
	}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			return fmt.Errorf("commit offset of group %s on %s/%d: %w", group, topic, p.Partition, p.Error)
		}
	}
	return nil
}
