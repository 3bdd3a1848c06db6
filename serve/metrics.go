package serve

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (so that several servers, as in tests, do not collide): requests and
// their latency per endpoint, the body budget taken and the slots held,
// and each index's size, read at each scrape.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vlc_requests_total", Help: "API requests by endpoint, index and status code.",
		}, []string{"endpoint", "index", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vlc_request_duration_seconds", Help: "API request latency by endpoint.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 0.1 ms to 13 s
		}, []string{"endpoint"}),
	}
	m.reg.MustRegister(m.requests, m.latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vlc_request_body_bytes", Help: "Bytes of the request body budget (Limits.BodyMemory) taken now: bodies being read, waiting for a slot or being answered.",
	}, func() float64 { return float64(s.bodyBytes.Load()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vlc_requests_in_flight", Help: "Requests holding a slot now (Limits.InFlight): bodies read, being answered.",
	}, func() float64 { return float64(len(s.inFlight)) }))
	for _, name := range s.names() {
		ix := s.indexes[name]
		gauge := func(metric, help string, value func() float64) {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: metric, Help: help, ConstLabels: prometheus.Labels{"index": name},
			}, value))
		}
		info := func(f func(live, deleted int, bytes int64) float64) func() float64 {
			return func() float64 {
				in, err := ix.Info()
				if err != nil {
					return -1
				}
				return f(in.Rows, in.Deleted, in.Bytes)
			}
		}
		gauge("vlc_index_live_vectors", "Vectors an index searches and returns.", info(func(l, _ int, _ int64) float64 { return float64(l) }))
		gauge("vlc_index_deleted_vectors", "Vectors deleted and not yet compacted away.", info(func(_, d int, _ int64) float64 { return float64(d) }))
		gauge("vlc_index_bytes", "Bytes of an index's files.", info(func(_, _ int, b int64) float64 { return float64(b) }))
	}
	return m
}

func (m *metrics) observe(endpoint, index string, code int, d time.Duration) {
	m.requests.WithLabelValues(endpoint, index, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(endpoint).Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
