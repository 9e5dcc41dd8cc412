package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The long run measures whether a session's steps cost the same late in
// it as early: one session of many steps, compaction on (a small context
// window, so it compacts every few dozen steps) and parked every
// longParkEvery steps (its turn ends and the session is idle, held by no
// worker, until the next turn's message resumes it from the store).

// longParkEvery is the steps of each turn of the long run.
const longParkEvery = 100

// longContextWindow is the long run's model context window, in tokens: a
// step adds some 30, so the session compacts every hundred steps or so, at
// the default threshold.
const longContextWindow = 6000

// longResumeSamples is how many resumes, early and late in the session,
// the long run takes the median of.
const longResumeSamples = 5

// LongResult is one long run.
type LongResult struct {
	Steps       int
	Turns       int
	Compactions int
	Elapsed     time.Duration
	// Fifths is the engine's cost of each fifth of the steps (the sum of
	// their per-step times, parks excluded), and Ratio the last one's over
	// the first one's.
	Fifths [5]time.Duration
	Ratio  float64
	// CPUFifths is the process's CPU time over the turns of each fifth
	// (their resumes included), and CPURatio the last one's over the
	// first one's: unlike wall times, what other work on the machine does
	// not bend it much. Zero where the CPU time cannot be read (not Linux).
	CPUFifths [5]time.Duration
	CPURatio  float64
	// ResumeFirst and ResumeLast are the time from the message that
	// resumes the parked session to its first model call: the median of
	// the first longResumeSamples parks, and of the last ones (a single
	// one is at the mercy of a busy machine); the P99 ones are the 99th
	// percentile of the same parks (of so few, their slowest).
	ResumeFirst, ResumeLast       time.Duration
	ResumeFirstP99, ResumeLastP99 time.Duration
}

// Long runs one session of cfg.Steps steps (default 1,000), parked every
// 100 steps with compaction on, and measures the cost of each fifth of it
// and of resuming it early and late. Sessions, Rounds and Nodes beyond the
// first are not used.
func Long(ctx context.Context, cfg Config) (*LongResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Steps <= 0 {
		cfg.Steps = 1000
	}
	if cfg.Steps < 2*longParkEvery {
		return nil, fmt.Errorf("bench: a long run needs at least %d steps (two parks' worth), got %d", 2*longParkEvery, cfg.Steps)
	}
	// One session: the plan may count its steps across turns, which the
	// position (shared with compaction calls) would not tell.
	made := 0
	m := &benchModel{next: func(*model.Request) *model.Response {
		made++
		if made%longParkEvery == 0 || made == cfg.Steps {
			return answer(fmt.Sprintf("parked after step %d", made))
		}
		return call("noop", map[string]any{"i": made})
	}}
	r, err := openWith(ctx, cfg, 4, rigExtras{providers: map[string]model.Provider{benchProvider: m}})
	if err != nil {
		return nil, err
	}
	defer r.close()
	eng := r.nodes[0].eng
	spec := &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: benchProvider, Name: "noop", ContextWindow: longContextWindow},
		Tools: []lt.ToolSpec{{Name: "noop"}}, MaxSteps: longParkEvery + 1,
	}
	start := time.Now()
	cpu := []time.Duration{cpuTime()} // at the start of each turn, and at the end
	s, err := eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: spec, Input: "work"})
	if err != nil {
		return nil, err
	}
	if err := waitIdle(ctx, eng, []string{s.ID}); err != nil {
		return nil, err
	}
	cpu = append(cpu, cpuTime())
	res := &LongResult{Steps: cfg.Steps, Turns: 1}
	var resumes []time.Duration
	for done := longParkEvery; done < cfg.Steps; done += longParkEvery {
		after, err := lastSeq(ctx, eng, s.ID)
		if err != nil {
			return nil, err
		}
		sent := time.Now()
		if _, err := eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "continue"}); err != nil {
			return nil, err
		}
		if err := waitIdle(ctx, eng, []string{s.ID}); err != nil {
			return nil, err
		}
		cpu = append(cpu, cpuTime())
		first, err := firstEventAfter(ctx, eng, s.ID, after, lt.EventModelRequested)
		if err != nil {
			return nil, err
		}
		resumes = append(resumes, first.Time.Sub(sent))
		res.Turns++
	}
	res.Elapsed = time.Since(start)
	k := min(longResumeSamples, len(resumes))
	res.ResumeFirst = percentile(slices.Clone(resumes[:k]), 0.5)
	res.ResumeLast = percentile(slices.Clone(resumes[len(resumes)-k:]), 0.5)
	res.ResumeFirstP99 = percentile(slices.Clone(resumes[:k]), 0.99)
	res.ResumeLastP99 = percentile(slices.Clone(resumes[len(resumes)-k:]), 0.99)
	gaps, compactions, err := turnStepGaps(ctx, eng, s.ID)
	if err != nil {
		return nil, err
	}
	res.Compactions = compactions
	for i, g := range gaps {
		res.Fifths[i*5/len(gaps)] += g
	}
	res.Ratio = float64(res.Fifths[4]) / float64(res.Fifths[0])
	turns := len(cpu) - 1
	for i := range turns {
		res.CPUFifths[i*5/turns] += cpu[i+1] - cpu[i]
	}
	if res.CPUFifths[0] > 0 {
		res.CPURatio = float64(res.CPUFifths[4]) / float64(res.CPUFifths[0])
	}
	return res, nil
}

// cpuTime returns the CPU time, user and system, the process has used so
// far (Linux), or 0.
func cpuTime() time.Duration {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// The command's name, field 2, may hold spaces: count the fields
	// after its closing parenthesis, from field 3 on.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0
	}
	// In clock ticks, which Linux counts at 100 a second for user space
	// (USER_HZ) whatever the kernel's own rate.
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func lastSeq(ctx context.Context, eng *engine.Engine, id string) (int64, error) {
	s, err := eng.GetSession(ctx, id)
	if err != nil {
		return 0, err
	}
	return s.LastEventSeq, nil
}

// firstEventAfter returns the session's first event of type typ after
// sequence number after.
func firstEventAfter(ctx context.Context, eng *engine.Engine, id string, after int64, typ string) (*lt.Event, error) {
	for {
		evs, err := eng.ListEvents(ctx, id, after, 1000)
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return nil, fmt.Errorf("bench: session %s has no %s after event %d", id, typ, after)
		}
		for i := range evs {
			if evs[i].Type == typ {
				return &evs[i], nil
			}
		}
		after = evs[len(evs)-1].Seq
	}
}

// turnStepGaps returns the time of each step of the session (from its
// model call, or its compaction's, to the next one or the turn's end),
// parks excluded, in order, and the number of compactions.
func turnStepGaps(ctx context.Context, eng *engine.Engine, id string) ([]time.Duration, int, error) {
	var gaps []time.Duration
	compactions := 0
	var last time.Time
	var after int64
	for {
		evs, err := eng.ListEvents(ctx, id, after, 1000)
		if err != nil {
			return nil, 0, err
		}
		if len(evs) == 0 {
			return gaps, compactions, nil
		}
		for _, ev := range evs {
			switch ev.Type {
			case lt.EventContextCompacted:
				compactions++
			case lt.EventModelRequested:
				var d lt.ModelRequestedData
				if err := json.Unmarshal(ev.Data, &d); err == nil && d.Purpose == "" && !last.IsZero() {
					gaps = append(gaps, ev.Time.Sub(last))
				}
				if d.Purpose == "" {
					last = ev.Time
				}
			case lt.EventTurnCompleted:
				if !last.IsZero() {
					gaps = append(gaps, ev.Time.Sub(last))
				}
				last = time.Time{}
			}
		}
		after = evs[len(evs)-1].Seq
	}
}

// PrintLong writes the long run's table.
func PrintLong(w io.Writer, res *LongResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "long session steps\tturns (parks+1)\tcompactions\t1st fifth\t2nd\t3rd\t4th\t5th\tlast/first\tresume p50, first parks\tp99\tlast parks p50\tp99\tCPU 1st fifth\tCPU 5th\tCPU last/first\t")
	f := res.Fifths
	us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f×\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f×\t\n", res.Steps, res.Turns, res.Compactions,
		ms(f[0]), ms(f[1]), ms(f[2]), ms(f[3]), ms(f[4]), res.Ratio,
		us(res.ResumeFirst), us(res.ResumeFirstP99), us(res.ResumeLast), us(res.ResumeLastP99),
		ms(res.CPUFifths[0]), ms(res.CPUFifths[4]), res.CPURatio)
	tw.Flush()
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
