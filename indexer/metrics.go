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
	stages       *prometheus.HistogramVec
	delay        prometheus.Histogram
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
		// Where a change's time between its member and the index goes, stage by stage: freshness
		// (member write → searchable) is the sum of the collector's watch, the batch's wait, these
		// stages, and the refresh.
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubesearch_indexer_batch_stage_seconds",
			Help:    "Time of each stage of applying a batch: watermarks (loading those of new pairs), changes (publishing the change feed), write (the _bulk), syncs (collecting SYNC markers' older epochs), commit (urgent watermarks, offsets, the feed's bookmark), and refresh (the periodic refresh of the indices written to).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"stage"}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubesearch_indexer_event_delay_seconds",
			Help:    "From an event's observation by its collector (the envelope's observedAt, the collector's clock) to its batch written to the index, before the refresh that makes it searchable.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
	}
	m.registry.MustRegister(m.messages, m.failed, m.unversioned, m.superseded, m.changes, m.deadLetters, m.lag, m.commitErrors, m.batches, m.inFlight,
		m.stages, m.delay,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}
