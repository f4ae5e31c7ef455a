package indexer

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics live in a registry of the indexer's own, so two indexers in one process (tests, the
// standalone mode) never collide. The registry also takes the metrics of the writes, which the
// OpenSearch backend owns (osstore.Options.Registerer).
type metrics struct {
	registry *prometheus.Registry

	messages     *prometheus.CounterVec
	failed       *prometheus.CounterVec
	unversioned  *prometheus.CounterVec
	superseded   prometheus.Counter
	changes      prometheus.Counter
	deadLetters  *prometheus.CounterVec
	lag          *prometheus.GaugeVec
	commitErrors prometheus.Counter
	batches      prometheus.Counter
	inFlight     prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_messages_total",
			Help: "Events consumed, by envelope type (\"invalid\" for those that do not decode).",
		}, []string{"type"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_documents_failed_total",
			Help: "Events that could not be applied and went to the dead-letter topic, by index (empty when unknown) and reason.",
		}, []string{"index", "reason"}),
		unversioned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_unversioned_writes_total",
			Help: "Writes without external versioning because the resourceVersion is not an integer (some aggregated APIs), by cluster and resource.",
		}, []string{"cluster", "resource"}),
		superseded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubesearch_indexer_superseded_events_total",
			Help: "Object events not written because a newer epoch (a newer list) of their scope was already seen.",
		}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubesearch_indexer_changes_published_total",
			Help: "Records published to the change feed (--changes-topic): changes of the index, and SYNC and PURGE markers.",
		}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_dead_letters_total",
			Help: "Events written to the dead-letter topic, by reason.",
		}, []string{"reason"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubesearch_indexer_consumer_lag",
			Help: "Events of a partition not yet committed: the partition's high watermark at the last fetch minus the committed offset.",
		}, []string{"topic", "partition"}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubesearch_indexer_commit_errors_total",
			Help: "Failed offset commits (the events are written; they are consumed again after a rebalance or restart).",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubesearch_indexer_batches_total",
			Help: "Batches of events written and committed.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubesearch_indexer_events_in_flight",
			Help: "Events fetched and not yet committed: buffered, or in the batch being written.",
		}),
	}
	m.registry.MustRegister(m.messages, m.failed, m.unversioned, m.superseded, m.changes, m.deadLetters, m.lag, m.commitErrors, m.batches, m.inFlight,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}
