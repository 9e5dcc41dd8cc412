package otelexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Source is what the exporter reads: the journal (only event types, turn
// ids and worker ids are used, so payloads may be blob stubs) and the trace
// derived from it. The engine implements it.
type Source interface {
	ListEvents(ctx context.Context, sessionID string, after int64, limit int) ([]lt.Event, error)
	SessionTrace(ctx context.Context, id string, includeSubagents bool) (*lt.Trace, error)
}

// Notifier tells the exporter that a session's journal grew (the store's
// notifications: store.Store implements it).
type Notifier interface {
	Subscribe(ctx context.Context) (<-chan store.Notification, func())
}

// OTLP protocols (the values of OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTPProtobuf = "http/protobuf"
	ProtocolHTTPJSON     = "http/json"
	ProtocolGRPC         = "grpc"
)

// Config configures an Exporter.
type Config struct {
	// NodeID is this node's id (the engine's): the exporter sends the turns
	// this node ended. Required.
	NodeID string
	// Endpoint is the collector's base URL, like
	// OTEL_EXPORTER_OTLP_ENDPOINT: for HTTP, "/v1/traces" is added to its
	// path (unless it already ends so); for gRPC, its host and port are
	// used, without TLS when the scheme is http. Default "": the
	// exporter's own configuration from OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// or OTEL_EXPORTER_OTLP_ENDPOINT (then localhost:4318, or 4317 for
	// gRPC).
	Endpoint string
	// Protocol is http/protobuf, http/json or grpc. Default "": HTTP, with
	// the encoding OTEL_EXPORTER_OTLP_PROTOCOL names (protobuf unless it
	// says http/json).
	Protocol string
	// ServiceName is the service.name resource attribute (OTEL_SERVICE_NAME
	// and OTEL_RESOURCE_ATTRIBUTES, read by the SDK, take precedence).
	// Default "longhaul".
	ServiceName string
	// IdleAfter is how long a session's cursor is kept without new events.
	// Default 10 minutes.
	IdleAfter time.Duration
	// MaxSessions bounds the cursors kept; past it the least recently used
	// is forgotten. Default 10,000.
	MaxSessions int
	// SweepInterval is how often idle cursors are forgotten. Default 1
	// minute.
	SweepInterval time.Duration
	// Logger receives export failures (warn) and exports (debug). Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock of cursors and of the start horizon. Default
	// time.Now.
	Now func() time.Time
}

// Defaults.
const (
	DefaultServiceName   = "longhaul"
	DefaultIdleAfter     = 10 * time.Minute
	DefaultMaxSessions   = 10000
	DefaultSweepInterval = time.Minute
)

// eventPage is how many events one journal read takes.
const eventPage = 500

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if strings.TrimSpace(out.NodeID) == "" {
		return out, errors.New("otel export config: NodeID is required")
	}
	switch out.Protocol {
	case "", ProtocolHTTPProtobuf, ProtocolHTTPJSON, ProtocolGRPC:
	default:
		return out, fmt.Errorf("otel export config: Protocol %q: want %s, %s or %s", out.Protocol, ProtocolHTTPProtobuf, ProtocolHTTPJSON, ProtocolGRPC)
	}
	if out.Endpoint != "" {
		u, err := url.Parse(out.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return out, fmt.Errorf("otel export config: Endpoint %q: want an http:// or https:// URL with a host, and no query", out.Endpoint)
		}
	}
	if out.IdleAfter < 0 || out.MaxSessions < 0 || out.SweepInterval < 0 {
		return out, errors.New("otel export config: IdleAfter, MaxSessions and SweepInterval must not be negative")
	}
	if out.ServiceName == "" {
		out.ServiceName = DefaultServiceName
	}
	if out.IdleAfter == 0 {
		out.IdleAfter = DefaultIdleAfter
	}
	if out.MaxSessions == 0 {
		out.MaxSessions = DefaultMaxSessions
	}
	if out.SweepInterval == 0 {
		out.SweepInterval = DefaultSweepInterval
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out, nil
}

// Exporter follows the journal of every session and exports each turn this
// node ends as one OpenTelemetry trace.
type Exporter struct {
	src   Source
	notes Notifier
	cfg   Config
	log   *slog.Logger

	exp    sdktrace.SpanExporter
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	col    *collector

	// pending holds, per session, the last seq notified and not yet read;
	// wake tells the worker there is some.
	mu      sync.Mutex
	pending map[string]int64
	wake    chan struct{}

	// Owned by the worker goroutine.
	cursors map[string]*cursor
	uses    uint64
	// horizon: a session read from its start (first seen, or seen again
	// after its cursor was forgotten) exports only turns that ended after
	// it.
	horizon time.Time

	exported, skipped, failed, tracked atomic.Int64

	started atomic.Bool
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// cursor is how far the exporter read one session's journal.
type cursor struct {
	seq     int64
	touched time.Time
	// used orders cursors by their last use, for evictOldest (times can
	// tie).
	used uint64
	last time.Time // time of the last event read
	// owners is the worker id of each unfinished turn's latest event from
	// a worker: who ended a turn that the API ended.
	owners map[string]string
}

// Stats counts turn ends the exporter saw.
type Stats struct {
	// Sessions is how many sessions' cursors are kept.
	Sessions int64
	// Exported: sent to the collector.
	Exported int64
	// Skipped: ended by another node, or before this exporter's horizon.
	Skipped int64
	// Failed: the collector did not take them (logged).
	Failed int64
}

// New builds an Exporter; nothing is read or sent before Start.
func New(ctx context.Context, src Source, notes Notifier, cfg *Config) (*Exporter, error) {
	if src == nil || notes == nil {
		return nil, errors.New("otel export: nil Source or Notifier")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	exp, err := newSpanExporter(ctx, &c)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", c.ServiceName),
			attribute.String("service.instance.id", c.NodeID),
		),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("otel export resource: %w", err)
	}
	col := &collector{}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(derivedIDs{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(col),
		// A turn's tree can be wide; the defaults (128) fit any one span.
		sdktrace.WithSpanLimits(sdktrace.NewSpanLimits()),
	)
	return &Exporter{
		src: src, notes: notes, cfg: c, log: c.Logger,
		exp: exp, tp: tp, tracer: tp.Tracer("github.com/longhaul-dev/longhaul/internal/otelexport"), col: col,
		pending: map[string]int64{}, wake: make(chan struct{}, 1),
		cursors: map[string]*cursor{},
		stop:    make(chan struct{}), done: make(chan struct{}),
	}, nil
}

func newSpanExporter(ctx context.Context, c *Config) (sdktrace.SpanExporter, error) {
	var u *url.URL
	if c.Endpoint != "" {
		u, _ = url.Parse(c.Endpoint) // checked by withDefaults
	}
	if c.Protocol == ProtocolGRPC {
		var opts []otlptracegrpc.Option
		if u != nil {
			opts = append(opts, otlptracegrpc.WithEndpoint(u.Host))
			if u.Scheme == "http" {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("otlp grpc exporter: %w", err)
		}
		return exp, nil
	}
	var opts []otlptracehttp.Option
	if u != nil {
		v := *u
		if !strings.HasSuffix(v.Path, "/v1/traces") {
			v.Path = strings.TrimSuffix(v.Path, "/") + "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(v.String()))
	}
	switch c.Protocol {
	case ProtocolHTTPProtobuf:
		opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf))
	case ProtocolHTTPJSON:
		opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp http exporter: %w", err)
	}
	return exp, nil
}

// Start subscribes to the store's notifications and starts following
// journals. Turns that ended before Start are not exported.
func (x *Exporter) Start(ctx context.Context) error {
	if !x.started.CompareAndSwap(false, true) {
		return errors.New("otel export: already started")
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ch, unsubscribe := x.notes.Subscribe(ctx)
	x.horizon = x.cfg.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		x.receive(ch)
	}()
	go func() {
		defer wg.Done()
		x.work(ctx)
	}()
	go func() {
		<-x.stop
		unsubscribe()
		cancel()
		wg.Wait()
		close(x.done)
	}()
	return nil
}

// Stop stops following journals (an export under way finishes first, or
// ends with ctx) and shuts the OTLP exporter down.
func (x *Exporter) Stop(ctx context.Context) error {
	x.once.Do(func() { close(x.stop) })
	if x.started.Load() {
		select {
		case <-x.done:
		case <-ctx.Done():
			return fmt.Errorf("stop otel export: %w", ctx.Err())
		}
	}
	return errors.Join(x.tp.Shutdown(ctx), x.exp.Shutdown(ctx))
}

// Stats returns how many turn ends were exported, skipped and failed.
func (x *Exporter) Stats() Stats {
	return Stats{Sessions: x.tracked.Load(), Exported: x.exported.Load(), Skipped: x.skipped.Load(), Failed: x.failed.Load()}
}

// receive folds notifications into pending at once, so the store's
// notifications (dropped when a subscriber lags) are never held up by an
// export.
func (x *Exporter) receive(ch <-chan store.Notification) {
	for n := range ch {
		if n.Kind != store.KindEvents || n.SessionID == "" {
			continue
		}
		x.mu.Lock()
		if n.Seq > x.pending[n.SessionID] {
			x.pending[n.SessionID] = n.Seq
		}
		x.mu.Unlock()
		select {
		case x.wake <- struct{}{}:
		default:
		}
	}
}

func (x *Exporter) work(ctx context.Context) {
	tick := time.NewTicker(x.cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			x.sweep()
			continue
		case <-x.wake:
		}
		x.mu.Lock()
		batch := x.pending
		x.pending = map[string]int64{}
		x.mu.Unlock()
		ids := make([]string, 0, len(batch))
		for id := range batch {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			if ctx.Err() != nil {
				return
			}
			x.follow(ctx, id, batch[id])
		}
	}
}

// follow reads a session's journal from its cursor up to seq and exports
// the turns this node ended in it.
func (x *Exporter) follow(ctx context.Context, sessionID string, seq int64) {
	c := x.cursors[sessionID]
	fresh := c == nil
	if fresh {
		c = &cursor{owners: map[string]string{}}
	}
	var ends []lt.Event
	for c.seq < seq {
		evs, err := x.src.ListEvents(ctx, sessionID, c.seq, eventPage)
		if err != nil {
			if ctx.Err() == nil {
				x.log.Warn("otel export: read journal", "session_id", sessionID, "err", err)
			}
			break
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			c.seq, c.last = ev.Seq, ev.Time
			switch ev.Type {
			case lt.EventTurnCompleted, lt.EventTurnFailed, lt.EventTurnCancelled:
				owner := ev.WorkerID
				if owner == "" {
					owner = c.owners[ev.TurnID] // ended through the API
				}
				delete(c.owners, ev.TurnID)
				if owner == x.cfg.NodeID && ev.TurnID != "" && (!fresh || !ev.Time.Before(x.horizon)) {
					ends = append(ends, ev)
				} else {
					x.skipped.Add(1)
				}
			default:
				if ev.TurnID != "" && ev.WorkerID != "" {
					c.owners[ev.TurnID] = ev.WorkerID
				}
			}
		}
	}
	x.uses++
	c.touched, c.used = x.cfg.Now(), x.uses
	x.cursors[sessionID] = c
	if len(x.cursors) > x.cfg.MaxSessions {
		x.evictOldest()
	}
	x.tracked.Store(int64(len(x.cursors)))
	for _, ev := range ends {
		x.export(ctx, sessionID, ev.TurnID)
	}
}

// export sends one turn's trace.
func (x *Exporter) export(ctx context.Context, sessionID, turnID string) {
	tr, err := x.src.SessionTrace(ctx, sessionID, false)
	if err != nil {
		x.failed.Add(1)
		x.log.Warn("otel export: derive trace", "session_id", sessionID, "turn_id", turnID, "err", err)
		return
	}
	i := slices.IndexFunc(tr.Spans, func(s lt.Span) bool { return s.ID == turnID })
	if i < 0 {
		x.failed.Add(1)
		x.log.Warn("otel export: the trace has no span for the turn", "session_id", sessionID, "turn_id", turnID)
		return
	}
	record(x.tracer, tr, tr.Spans[i])
	spans := x.col.take()
	if err := x.exp.ExportSpans(ctx, spans); err != nil {
		x.failed.Add(1)
		x.log.Warn("otel export: send trace", "session_id", sessionID, "turn_id", turnID, "spans", len(spans), "err", err)
		return
	}
	x.exported.Add(1)
	x.log.Debug("otel export: sent trace", "session_id", sessionID, "turn_id", turnID, "spans", len(spans),
		"trace_id", TraceID(sessionID, turnID).String())
}

// sweep forgets the cursors of idle sessions. Their turns ended before
// the time of their last event, so the horizon moves there: a session seen
// again is not exported twice.
func (x *Exporter) sweep() {
	now := x.cfg.Now()
	for id, c := range x.cursors {
		if now.Sub(c.touched) < x.cfg.IdleAfter {
			continue
		}
		if c.last.After(x.horizon) {
			x.horizon = c.last
		}
		delete(x.cursors, id)
	}
	x.tracked.Store(int64(len(x.cursors)))
}

// evictOldest forgets the least recently used cursor (more sessions than
// MaxSessions are active). The horizon stays: if that session comes back,
// turns it ended since the horizon may be exported again, with the same
// ids (at least once, never lost for this).
func (x *Exporter) evictOldest() {
	var oldest string
	var used uint64
	for id, c := range x.cursors {
		if oldest == "" || c.used < used {
			oldest, used = id, c.used
		}
	}
	delete(x.cursors, oldest)
}
