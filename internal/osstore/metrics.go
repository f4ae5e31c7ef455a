package osstore

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the write path's. Their names keep the indexer's prefix: the indexer is the process
// that writes, and dashboards and the e2e tests know them by it.
type metrics struct {
	written      *prometheus.CounterVec
	deleted      *prometheus.CounterVec
	gcDeleted    *prometheus.CounterVec
	conflicts    *prometheus.CounterVec
	superseded   prometheus.Counter
	retriedItems prometheus.Counter
	bulkErrors   prometheus.Counter
	bulkLatency  prometheus.Histogram
	bulkBytes    prometheus.Histogram
	bulkItems    prometheus.Histogram
	rollCopied   *prometheus.CounterVec
}

// newMetrics makes the metrics and registers them with reg (nil: nowhere).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
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
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_version_conflicts_total",
			Help: "Writes refused for an older version, by index and outcome: replay (the stored document is as new or newer; expected after redelivery) or overwritten (the event is of a newer epoch, or newer than a document written without its version).",
		}, []string{"index", "outcome"}),
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
		rollCopied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_indexer_roll_documents_copied_total",
			Help: "Documents copied into a new index when an alias rolled to this build's mapping version, by alias.",
		}, []string{"alias"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.written, m.deleted, m.gcDeleted, m.conflicts, m.superseded, m.retriedItems,
		m.bulkErrors, m.bulkLatency, m.bulkBytes, m.bulkItems, m.rollCopied} {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("osstore: register metrics: %w", err)
	}
	return m, nil
}
