package indexer

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics live in a registry of the indexer's own, so two indexers in one process (tests, the
// standalone mode) never collide.
type metrics struct {
	registry *prometheus.Registry

	messages     *prometheus.CounterVec
	written      *prometheus.CounterVec
	deleted      *prometheus.CounterVec
	gcDeleted    *prometheus.CounterVec
	failed       *prometheus.CounterVec
	conflicts    *prometheus.CounterVec
	unversioned  *prometheus.CounterVec
	deadLetters  *prometheus.CounterVec
	superseded   prometheus.Counter
	retriedItems prometheus.Counter
	bulkErrors   prometheus.Counter
	bulkLatency  prometheus.Histogram
	bulkBytes    prometheus.Histogram
	bulkItems    prometheus.Histogram
	lag          *prometheus.GaugeVec
	commitErrors prometheus.Counter
	batches      prometheus.Counter
	inFlight     prometheus.Gauge
	rollCopied   *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_messages_total",
			Help: "Events consumed, by envelope type (\"invalid\" for those that do not decode).",
		}, []string{"type"}),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_documents_written_total",
			Help: "Documents indexed (created or replaced), by index.",
		}, []string{"index"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_documents_deleted_total",
			Help: "Documents deleted by DELETED events (including deletes of documents already gone), by index.",
		}, []string{"index"}),
		gcDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_documents_collected_total",
			Help: "Documents deleted by SYNC (older epoch) and PURGE markers, by index and marker.",
		}, []string{"index", "marker"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_documents_failed_total",
			Help: "Events that could not be applied and went to the dead-letter topic, by index (empty when unknown) and reason.",
		}, []string{"index", "reason"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_version_conflicts_total",
			Help: "Writes refused for an older version, by index and outcome: replay (the stored document is as new or newer; expected after redelivery) or overwritten (the event is of a newer epoch, or newer than a document written without its version).",
		}, []string{"index", "outcome"}),
		unversioned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_unversioned_writes_total",
			Help: "Writes without external versioning because the resourceVersion is not an integer (some aggregated APIs), by cluster and resource.",
		}, []string{"cluster", "resource"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_dead_letters_total",
			Help: "Events written to the dead-letter topic, by reason.",
		}, []string{"reason"}),
		superseded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubesearch_indexer_superseded_retries_total",
			Help: "Operations not retried because a later event of the same object was written already.",
		}),
		retriedItems: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubesearch_indexer_bulk_retried_items_total",
			Help: "Bulk operations retried because OpenSearch could not take them (429, 5xx).",
		}),
		bulkErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubesearch_indexer_bulk_errors_total",
			Help: "Bulk requests that failed as a whole (OpenSearch away, throttling, errors); each is retried.",
		}),
		bulkLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubesearch_indexer_bulk_duration_seconds",
			Help:    "Duration of _bulk requests.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		bulkBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubesearch_indexer_bulk_size_bytes",
			Help:    "Size of _bulk request bodies.",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 10),
		}),
		bulkItems: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubesearch_indexer_bulk_operations",
			Help:    "Operations per _bulk request.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
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
		rollCopied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_roll_documents_copied_total",
			Help: "Documents copied into a new index when an alias rolled to this build's mapping version, by alias.",
		}, []string{"alias"}),
	}
	m.registry.MustRegister(m.messages, m.written, m.deleted, m.gcDeleted, m.failed, m.conflicts, m.unversioned,
		m.deadLetters, m.superseded, m.retriedItems, m.bulkErrors, m.bulkLatency, m.bulkBytes, m.bulkItems, m.lag,
		m.commitErrors, m.batches, m.inFlight, m.rollCopied,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}
