package collector

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics live in a registry of the collector's own, so two collectors in one process (tests, the
// standalone mode) never collide.
type metrics struct {
	registry       *prometheus.Registry
	published      *prometheus.CounterVec
	publishErrors  prometheus.Counter
	publishLatency prometheus.Histogram
	queueLength    prometheus.GaugeFunc
	listed         *prometheus.GaugeVec
	oversized      *prometheus.CounterVec
}

func newMetrics(queueLen func() float64) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_collector_events_published_total",
			Help: "Events acknowledged by Kafka, by cluster, resource and event type.",
		}, []string{"cluster", "resource", "type"}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubesearch_collector_publish_errors_total",
			Help: "Failed Kafka write attempts (each is retried).",
		}),
		publishLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubesearch_collector_publish_latency_seconds",
			Help:    "Time from an event entering the publish buffer to Kafka's acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		queueLength: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kubesearch_collector_publish_buffer_length",
			Help: "Events waiting in the bounded publish buffer.",
		}, queueLen),
		listed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubesearch_collector_list_objects",
			Help: "Objects listed so far by the current or last list, by cluster and resource.",
		}, []string{"cluster", "resource"}),
		oversized: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_collector_oversized_events_total",
			Help: "Events over Kafka's message size limit, by cluster, resource and outcome: truncated (published with part of the object), deleted (published as a DELETED, dead-lettered), dropped (dead-lettered).",
		}, []string{"cluster", "resource", "outcome"}),
	}
	m.registry.MustRegister(m.published, m.publishErrors, m.publishLatency, m.queueLength, m.listed, m.oversized,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}
