package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/lifecycle"
)

// Client reaches one Kafka cluster: topics and offsets, and the Writers, GroupReaders and Followers
// it makes, which share its connections. Making one connects to nothing; it is safe for concurrent
// use.
type Client struct {
	brokers   []string
	conn      Connection
	dialer    *brokerDialer // every connection of the client and of what it makes
	transport *kafka.Transport
	kc        *kafka.Client
	log       *slog.Logger
}

// NewClient returns a client of the brokers over conn. log receives the retries it and what it makes
// log; nil discards them.
func NewClient(brokers []string, conn Connection, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := newBrokerDialer(brokers, conn.TLS, log)
	t := conn.transport(d)
	return &Client{
		brokers: slices.Clone(brokers), conn: conn, dialer: d, transport: t, log: log,
		kc: &kafka.Client{Addr: kafka.TCP(brokers...), Transport: t, Timeout: 30 * time.Second},
	}
}

// Close releases the client's connections; call it once what the client made is closed.
func (c *Client) Close() {
	c.transport.CloseIdleConnections()
	c.dialer.Close()
}

// Topic is a topic to ensure.
type Topic struct {
	Name       string
	Partitions int
	// Config are topic configuration entries, e.g. max.message.bytes or cleanup.policy.
	Config map[string]string
	// Optional: a refusal (no permission to create topics, say) is taken to mean it exists.
	Optional bool
}

// MaxMessageBytes is the topic configuration entry of a message size limit.
func MaxMessageBytes(n int) map[string]string {
	return map[string]string{"max.message.bytes": strconv.Itoa(n)}
}

// EnsureTopic creates the topic when it does not exist, retrying until Kafka answers or ctx ends; a
// topic that exists is left as it is. Its replication follows the cluster (see CreateTopic).
func (c *Client) EnsureTopic(ctx context.Context, t Topic) error {
	bo := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 5 * time.Second, Steps: 1 << 30}
	for {
		err := c.CreateTopic(ctx, t)
		switch {
		case err == nil:
			return nil
		case t.Optional && Refused(err):
			c.log.Warn("cannot create the topic; assuming it exists", "topic", t.Name, "err", err)
			return nil
		}
		delay := bo.Step()
		c.log.Warn("cannot ensure the Kafka topic, retrying", "topic", t.Name, "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return fmt.Errorf("ensure topic %s: %w", t.Name, err)
		}
	}
}

// CreateTopic creates the topic once; a topic that exists already is no error. t.Optional is not
// looked at: Refused tells a refusal from Kafka being away.
//
// Replication follows the cluster the client finds: 3 replicas and min.insync.replicas 2 on three
// brokers or more (with the producers' acks=all, a write survives the loss of any one broker and
// writes go on while one is down), as many replicas as there are brokers below that, so a topic is
// never refused on a small cluster nor left unreplicated on a large one. A topic created by the
// operator beforehand is left as it is.
func (c *Client) CreateTopic(ctx context.Context, t Topic) error {
	md, err := c.kc.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{t.Name}})
	if err != nil {
		return fmt.Errorf("create topic %s: count the brokers: %w", t.Name, err)
	}
	rf, minISR := Replication(len(md.Brokers))
	config := maps.Clone(t.Config)
	if _, set := config["min.insync.replicas"]; !set && minISR > 1 {
		if config == nil {
			config = map[string]string{}
		}
		config["min.insync.replicas"] = strconv.Itoa(minISR)
	}
	entries := make([]kafka.ConfigEntry, 0, len(config))
	for k, v := range config {
		entries = append(entries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
	}
	resp, err := c.kc.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: t.Name, NumPartitions: t.Partitions, ReplicationFactor: rf, ConfigEntries: entries,
	}}})
	if err == nil {
		err = resp.Errors[t.Name]
	}
	if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", t.Name, err)
	}
	return nil
}

// Replication is the replication factor and min.insync.replicas of a topic created on a cluster
// of brokers brokers (see CreateTopic).
func Replication(brokers int) (factor, minInSync int) {
	factor = min(max(brokers, 1), 3)
	return factor, max(factor-1, 1)
}

// TopicMaxMessageBytes is the topic's max.message.bytes: the broker's message.max.bytes unless the
// topic overrides it; 0 when Kafka does not say. A topic just created may be UnknownTopic for a
// moment; a refusal to describe it (no DescribeConfigs permission) is Refused.
func (c *Client) TopicMaxMessageBytes(ctx context.Context, topic string) (int, error) {
	resp, err := c.kc.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"max.message.bytes"},
	}}})
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	limit := 0
	for _, r := range resp.Resources {
		if r.Error != nil {
			return 0, fmt.Errorf("describe topic %s: %w", topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "max.message.bytes" {
				limit, err = strconv.Atoi(e.ConfigValue)
				if err != nil {
					return 0, fmt.Errorf("topic %s: max.message.bytes %q: %w", topic, e.ConfigValue, err)
				}
			}
		}
	}
	return limit, nil
}

// Partitions lists the partitions of the topic. Topic metadata is cached for a few seconds: a topic
// another client created a moment ago may still be UnknownTopic.
func (c *Client) Partitions(ctx context.Context, topic string) ([]int, error) {
	md, err := c.kc.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("metadata of topic %s: %w", topic, err)
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("metadata of topic %s: %w", topic, t.Error)
		}
		ps := make([]int, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			ps = append(ps, p.ID)
		}
		slices.Sort(ps)
		return ps, nil
	}
	return nil, fmt.Errorf("metadata of topic %s: %w", topic, kafka.UnknownTopicOrPartition)
}

// HighWaterMarks is, per partition of the topic, its end: the last offset plus one, the offset the next
// message written there will get. A reader that has seen everything below them is caught up with what
// was written before the call.
func (c *Client) HighWaterMarks(ctx context.Context, topic string) (map[int]int64, error) {
	spans, err := c.Spans(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[int]int64, len(spans))
	for p, sp := range spans {
		out[p] = sp.End
	}
	return out, nil
}

// span is what a partition holds: offsets from first to end, end excluded.
type span struct{ first, end int64 }

// offsets is the span of each partition ps of topic. A partition whose leader is being elected (a
// topic created a moment ago, a broker restarted) is asked again, for up to 5 s.
func (c *Client) offsets(ctx context.Context, topic string, ps []int) (map[int]span, error) {
	for tries := 0; ; tries++ {
		out, err := c.offsetsOnce(ctx, topic, ps)
		if tries == 50 || !errors.Is(err, kafka.NotLeaderForPartition) && !errors.Is(err, kafka.LeaderNotAvailable) {
			return out, err
		}
		if err := lifecycle.Sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
		}
	}
}

func (c *Client) offsetsOnce(ctx context.Context, topic string, ps []int) (map[int]span, error) {
	req := make([]kafka.OffsetRequest, 0, 2*len(ps))
	for _, p := range ps {
		req = append(req, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	resp, err := c.kc.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: req}})
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	out := make(map[int]span, len(ps))
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("list offsets of %s partition %d: %w", topic, p.Partition, p.Error)
		}
		out[p.Partition] = span{first: p.FirstOffset, end: p.LastOffset}
	}
	for _, p := range ps {
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("list offsets of %s: no answer for partition %d", topic, p)
		}
	}
	return out, nil
}

// ReadPartition returns every message a partition holds, from its first offset to its end as of the
// call: for small topics read whole (a ledger, a dead-letter topic in a test). A topic not created
// yet holds nothing.
func (c *Client) ReadPartition(ctx context.Context, topic string, partition int) ([]Message, error) {
	offs, err := c.offsets(ctx, topic, []int{partition})
	if UnknownTopic(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Message
	for offset, end, tries := offs[partition].first, offs[partition].end, 0; offset < end; {
		msgs, next, err := c.fetch(ctx, topic, partition, offset, 16<<20, 0)
		if errors.Is(err, protocol.ErrNoTopic) && tries < 50 {
			// A topic created a moment ago: its offsets are listed already, but the broker's fetch
			// path may not know it yet.
			tries++
			if err := lifecycle.Sleep(ctx, 100*time.Millisecond); err != nil {
				return nil, fmt.Errorf("fetch %s at offset %d: %w", topic, offset, err)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
		offset = next
	}
	return out, nil
}

// fetch is one fetch of a partition from offset: the messages at offset and after, and the offset to
// fetch next. With maxWait, the broker waits that long for a first message; without, it answers at
// once.
func (c *Client) fetch(ctx context.Context, topic string, partition int, offset int64, maxBytes int, maxWait time.Duration) ([]Message, int64, error) {
	req := &kafka.FetchRequest{Topic: topic, Partition: partition, Offset: offset, MaxBytes: int64(maxBytes), MaxWait: maxWait}
	if maxWait > 0 {
		req.MinBytes = 1
	}
	f, err := c.kc.Fetch(ctx, req)
	if err == nil {
		err = f.Error
	}
	if err != nil {
		return nil, offset, fmt.Errorf("fetch %s partition %d at offset %d: %w", topic, partition, offset, err)
	}
	var (
		out    []Message
		before bool // records below offset were returned
	)
	next := offset
	for {
		r, err := f.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// Not the end: stopping here would skip the rest of the partition.
			return nil, offset, fmt.Errorf("read %s partition %d after offset %d: %w", topic, partition, next, err)
		}
		if r.Offset < offset {
			before = true // a record batch is returned whole, and may begin before the offset asked for
			continue
		}
		m := Message{Topic: topic, Partition: partition, Offset: r.Offset, HighWaterMark: f.HighWatermark,
			Time: r.Time, Headers: fromKafkaHeaders(r.Headers)}
		if m.Key, err = kafka.ReadAll(r.Key); err == nil {
			m.Value, err = kafka.ReadAll(r.Value)
		}
		if err != nil {
			return nil, offset, fmt.Errorf("read %s partition %d record at offset %d: %w", topic, partition, r.Offset, err)
		}
		out = append(out, m)
		next = r.Offset + 1
	}
	switch {
	case len(out) == 0 && before:
		// Only a batch whose records at offset and after were compacted away: its end is not known
		// (kafka-go does not say), so step over the gap rather than past what follows it.
		next = offset + 1
	case len(out) == 0:
		// Nothing readable below the end (compaction or aborted transactions left a gap).
		next = max(next, f.HighWatermark)
	}
	return out, next, nil
}
