package simulate

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubesearch/kubesearch/internal/serving"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// Options configure a Simulator. Zero values take the defaults of SetDefaults, except Clusters and
// Objects: zero clusters is a simulation that removes every cluster an earlier one with the same
// Name left in the stream (PURGE); Objects is required otherwise.
type Options struct {
	// Seed makes the fleet: the same seed, the same clusters, objects and churn operations.
	Seed uint64
	// Clusters is how many member clusters are simulated, named ClusterPrefix and their number
	// ("sim-0001"); Objects how many objects each holds at start, of every kind its discovery
	// serves, before the selection (Kinds) filters what is published.
	Clusters      int
	Objects       int
	ClusterPrefix string
	// Kinds are the resources selected, as KindNames names them; empty selects every one.
	Kinds []string

	// ChurnRate is how many changes per second the fleet makes after its lists, spread evenly over
	// the clusters; ChurnDuration how long (0: until Run's context ends).
	ChurnRate     float64
	ChurnDuration time.Duration

	Brokers []string
	// Stream, when set, is the event stream instead of Kafka at Brokers (tests; the standalone
	// mode's in-process log). It stays the caller's.
	Stream          stream.Broker
	Kafka           stream.Security
	Topic           string
	TopicPartitions int
	// MaxMessageBytes is the event topic's max.message.bytes when the simulator creates it.
	MaxMessageBytes int
	// Name is the simulator's name in the collectors' ledger, as a collector's (--name): a later
	// simulation of the same name purges the clusters and kinds it no longer simulates.
	Name string

	// Writers is how many goroutines publish at once, each for its share of the clusters (a
	// cluster's events stay in order); PublishBatch is the most events written at once by one.
	Writers      int
	PublishBatch int

	// ListenAddr serves /healthz, /readyz and the collectors' /status of the simulated clusters;
	// empty serves nothing. Endpoints says who may read /status.
	ListenAddr string
	Endpoints  serving.Options
	// ShutdownTimeout bounds the stop of the HTTP server.
	ShutdownTimeout time.Duration

	Logger *slog.Logger
}

// DefaultClusterPrefix names simulated clusters apart from the test bed's members (member1, ...).
const DefaultClusterPrefix = "sim-"

// SetDefaults fills the zero fields.
func (o *Options) SetDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if o.ClusterPrefix == "" {
		o.ClusterPrefix = DefaultClusterPrefix
	}
	if o.Topic == "" {
		o.Topic = stream.DefaultTopic
	}
	if o.Name == "" {
		o.Name = "kubesearch-simulate"
	}
	def(&o.TopicPartitions, stream.DefaultPartitions)
	def(&o.MaxMessageBytes, stream.DefaultMaxMessageBytes)
	def(&o.Writers, 8)
	def(&o.PublishBatch, 1000)
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// maxClusters bounds --clusters: the fleets the design is sized for, with room.
const maxClusters = 100_000

// Validate reports every invalid option at once, each named by its flag.
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Clusters < 0 || o.Clusters > maxClusters {
		add("--clusters: must be between 0 and %d, got %d", maxClusters, o.Clusters)
	}
	if o.Objects < 1 && o.Clusters > 0 {
		add("--objects: must be at least 1, got %d", o.Objects)
	}
	// A cluster's name is a DNS label wherever kubesearch takes one (clusters files, kubeconfig
	// contexts it names): so is every simulated one.
	if msgs := validation.IsDNS1123Label(clusterName(o.ClusterPrefix, max(o.Clusters, 1), max(o.Clusters, 1))); len(msgs) > 0 {
		add("--cluster-prefix: %q does not make cluster names that are DNS labels: %s", o.ClusterPrefix, strings.Join(msgs, "; "))
	}
	for _, k := range o.Kinds {
		if !slices.Contains(KindNames(), k) {
			add("--kinds: unknown kind %q; known: %s", k, strings.Join(KindNames(), ","))
		}
	}
	if o.ChurnRate < 0 {
		add("--churn-rate: must not be negative, got %v", o.ChurnRate)
	}
	if o.ChurnDuration < 0 {
		add("--churn-duration: must not be negative, got %s", o.ChurnDuration)
	}
	if len(o.Brokers) == 0 && o.Stream == nil {
		add("--kafka-brokers: required")
	}
	if o.Topic == "" {
		add("--topic: required")
	}
	for name, v := range map[string]int{"--topic-partitions": o.TopicPartitions, "--writers": o.Writers, "--publish-batch": o.PublishBatch} {
		if v < 1 {
			add("%s: must be at least 1, got %d", name, v)
		}
	}
	if o.MaxMessageBytes < 1<<20 {
		add("--kafka-max-message-bytes: must be at least 1 MiB (Kubernetes objects reach 1.5 MiB), got %d", o.MaxMessageBytes)
	}
	if o.Name == "" {
		add("--name: required")
	}
	errs = append(errs, o.Kafka.Check()...)
	errs = append(errs, o.Endpoints.Check()...)
	if o.ShutdownTimeout <= 0 {
		add("--shutdown-timeout: must be positive, got %s", o.ShutdownTimeout)
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}
