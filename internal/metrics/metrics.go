// Package metrics is the server's Prometheus series (docs/api.md,
// "Metrics"): the executor's Observer, and the gauges and counters the
// builder (internal/server) hooks to the other packages (the session store,
// the searcher, the approvals, the change feed's own series). It is the one
// package that owns a registry; transports serve Handler and know nothing of
// Prometheus.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/tools"
)

// Metrics are the service's Prometheus series, on a registry of their own
// so that several servers can live in one process (tests). No label carries
// a path or a session id.
type Metrics struct {
	registry      *prometheus.Registry
	statCalls     prometheus.Counter
	staleVersions *prometheus.CounterVec
	readFooters   *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	toolDuration  *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
	cacheHits     *prometheus.CounterVec
	cacheMisses   *prometheus.CounterVec
	approvals     *prometheus.CounterVec
	reverts       *prometheus.CounterVec
	auditErrors   prometheus.Counter

	// The series of each label set once looked up, so a call does not
	// hash its labels again (WithLabelValues on every call was a
	// measurable part of a cached read; docs/performance.md). Label
	// values come from the code's own constants (transports, tools, error
	// codes, footers, caches), so these maps stay small.
	calls   sync.Map // callLabels → *callSeries
	footers map[string]prometheus.Counter
	hits    map[string]prometheus.Counter
	misses  map[string]prometheus.Counter
}

type callLabels struct{ transport, tool, code string }

type callSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// New registers every series, with the Go and process collectors, on a new
// registry.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		statCalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolfs_fs_stat_calls_total",
			Help: "Stat calls of the filesystem provider: one per read, plus one for X-Session-Cwd; none per write or edit.",
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
			Help: "Tool calls by transport, tool and outcome (ok or the error code).",
		}, []string{"transport", "tool", "code"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolfs_tool_duration_seconds",
			Help:    "Tool call latency.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"transport", "tool"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_session_store_errors_total",
			Help: "Session store operations that failed (Redis unreachable): a lost observation or touch, a refused decision, a failed forget.",
		}, []string{"op"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_cache_hits_total",
			Help: "Read cache lookups that hit: window (a rendered window of an unchanged file), index (the line index of an unchanged large file).",
		}, []string{"cache"}),
		cacheMisses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_cache_misses_total",
			Help: "Read cache lookups that missed, by cache (window, index).",
		}, []string{"cache"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_approvals_total",
			Help: "Sandbox escalation approvals by how they ended (approve, reject, timeout or cancelled: the caller went away, the user dismissed the question, or the server shut down) and the channel whose decision ended them (approvals: /approvals; elicitation: the MCP client's own user).",
		}, []string{"decision", "via"}),
		reverts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_reverts_total",
			Help: "Reverts of a session's changes (docs/checkpoints.md) by outcome: reverted, dry_run, stale (a file changed since, FS_STALE_VERSION), not_revertible, error.",
		}, []string{"outcome"}),
		auditErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolfs_audit_write_errors_total",
			Help: "Audit log failures (--audit-log, docs/audit.md): a refused reservation (the mutation failed with AUDIT_UNAVAILABLE, nothing changed) or a record a failed write lost.",
		}),
	}
	m.registry.MustRegister(
		m.statCalls, m.staleVersions, m.readFooters, m.toolCalls, m.toolDuration, m.storeErrors,
		m.cacheHits, m.cacheMisses, m.approvals, m.reverts, m.auditErrors,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.footers = map[string]prometheus.Counter{}
	for _, f := range []string{"capped", "limit", "eof"} {
		m.footers[f] = m.readFooters.WithLabelValues(f)
	}
	for _, t := range []string{"write", "edit"} {
		m.staleVersions.WithLabelValues(t)
	}
	m.hits, m.misses = map[string]prometheus.Counter{}, map[string]prometheus.Counter{}
	for _, c := range []string{tools.CacheWindow, tools.CacheIndex} {
		m.hits[c] = m.cacheHits.WithLabelValues(c)
		m.misses[c] = m.cacheMisses.WithLabelValues(c)
	}
	for _, op := range []string{"observe", "touch", "decide", "forget"} {
		m.storeErrors.WithLabelValues(op)
	}
	for _, d := range []string{"approve", "reject", "timeout", "cancelled"} {
		for _, via := range []string{tools.ViaApprovals, tools.ViaElicitation} {
			m.approvals.WithLabelValues(d, via)
		}
	}
	for _, o := range tools.RevertOutcomes {
		m.reverts.WithLabelValues(o)
	}
	return m
}

var _ tools.Observer = (*Metrics)(nil)

// Handler serves the registry in the text exposition format (GET /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Registerer is where a package that defines its own series registers
// them (the change feed: events.NewMetrics).
func (m *Metrics) Registerer() prometheus.Registerer { return m.registry }

// ToolCall counts one finished tool call (tools.Observer).
func (m *Metrics) ToolCall(transport, tool string, code fault.Code, took time.Duration) {
	k := callLabels{transport, tool, string(code)}
	v, ok := m.calls.Load(k)
	if !ok {
		v, _ = m.calls.LoadOrStore(k, &callSeries{
			count:    m.toolCalls.WithLabelValues(transport, tool, string(code)),
			duration: m.toolDuration.WithLabelValues(transport, tool),
		})
	}
	s := v.(*callSeries)
	s.count.Inc()
	s.duration.Observe(took.Seconds())
}

// ReadFooter counts the footer of a successful read (tools.Observer).
func (m *Metrics) ReadFooter(footer string) {
	if c, ok := m.footers[footer]; ok {
		c.Inc()
		return
	}
	m.readFooters.WithLabelValues(footer).Inc()
}

// StaleVersion counts a mutation refused as stale (tools.Observer).
func (m *Metrics) StaleVersion(tool string) { m.staleVersions.WithLabelValues(tool).Inc() }

// CacheLookup counts a read cache lookup (tools.Observer).
func (m *Metrics) CacheLookup(cache string, hit bool) {
	counters, vec := m.misses, m.cacheMisses
	if hit {
		counters, vec = m.hits, m.cacheHits
	}
	if c, ok := counters[cache]; ok {
		c.Inc()
		return
	}
	vec.WithLabelValues(cache).Inc()
}

// StatCall counts one provider Stat call (tools.Observer).
func (m *Metrics) StatCall() { m.statCalls.Inc() }

// SessionStoreError counts a failed session store operation (tools.Observer).
func (m *Metrics) SessionStoreError(op string) { m.storeErrors.WithLabelValues(op).Inc() }

// WatchSearch exports toolfs_search_sandboxed: 1 when rg runs confined by
// Landlock, 0 when it runs unconfined (--search-sandbox best-effort).
func (m *Metrics) WatchSearch(sandboxed func() bool) {
	_ = m.registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolfs_search_sandboxed",
		Help: "1 when glob and grep run rg confined to the root by Landlock, else 0.",
	}, func() float64 {
		if sandboxed() {
			return 1
		}
		return 0
	}))
}

// Revert counts one revert by its outcome (tools.Observer).
func (m *Metrics) Revert(outcome string) { m.reverts.WithLabelValues(outcome).Inc() }

// AuditWriteError counts one failure of the audit log (audit.Options.OnError).
func (m *Metrics) AuditWriteError(error) { m.auditErrors.Inc() }

// Approval counts an approval by how it ended (approval.Outcome) and the
// channel whose decision ended it (tools.ViaApprovals, tools.ViaElicitation).
func (m *Metrics) Approval(outcome, via string) { m.approvals.WithLabelValues(outcome, via).Inc() }

// WatchApprovals exports the number of pending approvals.
func (m *Metrics) WatchApprovals(pending func() int) {
	_ = m.registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolfs_approvals_pending", Help: "Sandbox escalations waiting for a person's decision.",
	}, func() float64 { return float64(pending()) }))
}

// WatchSessions exports the size of the session store, when the gate has one,
// so the bounds (--max-sessions, --max-paths-per-session) can be watched.
func (m *Metrics) WatchSessions(gate any) {
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
		_ = m.registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, g.value))
	}
	if ev, ok := gate.(interface{ Evicted() uint64 }); ok {
		_ = m.registry.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "toolfs_observations_evicted_total",
			Help: "Observations the session store's bounds evicted (the session must read the path again).",
		}, func() float64 { return float64(ev.Evicted()) }))
	}
}

// BuildInfo exports toolfs_build_info{version,goversion} = 1, the version
// of the running binary (docs/running.md, "Watching it"), so a
// dashboard can tell which release each replica runs.
func (m *Metrics) BuildInfo(version, goversion string) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolfs_build_info",
		Help: "1, labelled with the server's version and the Go release that built it.",
	}, []string{"version", "goversion"})
	g.WithLabelValues(version, goversion).Set(1)
	_ = m.registry.Register(g)
}
