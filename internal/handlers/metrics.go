package handlers

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the service's Prometheus series (SPEC §8), on a registry of
// their own so that several servers can live in one process (tests). No label
// carries a path or a session id.
type Metrics struct {
	Registry      *prometheus.Registry
	statCalls     prometheus.Counter
	staleVersions *prometheus.CounterVec
	readFooters   *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	toolDuration  *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
}

// NewMetrics registers every series, with the Go and process collectors, on a
// new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		statCalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolfs_fs_stat_calls_total",
			Help: "Stat calls made by the tool executor: one per read, none per write or edit.",
		}),
		staleVersions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_stale_versions_total",
			Help: "Mutations refused because the file changed since the session read it.",
		}, []string{"tool"}),
		readFooters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_read_footers_total",
			Help: "Successful reads by the footer that ended the window.",
		}, []string{"footer"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_tool_calls_total",
			Help: "Tool calls by tool and outcome (ok or the error code).",
		}, []string{"tool", "code"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolfs_tool_duration_seconds",
			Help:    "Tool call latency.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"tool"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_session_store_errors_total",
			Help: "Session store operations that failed (Redis unreachable): a lost observation or touch, a refused decision, a failed forget.",
		}, []string{"op"}),
	}
	m.Registry.MustRegister(
		m.statCalls, m.staleVersions, m.readFooters, m.toolCalls, m.toolDuration, m.storeErrors,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, f := range []string{"capped", "limit", "eof"} {
		m.readFooters.WithLabelValues(f)
	}
	for _, t := range []string{"write", "edit"} {
		m.staleVersions.WithLabelValues(t)
	}
	for _, op := range []string{"observe", "touch", "decide", "forget"} {
		m.storeErrors.WithLabelValues(op)
	}
	return m
}

// watchSessions exports the size of the session store, when the gate has one,
// so the bounds (--max-sessions, --max-paths-per-session) can be watched.
func (m *Metrics) watchSessions(gate any) {
	st, ok := gate.(interface {
		Stats() (sessions, observations int)
	})
	if !ok {
		return
	}
	for _, g := range []struct {
		name, help string
		value      func() float64
	}{
		{"toolfs_sessions", "Sessions with observed state.", func() float64 { n, _ := st.Stats(); return float64(n) }},
		{"toolfs_observations", "(session, path) observations held.", func() float64 { _, n := st.Stats(); return float64(n) }},
	} {
		// A second server on the same Metrics finds them registered already.
		_ = m.Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, g.value))
	}
}
