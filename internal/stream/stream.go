// Package stream is kubesearch's one place for what its components agree on about Kafka (DESIGN
// section 3): the topics' defaults and how they are created, the client security (TLS and SASL, with
// credentials from files), and the headers of a dead letter, which collectors and indexers both write
// to the same dead-letter topic. It leaves out what flows through the stream (internal/envelope) and
// how each component reads or writes it.
package stream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/secrets"
)

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

// Security configures TLS and SASL toward the brokers. Credentials come from files only, never from
// flags or the environment.
type Security struct {
	TLS bool
	// CAFile verifies the brokers' certificates (implies TLS).
	CAFile string
	// InsecureSkipVerify accepts any broker certificate (implies TLS); for demos only.
	InsecureSkipVerify bool
	// SASLMechanism is "", "plain", "scram-sha-256" or "scram-sha-512".
	SASLMechanism string
	// UsernameFile and PasswordFile hold the SASL credentials.
	UsernameFile string
	PasswordFile string
}

// Check reports combinations of options that cannot work, each naming its flag, without reading a
// file.
func (s Security) Check() []error {
	var errs []error
	switch s.SASLMechanism {
	case "":
		if s.UsernameFile != "" || s.PasswordFile != "" {
			errs = append(errs, errors.New("--kafka-username-file, --kafka-password-file: need --kafka-sasl-mechanism"))
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		if s.UsernameFile == "" || s.PasswordFile == "" {
			errs = append(errs, fmt.Errorf("--kafka-username-file, --kafka-password-file: both required with --kafka-sasl-mechanism %s", s.SASLMechanism))
		}
	default:
		errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism: want plain, scram-sha-256 or scram-sha-512, got %q", s.SASLMechanism))
	}
	return errs
}

// Connection is how to reach the brokers, with the files of a Security read.
type Connection struct {
	TLS  *tls.Config
	SASL sasl.Mechanism
}

// Resolve reads the files s names, reporting every problem at once, each naming its flag.
func (s Security) Resolve() (Connection, error) {
	var (
		c    Connection
		errs []error
	)
	if s.TLS || s.CAFile != "" || s.InsecureSkipVerify {
		c.TLS = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.InsecureSkipVerify} //nolint:gosec // opt-in, for demos
		if s.CAFile != "" {
			pem, err := secrets.ReadPEM(s.CAFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("--kafka-ca-file: %w", err))
			} else {
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM(pem)
				c.TLS.RootCAs = pool
			}
		}
	}
	if s.SASLMechanism != "" {
		user, uerr := secrets.ReadValue(s.UsernameFile)
		pass, perr := secrets.ReadValue(s.PasswordFile)
		if uerr != nil {
			errs = append(errs, fmt.Errorf("--kafka-username-file: %w", uerr))
		}
		if perr != nil {
			errs = append(errs, fmt.Errorf("--kafka-password-file: %w", perr))
		}
		if uerr == nil && perr == nil {
			m, err := mechanism(s.SASLMechanism, user, pass)
			if err != nil {
				errs = append(errs, fmt.Errorf("--kafka-sasl-mechanism: %w", err))
			}
			c.SASL = m
		}
	}
	return c, errors.Join(errs...)
}

func mechanism(name, user, pass string) (sasl.Mechanism, error) {
	switch name {
	case "plain":
		return plain.Mechanism{Username: user, Password: pass}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, user, pass)
	case "scram-sha-512":
		return scram.Mechanism(scram.SHA512, user, pass)
	}
	return nil, fmt.Errorf("unknown mechanism %q", name)
}

// Transport is a kafka-go transport (for Writer and Client) over the connection.
func (c Connection) Transport() *kafka.Transport {
	return &kafka.Transport{TLS: c.TLS, SASL: c.SASL, DialTimeout: 10 * time.Second}
}

// Dialer is a kafka-go dialer (for Reader) over the connection.
func (c Connection) Dialer() *kafka.Dialer {
	return &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: c.TLS, SASLMechanism: c.SASL}
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

// EnsureTopic creates the topic when it does not exist, retrying until Kafka answers or ctx ends; a
// topic that exists is left as it is. The replication factor is the broker's default.
func EnsureTopic(ctx context.Context, client *kafka.Client, t Topic, log *slog.Logger) error {
	bo := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 10 * time.Second, Steps: 1 << 30}
	for {
		err := CreateTopic(ctx, client, t)
		var kerr kafka.Error
		switch {
		case err == nil:
			return nil
		case t.Optional && errors.As(err, &kerr):
			log.Warn("cannot create the topic; assuming it exists", "topic", t.Name, "err", err)
			return nil
		}
		delay := bo.Step()
		log.Warn("cannot ensure the Kafka topic, retrying", "topic", t.Name, "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return fmt.Errorf("ensure topic %s: %w", t.Name, err)
		}
	}
}

// CreateTopic creates the topic once; a topic that exists already is no error.
func CreateTopic(ctx context.Context, client *kafka.Client, t Topic) error {
	entries := make([]kafka.ConfigEntry, 0, len(t.Config))
	for k, v := range t.Config {
		entries = append(entries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
	}
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: t.Name, NumPartitions: t.Partitions, ReplicationFactor: -1, ConfigEntries: entries,
	}}})
	if err == nil {
		err = resp.Errors[t.Name]
	}
	if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", t.Name, err)
	}
	return nil
}

// MaxMessageBytes is the topic configuration entry of a message size limit.
func MaxMessageBytes(n int) map[string]string {
	return map[string]string{"max.message.bytes": strconv.Itoa(n)}
}

// ReadPartition returns every message a partition holds, from its first offset to its end as of the
// call: for small topics read whole (a ledger, a dead-letter topic in a test). A topic not created
// yet holds nothing.
func ReadPartition(ctx context.Context, client *kafka.Client, topic string, partition int) ([]kafka.Message, error) {
	offs, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition)},
	}})
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	var first, end int64
	for _, p := range offs.Topics[topic] {
		if errors.Is(p.Error, kafka.UnknownTopicOrPartition) {
			return nil, nil
		}
		if p.Error != nil {
			return nil, fmt.Errorf("list offsets of %s: %w", topic, p.Error)
		}
		first, end = p.FirstOffset, p.LastOffset
	}
	var out []kafka.Message
	for offset, tries := first, 0; offset < end; {
		f, err := client.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: partition, Offset: offset, MaxBytes: 16 << 20})
		if err == nil {
			err = f.Error
		}
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
			return nil, fmt.Errorf("fetch %s at offset %d: %w", topic, offset, err)
		}
		n := 0
		for {
			r, err := f.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				// Not the end: stopping here would skip the rest of the partition.
				return nil, fmt.Errorf("read %s after offset %d: %w", topic, offset, err)
			}
			n++
			offset = r.Offset + 1
			m := kafka.Message{Topic: topic, Partition: partition, Offset: r.Offset, Time: r.Time, Headers: r.Headers}
			if m.Key, err = kafka.ReadAll(r.Key); err == nil {
				m.Value, err = kafka.ReadAll(r.Value)
			}
			if err != nil {
				return nil, fmt.Errorf("read %s record at offset %d: %w", topic, r.Offset, err)
			}
			out = append(out, m)
		}
		if n == 0 {
			// Nothing readable below the end (compaction or aborted transactions left a gap).
			offset = max(offset, f.HighWatermark)
		}
	}
	return out, nil
}
