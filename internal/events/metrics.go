package events

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the change feed's Prometheus series (docs/events.md,
// "Metrics"). No label carries a path or a session id.
type Metrics struct {
	published   *prometheus.CounterVec
	subscribers prometheus.Gauge
	dropped     prometheus.Counter
	refused     prometheus.Counter
	watches     prometheus.Gauge
	watchLimit  prometheus.Counter
	overflows   prometheus.Counter
	redisErrors *prometheus.CounterVec
	gaps        prometheus.Counter
	watching    prometheus.Gauge
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_events_published_total",
			Help: "Change-feed events published, by type.",
		}, []string{"type"}),
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolfs_events_subscribers",
			Help: "Open GET /events streams.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolfs_events_subscribers_dropped_total",
			Help: "Subscribers dropped (with a reset) because they fell behind.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolfs_events_subscribers_refused_total",
			Help: "GET /events refused with 503 TOO_MANY_SUBSCRIBERS.",
		}),
		watches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolfs_events_watches",
			Help: "Folders watched for external changes.",
		}),
		watchLimit: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolfs_events_watch_limit_hits_total",
			Help: "Folders left unwatched because the watch bound (--events-max-watches or the kernel's) was reached.",
		}),
		overflows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolfs_events_overflows_total",
			Help: "Times the kernel dropped change notifications.",
		}),
		redisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolfs_events_redis_errors_total",
			Help: "Failed Redis calls of the shared change feed, by operation (publish, expect, echo, read, resume, lease).",
		}, []string{"op"}),
		gaps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolfs_events_stream_gaps_total",
			Help: "Times this replica's reader of the shared stream found entries missing (it fell behind the stream's bound, or Redis lost them); its subscribers got a reset.",
		}),
		watching: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolfs_events_watching",
			Help: "1 while this process watches the root for external changes (with Redis: while it holds the watcher lease), else 0.",
		}),
	}
	reg.MustRegister(m.published, m.subscribers, m.dropped, m.refused, m.watches, m.watchLimit, m.overflows, m.redisErrors, m.gaps, m.watching)
	for _, t := range []Type{TypeWrite, TypeEdit, TypeUpload, TypeDelete, TypeCreated, TypeModified, TypeRemoved, TypeRenamed, TypeOverflow} {
		m.published.WithLabelValues(string(t))
	}
	return m
}

// observer is a nil-safe view of *Metrics, so a Hub or Watcher built without
// metrics (a test) needs no checks at every call.
type observer struct{ m *Metrics }

func (o observer) published(t Type) {
	if o.m != nil {
		o.m.published.WithLabelValues(string(t)).Inc()
	}
}

func (o observer) subscribed(n int) {
	if o.m != nil {
		o.m.subscribers.Set(float64(n))
	}
}

func (o observer) dropped() {
	if o.m != nil {
		o.m.dropped.Inc()
	}
}

func (o observer) refused() {
	if o.m != nil {
		o.m.refused.Inc()
	}
}

func (o observer) watching(n int) {
	if o.m != nil {
		o.m.watches.Set(float64(n))
	}
}

func (o observer) watchLimitHit() {
	if o.m != nil {
		o.m.watchLimit.Inc()
	}
}

func (o observer) overflow() {
	if o.m != nil {
		o.m.overflows.Inc()
	}
}

func (o observer) redisError(op string) {
	if o.m != nil {
		o.m.redisErrors.WithLabelValues(op).Inc()
	}
}

func (o observer) watchingNow(on bool) {
	if o.m != nil {
		v := 0.0
		if on {
			v = 1
		}
		o.m.watching.Set(v)
	}
}

func (o observer) gap() {
	if o.m != nil {
		o.m.gaps.Inc()
	}
}
