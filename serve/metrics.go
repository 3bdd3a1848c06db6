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
	// deviceBatch is the queries of each search an index answers on a
	// device.
	deviceBatch prometheus.Histogram
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
		deviceBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vlc_device_batch_queries", Help: "Queries of each search answered on a device (an index opened with a device, some of its segments there).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8), // 1 to 16,384
		}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.deviceBatch, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vlc_request_body_bytes", Help: "Bytes of the request body budget (Limits.BodyMemory) taken now: bodies being read, waiting for a slot or being answered.",
	}, func() float64 { return float64(s.bodyBytes.Load()) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vlc_requests_in_flight", Help: "Requests holding a slot now (Limits.InFlight): bodies read, being answered.",
	}, func() float64 { return float64(len(s.inFlight)) }))
	m.reg.MustRegister(indexCollector{s})
	return m
}

func (m *metrics) observe(endpoint, index string, code int, d time.Duration) {
	m.requests.WithLabelValues(endpoint, index, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(endpoint).Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// indexCollector reports each index's size at a scrape, for the indexes
// served then (collections come and go).
type indexCollector struct{ s *Server }

var (
	liveDesc    = prometheus.NewDesc("vlc_index_live_vectors", "Vectors an index searches and returns.", []string{"index"}, nil)
	deletedDesc = prometheus.NewDesc("vlc_index_deleted_vectors", "Vectors deleted and not yet compacted away.", []string{"index"}, nil)
	bytesDesc   = prometheus.NewDesc("vlc_index_bytes", "Bytes of an index's files.", []string{"index"}, nil)
	deviceDesc  = prometheus.NewDesc("vlc_index_device_bytes", "Device (GPU) memory an index's segments hold; 0 for an index searched on the CPU.", []string{"index"}, nil)
)

func (c indexCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- liveDesc
	ch <- deletedDesc
	ch <- bytesDesc
	ch <- deviceDesc
}

// Collect reports -1 for an index whose Info fails.
func (c indexCollector) Collect(ch chan<- prometheus.Metric) {
	for _, name := range c.s.names() {
		sv := c.s.lookup(name)
		if sv == nil {
			continue // dropped meanwhile
		}
		live, deleted, size := -1.0, -1.0, -1.0
		if in, err := sv.ix.Info(); err == nil {
			live, deleted, size = float64(in.Rows), float64(in.Deleted), float64(in.Bytes)
		}
		ch <- prometheus.MustNewConstMetric(liveDesc, prometheus.GaugeValue, live, name)
		ch <- prometheus.MustNewConstMetric(deletedDesc, prometheus.GaugeValue, deleted, name)
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, size, name)
		onDevice := -1.0
		if in, err := sv.ix.DeviceInfo(); err == nil {
			onDevice = float64(in.Bytes)
		}
		ch <- prometheus.MustNewConstMetric(deviceDesc, prometheus.GaugeValue, onDevice, name)
	}
}
