package queryapi

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.HistogramVec
	store    prometheus.Histogram
	took     prometheus.Histogram
	reviews  *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubesearch_queryapi_request_duration_seconds", Help: "Requests served, by route and status code.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"route", "code"}),
		store: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubesearch_queryapi_opensearch_duration_seconds", Help: "Time a search spent waiting for OpenSearch (all its requests), as seen by the query API.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubesearch_queryapi_opensearch_took_seconds", Help: "OpenSearch's own 'took' of the searches of a request.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_queryapi_subject_access_reviews_total", Help: "SubjectAccessReviews asked of the members (cached answers not counted), by cluster and result: allowed, denied, failed.",
		}, []string{"cluster", "result"}),
	}
	m.registry.MustRegister(m.requests, m.store, m.took, m.reviews,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// middleware records every request under its route pattern, never its raw path (unbounded).
func (m *metrics) middleware(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, strconv.Itoa(c.Writer.Status())).Observe(time.Since(start).Seconds())
}

func (m *metrics) observeStore(wall, took time.Duration) {
	m.store.Observe(wall.Seconds())
	m.took.Observe(took.Seconds())
}
