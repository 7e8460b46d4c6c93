package caddymodule

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Prometheus metrics of the task lifecycle, served on Caddy's admin /metrics
// with Caddy's own. The collectors are created once and registered again
// with each configuration's registry, as Caddy's handlers do.
var metrics struct {
	once     sync.Once
	created  *prometheus.CounterVec
	ended    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	refused  *prometheus.CounterVec
	running  prometheus.GaugeFunc
	active   prometheus.GaugeFunc
	stored   prometheus.GaugeFunc
	size     prometheus.GaugeFunc
	ready    prometheus.GaugeFunc
	// storeDuration is fed by the stores' timers (storetiming.go).
	storeDuration *prometheus.HistogramVec
	failed        *prometheus.CounterVec
	takeovers     *prometheus.CounterVec
	streams       []prometheus.Collector
	storeUp       prometheus.Collector
}

const metricsNamespace, metricsSubsystem = "caddy", "mcp_tasks"

func initMetrics() {
	metrics.once.Do(func() {
		opts := func(name, help string) prometheus.Opts {
			return prometheus.Opts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help}
		}
		metrics.created = prometheus.NewCounterVec(prometheus.CounterOpts(opts("created_total", "Tasks created, by protocol era.")), []string{"era"})
		metrics.ended = prometheus.NewCounterVec(prometheus.CounterOpts(opts("ended_total", "Tasks that reached a terminal status, by era and status.")), []string{"era", "status"})
		metrics.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "duration_seconds",
			Help:    "Time from a task's creation to its terminal status, by era and status.",
			Buckets: prometheus.ExponentialBuckets(0.05, 3, 10), // 50ms .. ~16min
		}, []string{"era", "status"})
		metrics.refused = prometheus.NewCounterVec(prometheus.CounterOpts(opts("refused_total", "Requests refused, by reason: quota (max_active_per_principal), rate_limit, streams (open long-lived answers), watched_tasks, bridge_input, inline_input or draining.")), []string{"reason"})
		metrics.running = prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("workers_running", "Task workers running in this process.")), runningWorkers)
		metrics.active = prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("tasks_active", "Stored tasks not yet completed, failed or cancelled.")),
			func() float64 { return float64(storeTotals().Active) })
		metrics.stored = prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("tasks_stored", "Tasks stored, ended ones included until their ttl is over.")),
			func() float64 { return float64(storeTotals().Tasks) })
		metrics.size = prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("store_size_bytes", "Disk space of the task stores: Badger's files (allocated blocks, as du counts them), PostgreSQL's tables and indexes of the schema.")),
			func() float64 { return float64(storeTotals().Bytes) })
		metrics.ready = prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("ready",
			"1 when every task store can take tasks and the process is not draining (as /mcp_tasks/health/ready answers 200), else 0.")),
			readyGauge)
		metrics.storeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "store_duration_seconds",
			Help:    "Time a task store call took, by operation and backend.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9), // 100µs .. ~6.5s
		}, []string{"operation", "backend"})
		metrics.failed = prometheus.NewCounterVec(prometheus.CounterOpts(opts("failed_total",
			"Tasks that failed, by era and reason: tool_error, upstream_error, upstream_unreachable, run_timeout, expired, interrupted.")),
			[]string{"era", "reason"})
		metrics.takeovers = prometheus.NewCounterVec(prometheus.CounterOpts(opts("takeovers_total",
			"Tasks whose worker was gone that this process took over, by cause: restart (left by a previous process) or replica (another replica's lease expired).")),
			[]string{"cause"})
		// The label sets are known: every series starts at zero, so that
		// rates and alerts see it before its first event.
		for _, era := range []task.Era{task.Era2025, task.Era2026} {
			for _, reason := range task.FailReasons {
				metrics.failed.WithLabelValues(string(era), string(reason))
			}
		}
		for _, cause := range task.TakeoverCauses {
			metrics.takeovers.WithLabelValues(string(cause))
		}
		metrics.storeUp = storeUpCollector{desc: prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "store_up"),
			"1 when every task store of the backend in use is open, reachable and writable (as /mcp_tasks/health reports them), else 0; checked at the scrape.",
			[]string{"backend"}, nil)}
		for _, kind := range taskproxy.StreamKinds() {
			metrics.streams = append(metrics.streams, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "streams_open",
				Help:        "Long-lived answers held open, by kind: listen (subscriptions/listen streams) or result (tasks/result answers waiting for the outcome).",
				ConstLabels: prometheus.Labels{"kind": kind},
			}, func() float64 { return openStreams(kind) }))
		}
	})
}

// registerMetrics adds the collectors to the configuration's registry.
func registerMetrics(ctx caddy.Context) error {
	initMetrics()
	reg := ctx.GetMetricsRegistry()
	if reg == nil {
		return nil
	}
	collectors := []prometheus.Collector{metrics.created, metrics.ended, metrics.duration, metrics.refused, metrics.running, metrics.active, metrics.stored, metrics.size, metrics.ready,
		metrics.storeDuration, metrics.failed, metrics.takeovers, metrics.storeUp}
	for _, c := range append(collectors, metrics.streams...) {
		if err := reg.Register(c); err != nil {
			if _, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); !ok {
				return err
			}
		}
	}
	return nil
}

// runningWorkers sums the workers of every open storage directory.
func runningWorkers() float64 {
	total := 0
	runtimes.Range(func(_, v any) bool {
		total += v.(pooledRuntime).rt.RunningWorkers()
		return true
	})
	return float64(total)
}

// openStreams sums the open streams of kind of every runtime.
func openStreams(kind string) float64 {
	total := 0
	runtimes.Range(func(_, v any) bool {
		total += v.(pooledRuntime).rt.OpenStreams(kind)
		return true
	})
	return float64(total)
}

// readyProbeTimeout bounds the readiness check of a scrape; each store's
// own probe gives up after 5 s.
const readyProbeTimeout = 10 * time.Second

// readyGauge is the readiness probe's verdict at the scrape: alerting on
// it needs no probe of its own.
func readyGauge() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), readyProbeTimeout)
	defer cancel()
	if readinessNow(ctx).Ready {
		return 1
	}
	return 0
}

// storeUpCollector reports store_up for each backend in use: a series per
// backend, not per store, so that the labels stay bounded whatever the
// number of stores; the admin API's health names the store at fault.
type storeUpCollector struct{ desc *prometheus.Desc }

func (c storeUpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect probes every store once, as the readiness probe does.
func (c storeUpCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), readyProbeTimeout)
	defer cancel()
	up := map[string]bool{}
	for _, nr := range pooledRuntimes() {
		h := nr.rt.Health(ctx)
		ok := h.Open && h.Reachable && h.Writable
		if prev, seen := up[nr.backend]; seen {
			ok = ok && prev
		}
		up[nr.backend] = ok
	}
	for backend, ok := range up {
		v := 0.0
		if ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, backend)
	}
}

// storeStatsMaxAge bounds how often the stores are counted: a scrape reads
// three gauges, and scrapers may be many, but counting walks the indexes.
const storeStatsMaxAge = 5 * time.Second

var storeStats struct {
	mu    sync.Mutex
	at    time.Time
	total task.StoreStats
}

// storeTotals sums the stats of every open storage directory, recounted at
// most every storeStatsMaxAge.
func storeTotals() task.StoreStats {
	storeStats.mu.Lock()
	defer storeStats.mu.Unlock()
	if !storeStats.at.IsZero() && time.Since(storeStats.at) < storeStatsMaxAge {
		return storeStats.total
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var total task.StoreStats
	runtimes.Range(func(_, v any) bool {
		if st, ok, err := v.(pooledRuntime).rt.StoreStats(ctx); ok && err == nil {
			total.Tasks += st.Tasks
			total.Active += st.Active
			total.Bytes += st.Bytes
		}
		return true
	})
	storeStats.at, storeStats.total = time.Now(), total
	return total
}

// observer feeds the collectors; it implements task.Observer.
type observer struct{}

func (observer) TaskCreated(era task.Era) { metrics.created.WithLabelValues(string(era)).Inc() }

func (observer) TaskEnded(era task.Era, status task.Status, age time.Duration) {
	metrics.ended.WithLabelValues(string(era), string(status)).Inc()
	metrics.duration.WithLabelValues(string(era), string(status)).Observe(age.Seconds())
}

func (observer) Refused(reason string) { metrics.refused.WithLabelValues(reason).Inc() }

func (observer) TaskFailed(era task.Era, reason task.FailReason) {
	metrics.failed.WithLabelValues(string(era), string(reason)).Inc()
}

func (observer) TakenOver(cause task.TakeoverCause) {
	metrics.takeovers.WithLabelValues(string(cause)).Inc()
}

// Interface guards
var (
	_ task.Observer    = observer{}
	_ task.RunObserver = observer{}
)
