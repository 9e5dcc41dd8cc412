package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// A system runs sessions: each runs steps agent steps durably and returns
// when the last one is journaled.
type system interface {
	// runSession runs one session of steps agent steps to its end.
	runSession(ctx context.Context, id string, steps int) error
	close() error
}

// stepClock records when every model call of a session starts, so the
// per-step cost (model call to next model call, or to the session's end)
// can be read as `longhaul bench` reads it from the journal.
type stepClock struct {
	mu    sync.Mutex
	times map[string][]time.Time
}

func newStepClock() *stepClock { return &stepClock{times: map[string][]time.Time{}} }

func (c *stepClock) mark(session string) {
	now := time.Now()
	c.mu.Lock()
	c.times[session] = append(c.times[session], now)
	c.mu.Unlock()
}

// gaps returns the time between consecutive marks of every session.
// A replayed step (recovery) marks nothing, since its function does not run.
func (c *stepClock) gaps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, ts := range c.times {
		for i := 1; i < len(ts); i++ {
			out = append(out, ts[i].Sub(ts[i-1]))
		}
	}
	return out
}

type result struct {
	sessions, steps int
	elapsed         time.Duration
	p50, p99        time.Duration
	rss             int64
}

type options struct {
	system, store, url, data  string
	steps, rounds, concurrent int
}

func main() {
	var o options
	flag.StringVar(&o.system, "system", "dbos", "the peer to run: dbos or river")
	flag.StringVar(&o.store, "store", "sqlite", "sqlite (a file in --data, synchronous=FULL) or postgres (a temporary schema of --url)")
	flag.StringVar(&o.url, "url", os.Getenv("LONGHAUL_TEST_POSTGRES"), "postgres:// URL of a database the benchmark may create a schema in (default: $LONGHAUL_TEST_POSTGRES)")
	flag.StringVar(&o.data, "data", "", "directory for the SQLite database (default: a temporary one, removed afterwards)")
	flag.IntVar(&o.steps, "steps", 10, "agent steps per session")
	flag.IntVar(&o.rounds, "rounds", 30, "sessions run one after another in the serial run")
	flag.IntVar(&o.concurrent, "concurrent", 64, "sessions run at once in the concurrent run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func (o *options) validate() error {
	switch {
	case o.system != "dbos" && o.system != "river":
		return fmt.Errorf("--system %q: want dbos or river", o.system)
	case o.store != "sqlite" && o.store != "postgres":
		return fmt.Errorf("--store %q: want sqlite or postgres", o.store)
	case o.store == "postgres" && !strings.HasPrefix(o.url, "postgres://") && !strings.HasPrefix(o.url, "postgresql://"):
		return errors.New("--url: want a postgres:// or postgresql:// URL with --store postgres (the value is not shown: it may hold a password)")
	case o.steps < 1:
		return fmt.Errorf("--steps %d: want 1 or more", o.steps)
	case o.rounds < 1:
		return fmt.Errorf("--rounds %d: want 1 or more", o.rounds)
	case o.concurrent < 1:
		return fmt.Errorf("--concurrent %d: want 1 or more", o.concurrent)
	}
	return nil
}

func run(ctx context.Context, w io.Writer, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	dir := o.data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "longhaul-peers-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	var where string
	measure := func(name string, sessions, rounds int) (*result, error) {
		st, err := openStore(ctx, o.store, o.url, filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		defer st.close()
		where = st.describe()
		clock := newStepClock()
		var sys system
		if o.system == "dbos" {
			sys, err = openDBOS(ctx, st, clock)
		} else {
			sys, err = openRiver(ctx, st, clock)
		}
		if err != nil {
			return nil, err
		}
		defer sys.close()
		return measureRuns(ctx, sys, clock, o.steps, sessions, rounds)
	}
	serial, err := measure("serial", 1, o.rounds)
	if err != nil {
		return fmt.Errorf("serial run: %w", err)
	}
	par, err := measure("concurrent", o.concurrent, 2)
	if err != nil {
		return fmt.Errorf("concurrent run: %w", err)
	}
	fmt.Fprintf(w, "system: %s\nstore: %s\n\n", describeSystem(o.system), where)
	printTable(w, []*result{serial, par})
	return nil
}

func describeSystem(name string) string {
	if name == "dbos" {
		return "DBOS Transact: a workflow per session, a step per model call and per tool call"
	}
	return "River: a job per session, a resumable step per model call and per tool call, each committed in its own transaction"
}

// measureRuns runs rounds batches of sessions concurrent sessions each, as
// internal/bench.Run does: a batch's sessions start together and the next
// batch starts when all have ended.
func measureRuns(ctx context.Context, sys system, clock *stepClock, steps, sessions, rounds int) (*result, error) {
	start := time.Now()
	for round := range rounds {
		errs := make([]error, sessions)
		var wg sync.WaitGroup
		for i := range sessions {
			wg.Go(func() {
				errs[i] = sys.runSession(ctx, fmt.Sprintf("bench-%d-%d", round, i), steps)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	elapsed := time.Since(start)
	gaps := clock.gaps()
	return &result{
		sessions: sessions * rounds, steps: sessions * rounds * steps, elapsed: elapsed,
		p50: percentile(gaps, 0.50), p99: percentile(gaps, 0.99), rss: rss(),
	}, nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// printTable writes the columns `longhaul bench` writes; commits per step
// are not counted ("-"), as `longhaul bench` shows them on PostgreSQL.
func printTable(w io.Writer, runs []*result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sessions\tsteps\tagent-steps/s\tp50 step\tp99 step\tcommits/step\tRSS MiB\t")
	for _, r := range runs {
		fmt.Fprintf(tw, "%d\t%d\t%.0f\t%s\t%s\t-\t%.1f\t\n", r.sessions, r.steps, float64(r.steps)/r.elapsed.Seconds(),
			r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), float64(r.rss)/(1<<20))
	}
	tw.Flush()
}

// rss returns the process's resident set size (Linux), or 0.
func rss() int64 {
	if runtime.GOOS != "linux" {
		return 0
	}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(rest); len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
