package indexer

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/serving"
	"github.com/kubesearch/kubesearch/internal/stream"
	"github.com/kubesearch/kubesearch/mappings"
)

// Options configure an Indexer. Zero values take the defaults of SetDefaults.
type Options struct {
	// Brokers are the Kafka bootstrap brokers.
	Brokers []string
	// Stream, when set, is the event stream instead of Kafka at Brokers, and Backend the store
	// instead of OpenSearch: the standalone mode's in-process log and embedded store. Both stay the
	// caller's: the indexer closes neither.
	Stream  stream.Broker
	Backend Backend
	// Topic is the event stream; GroupID the consumer group that shares its partitions.
	Topic   string
	GroupID string
	// DeadLetterTopic receives the events that can never be indexed; default "<Topic>.dlq".
	DeadLetterTopic string
	// ChangesTopic receives the change feed (package changes): every change written to the index,
	// published before it is written, which the query API's watch cache follows. It must have as
	// many partitions as Topic (the indexer creates it so). Default "<Topic>.changes"; "none"
	// publishes no feed.
	ChangesTopic string
	// FetchMaxBytes bounds one fetch from one partition; it must exceed the largest event.
	FetchMaxBytes int
	// MaxMessageBytes is the largest dead letter written (and the max.message.bytes of the dead-letter
	// topic when the indexer creates it): an event plus its headers.
	MaxMessageBytes int
	Kafka           stream.Security

	// OpenSearchAddresses are node URLs. Empty takes them from the registries' backendStore.
	OpenSearchAddresses []string
	OpenSearch          osstore.Security
	// Registry is a ResourceRegistry file or folder whose spec.backendStore.openSearch names the
	// OpenSearch to write to. Optional.
	Registry string

	// Index shapes the indices: prefix, shards, replicas, refresh interval.
	Index mappings.Options

	// BatchSize and BatchBytes close a batch: at most this many events, this many bytes of events (a
	// single larger event makes a batch of its own). BatchInterval is how long a batch waits for more
	// events after its first before it is written; while the batch before is being written it keeps
	// filling, so under load batches grow by themselves and the interval only bounds how long an
	// event reaching an idle indexer waits (200 ms of it were a tenth of the freshness goal).
	BatchSize     int
	BatchBytes    int
	BatchInterval time.Duration
	// WatermarkInterval is how often written documents are made searchable (a refresh) and the
	// watermarks that moved are stored.
	WatermarkInterval time.Duration
	// RequestTimeout bounds one request to OpenSearch (a _bulk, a page of garbage collection).
	RequestTimeout time.Duration

	// ListenAddr serves /healthz, /readyz and /metrics; empty serves nothing.
	ListenAddr string
	// Endpoints says who may read /metrics (every subject its authenticators accept; the probes
	// stay open) and whether it is served over HTTPS.
	Endpoints serving.Options
	// ShutdownTimeout bounds the flush of the batch in flight once Run's context is done.
	ShutdownTimeout time.Duration

	Logger *slog.Logger
}

// SetDefaults fills the zero fields.
func (o *Options) SetDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defDuration := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	if o.Topic == "" {
		o.Topic = stream.DefaultTopic
	}
	if o.GroupID == "" {
		o.GroupID = "kubesearch-indexer"
	}
	if o.DeadLetterTopic == "" {
		o.DeadLetterTopic = stream.DeadLetterTopic(o.Topic)
	}
	if o.ChangesTopic == "" {
		o.ChangesTopic = changes.TopicOf(o.Topic)
	}
	def(&o.FetchMaxBytes, 8<<20)
	def(&o.MaxMessageBytes, stream.DefaultMaxMessageBytes+stream.DeadLetterRoom)
	def(&o.BatchSize, 1000)
	def(&o.BatchBytes, 8<<20)
	defDuration(&o.BatchInterval, 10*time.Millisecond)
	defDuration(&o.WatermarkInterval, time.Second)
	defDuration(&o.RequestTimeout, 2*time.Minute)
	defDuration(&o.ShutdownTimeout, 30*time.Second)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every invalid option at once, each named by its flag. Files are read by New.
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(o.Brokers) == 0 && o.Stream == nil {
		add("--kafka-brokers: required")
	}
	if o.Topic == "" {
		add("--topic: required")
	}
	if o.GroupID == "" {
		add("--group: required")
	}
	if o.ChangesTopic == o.Topic || o.ChangesTopic == o.DeadLetterTopic {
		add("--changes-topic: %q is already the events or dead-letter topic", o.ChangesTopic)
	}
	if o.DeadLetterTopic == o.Topic && o.Topic != "" {
		add("--dlq-topic: must differ from --topic %q", o.Topic)
	}
	// Kubernetes objects reach 1.5 MiB; a fetch smaller than an event can never return it.
	if o.FetchMaxBytes < 4<<20 {
		add("--kafka-fetch-max-bytes: must be at least 4 MiB (4194304), got %d", o.FetchMaxBytes)
	}
	if o.MaxMessageBytes < 1<<20 {
		add("--kafka-max-message-bytes: must be at least 1 MiB (1048576), got %d", o.MaxMessageBytes)
	}
	errs = append(errs, o.Kafka.Check()...)
	errs = append(errs, o.Endpoints.Check()...)

	if len(o.OpenSearchAddresses) == 0 && o.Registry == "" && o.Backend == nil {
		add("--opensearch-addresses: required unless --registry names an OpenSearch backend")
	}
	errs = append(errs, registry.CheckAddressFlag(o.OpenSearchAddresses)...)
	errs = append(errs, o.OpenSearch.Check()...)

	if err := (mappings.Options{Prefix: o.Index.Prefix}).Validate(); err != nil {
		add("--index-prefix: %w", err)
	}
	if o.Index.Shards < 0 {
		add("--index-shards: must not be negative, got %d", o.Index.Shards)
	}
	if o.Index.Replicas < mappings.AutoReplicas {
		add("--index-replicas: must be auto or a number of replicas, got %d", o.Index.Replicas)
	}
	if o.Index.RefreshInterval > 0 && o.Index.RefreshInterval%time.Millisecond != 0 {
		add("--index-refresh-interval: OpenSearch counts in whole milliseconds, got %s", o.Index.RefreshInterval)
	}

	if o.BatchSize < 1 {
		add("--batch-size: must be at least 1, got %d", o.BatchSize)
	}
	if o.BatchBytes < 1<<10 {
		add("--batch-bytes: must be at least 1 KiB, got %d", o.BatchBytes)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--batch-interval", o.BatchInterval}, {"--watermark-interval", o.WatermarkInterval},
		{"--request-timeout", o.RequestTimeout}, {"--shutdown-timeout", o.ShutdownTimeout},
	} {
		if d.v <= 0 {
			add("%s: must be positive, got %s", d.flag, d.v)
		}
	}
	return errors.Join(errs...)
}

// connection is what New resolves from the options' files: where OpenSearch is (its credentials are
// the backend's to read), and how to reach Kafka.
type connection struct {
	addresses []string

	kafka stream.Connection
}

// resolveConnection reads the registries and the Kafka files the options name, reporting every
// problem at once.
func resolveConnection(o *Options) (connection, error) {
	var (
		c    connection
		errs []error
	)
	if o.Backend == nil {
		addrs, err := openSearchAddresses(o)
		if err != nil {
			errs = append(errs, err)
		}
		c.addresses = addrs
	}
	if o.Stream == nil {
		kc, err := o.Kafka.Resolve()
		if err != nil {
			errs = append(errs, err)
		}
		c.kafka = kc
	}
	return c, errors.Join(errs...)
}

// openSearchAddresses takes the addresses from the flag, or from the registries' backendStore. When
// both name OpenSearch, they must agree: one indexer deployment writes to one OpenSearch.
func openSearchAddresses(o *Options) ([]string, error) {
	if o.Registry == "" {
		return slices.Clone(o.OpenSearchAddresses), nil
	}
	regs, err := registry.Load(o.Registry)
	if err != nil {
		return nil, fmt.Errorf("--registry %s: %w", o.Registry, err)
	}
	backend, err := registry.OpenSearchBackend(regs)
	if err != nil {
		return nil, fmt.Errorf("--registry %s: %w", o.Registry, err)
	}
	if backend == nil {
		if len(o.OpenSearchAddresses) == 0 {
			return nil, fmt.Errorf("--opensearch-addresses: required, as no registry in --registry %s has spec.backendStore.openSearch", o.Registry)
		}
		return slices.Clone(o.OpenSearchAddresses), nil
	}
	if backend.SecretRef.Name != "" && o.OpenSearch.SecretDir == "" && o.OpenSearch.UsernameFile == "" {
		return nil, fmt.Errorf("--opensearch-secret-dir: the registries name secret %s/%s for OpenSearch; mount it and pass its folder (or --opensearch-username-file and --opensearch-password-file)",
			backend.SecretRef.Namespace, backend.SecretRef.Name)
	}
	if len(o.OpenSearchAddresses) > 0 && !sameAddresses(o.OpenSearchAddresses, backend.Addresses) {
		return nil, fmt.Errorf("--opensearch-addresses %s conflicts with the OpenSearch backend of --registry %s (%s); give one, or the same addresses",
			strings.Join(o.OpenSearchAddresses, ","), o.Registry, strings.Join(backend.Addresses, ","))
	}
	return backend.Addresses, nil
}

func sameAddresses(a, b []string) bool {
	norm := func(s []string) []string {
		out := make([]string, len(s))
		for i, v := range s {
			out[i] = strings.TrimRight(v, "/")
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}
