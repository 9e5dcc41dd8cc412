package metrics

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// Config tunes Metrics. A nil *Config means defaults.
type Config struct {
	// Now is the clock of append latencies and of the age of pending
	// actions. Default time.Now.
	Now func() time.Time
	// Logger receives scrape failures (warn). Default slog.Default().
	Logger *slog.Logger
	// ScrapeTimeout bounds the store reads of one scrape. Default 5 s.
	ScrapeTimeout time.Duration
	// MaxLabelValues bounds the distinct values of the tool and model
	// labels; later values are counted as "other". Default 200.
	MaxLabelValues int
}

// Defaults.
const (
	DefaultScrapeTimeout  = 5 * time.Second
	DefaultMaxLabelValues = 200
)

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.ScrapeTimeout < 0 {
		return out, errors.New("metrics config: ScrapeTimeout is negative")
	}
	if out.MaxLabelValues < 0 {
		return out, errors.New("metrics config: MaxLabelValues is negative")
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.ScrapeTimeout == 0 {
		out.ScrapeTimeout = DefaultScrapeTimeout
	}
	if out.MaxLabelValues == 0 {
		out.MaxLabelValues = DefaultMaxLabelValues
	}
	return out, nil
}

// Histogram buckets, in seconds. Model calls take from a fraction of a
// second to minutes; tool calls from a millisecond (a file read) to many
// minutes (a build in the shell); a journal append from a fraction of a
// millisecond (SQLite) to a few (PostgreSQL over a network).
var (
	modelBuckets  = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640}
	toolBuckets   = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900}
	appendBuckets = []float64{0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
)

// Metrics is one node's metrics. Create it with New, write through the
// store Wrap returns, and serve Handler at /metrics.
type Metrics struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry

	steps         prometheus.Counter
	modelDuration *prometheus.HistogramVec
	tokens        *prometheus.CounterVec
	cost          *prometheus.CounterVec
	toolDuration  *prometheus.HistogramVec
	retries       *prometheus.CounterVec
	takeovers     prometheus.Counter
	webhooks      *prometheus.CounterVec
	appendLatency *prometheus.HistogramVec
	findings      *prometheus.CounterVec
	reviews       *prometheus.CounterVec

	tools, models *labelLimit
	// detectors bounds the detector label (a newer node's detectors are
	// counted too, up to a few).
	detectors *labelLimit
	calls     *inflight
}

// New returns the metrics of a node whose state gauges are read from st
// at each scrape. It panics on an invalid cfg (a wiring mistake).
func New(st store.Store, cfg *Config) *Metrics {
	if st == nil {
		panic("metrics: nil store")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		panic(err.Error())
	}
	m := &Metrics{
		cfg: c, log: c.Logger, reg: prometheus.NewRegistry(),
		steps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "longhaul_steps_total",
			Help: "Steps (model responses of the turn loop) this node's workers completed.",
		}),
		modelDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "longhaul_model_call_duration_seconds",
			Help:    "Latency of model calls made by this node (steps, compactions, acceptance checks), by provider, model and outcome (ok, error).",
			Buckets: modelBuckets,
		}, []string{"provider", "model", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhaul_model_tokens_total",
			Help: "Tokens of this node's model calls, by kind (input, cached_input, output, reasoning; cached_input is part of input, reasoning part of output), provider and model.",
		}, []string{"kind", "provider", "model"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhaul_model_cost_usd_total",
			Help: "Cost in US dollars of this node's model calls, by provider and model.",
		}, []string{"provider", "model"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "longhaul_tool_call_duration_seconds",
			Help:    "Latency of tool calls this node ran, by tool and outcome (ok, error); calls refused before running are not counted.",
			Buckets: toolBuckets,
		}, []string{"tool", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhaul_retries_total",
			Help: "Failed model and tool attempts this node tried again, by kind (model, tool) and name (the model or the tool).",
		}, []string{"kind", "name"}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "longhaul_lease_takeovers_total",
			Help: "Sessions this node claimed whose previous lease expired without being released (its worker died, stalled or was cut off; or this node's previous run).",
		}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhaul_webhook_deliveries_total",
			Help: "Webhook delivery attempts this node made, by outcome: delivered, retry (will be tried again), failed (gave up), disabled (410, or the target was disabled).",
		}, []string{"outcome"}),
		appendLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "longhaul_journal_append_duration_seconds",
			Help:    "Latency of this node's journal appends (op append or create), by outcome: ok, conflict, lease_lost, error.",
			Buckets: appendBuckets,
		}, []string{"op", "outcome"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhaul_monitor_findings_total",
			Help: "Findings of the trajectory monitor's detectors journaled by this node's workers (monitor.finding), by detector.",
		}, []string{"detector"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhaul_monitor_reviews_total",
			Help: "Reviews of the model monitor journaled by this node's workers (monitor.reviewed), by verdict: ok, warn, pause (a failed review is a pause).",
		}, []string{"verdict"}),
		detectors: newLabelLimit(maxDetectors),
		tools:     newLabelLimit(c.MaxLabelValues),
		models:    newLabelLimit(c.MaxLabelValues),
		calls:     newInflight(maxInflightCalls),
	}
	m.reg.MustRegister(
		m.steps, m.modelDuration, m.tokens, m.cost, m.toolDuration, m.retries,
		m.takeovers, m.webhooks, m.appendLatency, m.findings, m.reviews,
		&stateCollector{st: st, cfg: &m.cfg, log: m.log},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Registry returns the registry every metric is registered in (tests
// gather from it; an embedding program may add its own collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats, and
// in OpenMetrics to a scraper that asks for it (Prometheus does by
// default; without it, a scraper negotiating OpenMetrics falls back to the
// classic text format and loses exemplars and created timestamps). A
// scrape whose store reads fail still serves every other metric (the
// failure is logged).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          m.reg,
		EnableOpenMetrics: true,
	})
}
