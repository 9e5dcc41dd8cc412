package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The active run measures many sessions working at once against a slow
// model: the engine must not be the bottleneck (agent-steps/s close to
// sessions / latency), must hold no goroutine for a session it does not
// run, and must fit them in little memory.

// ActiveResult is one active run.
type ActiveResult struct {
	Sessions int
	// Steps counts the agent steps completed (each a model call, which
	// takes the latency, and its tool calls), the final answers included.
	Steps          int
	Latency        time.Duration
	Elapsed        time.Duration
	StepsPerSecond float64
	// PeakRSSBytes and PeakGoroutines are the highest seen while the
	// sessions ran (sampled); GoroutinesBefore is before they started.
	PeakRSSBytes     int64
	PeakGoroutines   int
	GoroutinesBefore int
	// Created is how long creating the sessions took (inside Elapsed).
	// StepPeriod is the mean time from one of a session's step requests
	// to its next (the model's latency, the step's work and the wait for
	// its append), from the journal; SteadyStepsPerSecond the sum of the
	// sessions' rates at their own periods: what the node sustains while
	// they all work (0 when they did not all work at one time). The goal
	// is judged on StepsPerSecond, which counts the creations and the
	// sessions' first and last steps too.
	Created              time.Duration
	StepPeriod           time.Duration
	SteadyStepsPerSecond float64
	// CPU is the process's CPU time (user and system) over Elapsed, and
	// Allocs the heap allocations: what the engine costs per step,
	// which other work on the machine bends less than the rates.
	CPU    time.Duration
	Allocs uint64
	// CommitsPerStep and WriterBusy (the share of Elapsed the SQLite
	// writer spent running batches, fsyncs included) say how close the
	// single writer came to being the bottleneck (NaN on PostgreSQL).
	CommitsPerStep float64
	WriterBusy     float64
}

// activeSample is how often the active run samples RSS and goroutines.
const activeSample = 20 * time.Millisecond

// Active runs cfg.Sessions sessions (default 1) of cfg.Steps steps
// (default 10) at once against a model answering each call after latency,
// and measures agent-steps/s from the first session's creation to the last
// one's end, with the peak RSS and goroutine count. The engine's worker
// pool is cfg.Workers (default: one per session, as a node sized for the
// load would be). Rounds is not used.
func Active(ctx context.Context, cfg Config, latency time.Duration) (*ActiveResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if latency < 0 {
		return nil, fmt.Errorf("bench: model latency must not be negative, got %s", latency)
	}
	n := max(cfg.Sessions, 1)
	if cfg.Steps <= 0 {
		cfg.Steps = 10
	}
	if cfg.Workers <= 0 {
		cfg.Workers = n
	}
	m := &benchModel{latency: latency, next: noopPlan(cfg.Steps), stateless: true}
	// The poll interval is a server's: each call in flight also polls its
	// session for a cancel whose notice was lost, so at the rig's 50 ms a
	// thousand calls of a second would read 20,000 session rows a second,
	// which no server does.
	r, err := openWith(ctx, cfg, cfg.Workers, rigExtras{providers: map[string]model.Provider{benchProvider: m}, serverPoll: true})
	if err != nil {
		return nil, err
	}
	defer r.close()
	spec := &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: benchProvider, Name: "noop"},
		Tools: []lt.ToolSpec{{Name: "noop"}}, MaxSteps: cfg.Steps + 1,
	}
	before := runtime.NumGoroutine()
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	stats0 := r.sqliteStats()
	cpu0 := cpuTime()
	peaks := samplePeaks(activeSample)
	start := time.Now()
	ids, err := createSessions(ctx, r, n, spec, "benchmark")
	if err != nil {
		peaks.stop()
		return nil, err
	}
	created := time.Since(start)
	err = waitIdle(ctx, r.nodes[0].eng, ids)
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	stats1 := r.sqliteStats()
	peakRSS, peakG := peaks.stop()
	runtime.ReadMemStats(&mem1)
	if err != nil {
		return nil, err
	}
	// Counted after the clock stopped: a session that ended early (a stop
	// condition) would otherwise inflate the rate.
	var periods time.Duration
	var steady float64
	// Summed, the sessions' rates are what the node sustains only if the
	// sessions worked at the same time: from the last one's first step to
	// the first one's last (fewer workers than sessions run them in turn).
	var lastFirst, firstLast time.Time
	for _, id := range ids {
		times, err := stepTimes(ctx, r.nodes[0].eng, id)
		if err != nil {
			return nil, err
		}
		if len(times) != cfg.Steps {
			return nil, fmt.Errorf("bench: session %s took %d steps, want %d", id, len(times), cfg.Steps)
		}
		if n := len(times); n > 1 {
			period := times[n-1].Sub(times[0]) / time.Duration(n-1)
			periods += period
			steady += 1 / period.Seconds()
			if times[0].After(lastFirst) {
				lastFirst = times[0]
			}
			if firstLast.IsZero() || times[n-1].Before(firstLast) {
				firstLast = times[n-1]
			}
		}
	}
	total := n * cfg.Steps
	res := &ActiveResult{
		Sessions: n, Steps: total, Latency: latency, Elapsed: elapsed,
		StepsPerSecond: float64(total) / elapsed.Seconds(),
		PeakRSSBytes:   peakRSS, PeakGoroutines: peakG, GoroutinesBefore: before,
		Created: created, CPU: cpu, Allocs: mem1.Mallocs - mem0.Mallocs,
		CommitsPerStep: math.NaN(), WriterBusy: math.NaN(),
	}
	if cfg.Steps > 1 {
		res.StepPeriod = periods / time.Duration(n)
		if lastFirst.Before(firstLast) {
			res.SteadyStepsPerSecond = steady
		}
	}
	if stats0 != nil && stats1 != nil {
		res.CommitsPerStep = float64(stats1.Commits-stats0.Commits) / float64(total)
		res.WriterBusy = float64(stats1.Busy-stats0.Busy) / float64(elapsed)
	}
	return res, nil
}

// createSessions creates n sessions of spec at once, as independent
// clients would, on the rig's nodes in turn, and returns their ids.
func createSessions(ctx context.Context, r *rig, n int, spec *lt.AgentSpec, input string) ([]string, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := r.nodes[i%len(r.nodes)].eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: spec, Input: input})
			if err == nil {
				ids[i] = s.ID
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ids, nil
}

// peakSampler records the highest RSS and goroutine count seen.
type peakSampler struct {
	done    chan struct{}
	stopped chan struct{}
	rss     int64
	gor     int
}

func samplePeaks(every time.Duration) *peakSampler {
	p := &peakSampler{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			p.rss, p.gor = max(p.rss, rss()), max(p.gor, runtime.NumGoroutine())
			select {
			case <-p.done:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// stop ends the sampling (after one last sample) and returns the peaks.
func (p *peakSampler) stop() (rssBytes int64, goroutines int) {
	close(p.done)
	<-p.stopped
	return max(p.rss, rss()), max(p.gor, runtime.NumGoroutine())
}

// PrintActive writes the active run's table.
func PrintActive(w io.Writer, runs []*ActiveResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "active sessions\tmodel latency\tagent steps\telapsed\tagent-steps/s\tpeak RSS MiB\tgoroutines before\tpeak goroutines\t")
	for _, r := range runs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%.0f\t%.1f\t%d\t%d\t\n", r.Sessions, r.Latency, r.Steps,
			r.Elapsed.Round(time.Millisecond), r.StepsPerSecond, float64(r.PeakRSSBytes)/(1<<20), r.GoroutinesBefore, r.PeakGoroutines)
	}
	tw.Flush()
	// What the rate is made of: the creations inside the elapsed time,
	// the rate while every session was active, and the cost of a step.
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "creating sessions\tstep period\tsteady agent-steps/s\tCPU\tCPU per step\tallocs per step\tcommits per step\twriter busy\t")
	for _, r := range runs {
		period, steady := "-", "-"
		if r.StepPeriod > 0 {
			period = r.StepPeriod.Round(100 * time.Microsecond).String()
			if r.Latency > 0 {
				period += fmt.Sprintf(" (+%s)", (r.StepPeriod - r.Latency).Round(100*time.Microsecond))
			}
		}
		if r.SteadyStepsPerSecond > 0 {
			steady = fmt.Sprintf("%.0f", r.SteadyStepsPerSecond)
		}
		commits, busy := "-", "-" // not counted by this driver
		if !math.IsNaN(r.CommitsPerStep) {
			commits, busy = fmt.Sprintf("%.2f", r.CommitsPerStep), fmt.Sprintf("%.0f %%", 100*r.WriterBusy)
		}
		steps := float64(max(r.Steps, 1))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f ms\t%.0f\t%s\t%s\t\n", r.Created.Round(time.Millisecond), period, steady,
			r.CPU.Round(10*time.Millisecond), float64(r.CPU.Microseconds())/1000/steps, float64(r.Allocs)/steps, commits, busy)
	}
	tw.Flush()
}

// stepTimes returns when the session requested each of its steps' model
// calls (not a compaction's or a verification's), from its journal.
func stepTimes(ctx context.Context, eng *engine.Engine, id string) ([]time.Time, error) {
	evs, err := eng.ListEvents(ctx, id, 0, 10000)
	if err != nil {
		return nil, err
	}
	var times []time.Time
	for _, ev := range evs {
		if ev.Type != lt.EventModelRequested {
			continue
		}
		var d lt.ModelRequestedData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("bench: %s of session %s: %w", ev.Type, id, err)
		}
		if d.Purpose == "" {
			times = append(times, ev.Time)
		}
	}
	return times, nil
}
