package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/longhaul-dev/longhaul/internal/model"
	lhnode "github.com/longhaul-dev/longhaul/internal/node"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The watchers run measures the API's event stream with many subscribers
// on one session: a real node (the HTTP API as `longhaul serve` wires it)
// behind a loopback listener, and Go HTTP clients, each reading
// GET /v1/sessions/{id}/events/stream, while the session takes steps. An
// event's latency, for each subscriber, is from its append (the event's
// time, which the engine stamps as it appends) to that subscriber reading
// its frame.

// watchersStepLatency is the model's latency in the watchers run: the
// session's events come in bursts a step apart, as a real session's do,
// not in one backlog.
const watchersStepLatency = 20 * time.Millisecond

// watchersOpenTimeout bounds the wait for every subscriber's stream to
// open, and then for every one to read the last event.
const watchersOpenTimeout = 2 * time.Minute

// watchersReadBuffer is the size of each client's read buffers.
const watchersReadBuffer = 16 << 10

// WatchersResult is one watchers run.
type WatchersResult struct {
	Watchers int
	// Separate: the subscribers ran in a process of their own
	// (Config.ClientCommand), not in the server's.
	Separate bool
	// Events is the number of events each subscriber read; Samples the
	// latencies measured (Watchers × Events).
	Events, Samples int
	P50, P99, Max   time.Duration
	// FirstP50 is the median over the events of the latency to the
	// first subscriber that read each: the path from the append to the
	// stream (commit, notice, the feed's read) without the fan-out,
	// which is what P99 adds to it.
	FirstP50 time.Duration
	// CPUPerDelivery is the process's CPU time (user and system, the
	// clients' included) from the turn's start to the last subscriber's
	// last read, per sample: on a loaded machine it varies less than the
	// latencies. WritesPerDelivery is the write system calls in that
	// time per sample (about one per frame sent: fewer when frames are
	// batched), and ReadsPerDelivery the read system calls (the clients'
	// reads, one of which finds nothing yet, each time a client has
	// caught up). All are 0 where the process's counters cannot be read.
	// AllocsPerDelivery is the heap allocations in that time per sample.
	// The system calls and allocations do not depend on the machine's
	// load at all.
	//
	// With Separate, these count the server's process alone, and
	// ClientCPUPerDelivery is the client process's CPU time per sample,
	// from its streams' opening to its last read.
	CPUPerDelivery                      time.Duration
	WritesPerDelivery, ReadsPerDelivery float64
	AllocsPerDelivery                   float64
	ClientCPUPerDelivery                time.Duration
}

// Watchers runs a node in cfg.Dir on SQLite, subscribes watchers clients
// to one session's event stream over loopback, then runs a turn of
// cfg.Steps steps (default 20) and measures each event's latency from its
// append to each subscriber. The subscribers run in a process of their
// own when cfg.ClientCommand is set, else in this one. Sessions, Rounds,
// Nodes and StoreURL are not used.
func Watchers(ctx context.Context, cfg Config, watchers int) (_ *WatchersResult, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if watchers < 1 {
		return nil, fmt.Errorf("bench: watchers must be 1 or more, got %d", watchers)
	}
	if cfg.Steps <= 0 {
		cfg.Steps = 20
	}
	// The first turn answers at once, so the session exists and is idle
	// when the subscribers connect; the second takes the steps measured.
	m := &benchModel{latency: watchersStepLatency, next: func(req *model.Request) *model.Response {
		if req.Position == 0 || req.Position > cfg.Steps {
			return answer("done")
		}
		return call("noop", map[string]any{"i": req.Position})
	}}
	n, err := lhnode.Open(ctx, &lhnode.Config{
		DataDir: cfg.Dir, Logger: slog.New(slog.DiscardHandler), Sandbox: lhnode.SandboxLocal,
		Providers: map[string]model.Provider{benchProvider: m}, Tools: []tool.Tool{noop{}},
	})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, n.Close(context.WithoutCancel(ctx))) }()
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: n.API, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		n.API.Shutdown() // ends the open streams, so the server's close does not wait on them
		_ = srv.Close()
	}()

	eng := n.Engine
	spec := &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: benchProvider, Name: "noop"},
		Tools: []lt.ToolSpec{{Name: "noop"}}, MaxSteps: cfg.Steps + 2,
	}
	s, err := eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: spec, Input: "ready"})
	if err != nil {
		return nil, err
	}
	if err := waitIdle(ctx, eng, []string{s.ID}); err != nil {
		return nil, err
	}
	start, err := lastSeq(ctx, eng, s.ID)
	if err != nil {
		return nil, err
	}

	url := fmt.Sprintf("http://%s/v1/sessions/%s/events/stream?after=%d", ln.Addr(), s.ID, start)
	var clients watcherClients = &inProcessClients{}
	if cfg.ClientCommand != nil {
		pc, err := newProcessClients(ctx, cfg.ClientCommand)
		if err != nil {
			return nil, err
		}
		clients = pc
	}
	defer clients.close()
	// Room for every receipt of the turn (a step journals about 6 events).
	if err := clients.open(ctx, url, start, watchers, 8*cfg.Steps+16); err != nil {
		return nil, err
	}

	before := readProcCounters()
	if _, err := eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "work"}); err != nil {
		return nil, err
	}
	if err := waitIdle(ctx, eng, []string{s.ID}); err != nil {
		return nil, err
	}
	end, err := lastSeq(ctx, eng, s.ID)
	if err != nil {
		return nil, err
	}
	received, clientUsed, err := clients.finish(ctx, end)
	if err != nil {
		return nil, err
	}
	used := readProcCounters().since(before)
	clients.close()

	evs, err := eng.ListEvents(ctx, s.ID, start, int(end-start))
	if err != nil {
		return nil, err
	}
	appended := make(map[int64]time.Time, len(evs))
	for _, ev := range evs {
		appended[ev.Seq] = ev.Time
	}
	var lat []time.Duration
	first := make([]time.Duration, end-start)
	for _, rcs := range received {
		for i, rc := range rcs {
			if rc.seq != start+int64(i)+1 {
				return nil, fmt.Errorf("bench: a subscriber read event %d where %d was due: the stream lost or reordered events", rc.seq, start+int64(i)+1)
			}
			at, ok := appended[rc.seq]
			if !ok {
				return nil, fmt.Errorf("bench: a subscriber read event %d, which the journal does not have", rc.seq)
			}
			d := rc.at.Sub(at)
			lat = append(lat, d)
			if first[i] == 0 || d < first[i] {
				first[i] = d
			}
		}
	}
	if len(lat) == 0 {
		return nil, errors.New("bench: the subscribers read no event")
	}
	res := &WatchersResult{Watchers: watchers, Events: int(end - start), Samples: len(lat), Separate: cfg.ClientCommand != nil}
	res.P50, res.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	res.Max = lat[len(lat)-1] // percentile sorted them
	res.FirstP50 = percentile(first, 0.50)
	res.CPUPerDelivery = used.cpu / time.Duration(len(lat))
	res.WritesPerDelivery = float64(used.writes) / float64(len(lat))
	res.ReadsPerDelivery = float64(used.reads) / float64(len(lat))
	res.AllocsPerDelivery = float64(used.allocs) / float64(len(lat))
	res.ClientCPUPerDelivery = clientUsed.cpu / time.Duration(len(lat))
	return res, nil
}

// waitGroupWithin waits for wg, at most d.
func waitGroupWithin(ctx context.Context, wg *sync.WaitGroup, d time.Duration) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("not all within %s", d)
	}
}

// subscriber is one client of the event stream.
type subscriber struct {
	after int64
	// last is the seq of the last frame read.
	last     atomic.Int64
	received []receipt
	mu       sync.Mutex
	err      error
}

// receipt is when a subscriber read an event's frame.
type receipt struct {
	seq int64
	at  time.Time
}

func (s *subscriber) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *subscriber) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// follow reads the stream until ctx ends, noting when each frame's id line
// arrives; opened is called once the stream's headers are in (or it
// failed).
func (s *subscriber) follow(ctx context.Context, client *http.Client, url string, opened func()) {
	once := sync.OnceFunc(opened)
	defer once()
	s.last.Store(s.after)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		s.fail(err)
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		s.fail(fmt.Errorf("bench: subscribe: %w", err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.fail(fmt.Errorf("bench: subscribe: status %s", resp.Status))
		return
	}
	once()
	var lines lineSplitter
	buf := make([]byte, watchersReadBuffer)
	for {
		n, err := resp.Body.Read(buf)
		// One clock reading per read: the frames a read returns all
		// arrived by then (the client's cost is the server's too, on
		// the same cores).
		at := time.Now()
		lines.split(buf[:n], func(line []byte) bool {
			id, ok := bytes.CutPrefix(line, []byte("id: "))
			if !ok {
				return true
			}
			seq, perr := strconv.ParseInt(string(bytes.TrimSpace(id)), 10, 64)
			if perr != nil {
				s.fail(fmt.Errorf("bench: a frame's id %q: %w", id, perr))
				return false
			}
			s.received = append(s.received, receipt{seq: seq, at: at})
			s.last.Store(seq)
			return true
		})
		if s.failure() != nil {
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				s.fail(fmt.Errorf("bench: read the stream: %w", err))
			}
			return
		}
	}
}

// lineSplitter cuts a stream read in pieces into lines. It keeps the start
// of a line a read cut, up to watchersLineKeep bytes: the lines looked at
// (a frame's id) are short, and a longer one (an event's data) is skipped
// to its end.
type lineSplitter struct {
	partial []byte
	// long: the line being read is longer than watchersLineKeep.
	long bool
}

// watchersLineKeep is the longest start of a line that lineSplitter keeps
// across reads.
const watchersLineKeep = 256

// split calls line with each line that p completes (without its "\n"),
// but for a line longer than watchersLineKeep that a read cut, until line
// returns false.
func (l *lineSplitter) split(p []byte, line func([]byte) bool) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.hold(p)
			return
		}
		whole := p[:i]
		if l.long {
			whole = nil // its start was not kept: not a line looked at
		} else if len(l.partial) > 0 {
			whole = append(l.partial, whole...)
		}
		l.partial, l.long = l.partial[:0], false
		p = p[i+1:]
		if whole != nil && !line(whole) {
			return
		}
	}
}

// hold keeps p, the start of a line, unless the line is too long to be one
// looked at.
func (l *lineSplitter) hold(p []byte) {
	if l.long || len(l.partial)+len(p) > watchersLineKeep {
		l.long = true
		return
	}
	l.partial = append(l.partial, p...)
}

// PrintWatchers writes the watchers runs' table.
func PrintWatchers(w io.Writer, runs []*WatchersResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "watchers\tclients\tevents\tsamples\tp50 append→read\tp99\tmax\tp50 to the first\tserver CPU/sample\twrites/sample\treads/sample\tallocs/sample\tclient CPU/sample\t")
	for _, r := range runs {
		where, clientCPU := "in-process", "(in server's)"
		if r.Separate {
			where, clientCPU = "own process", r.ClientCPUPerDelivery.Round(10*time.Nanosecond).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%s\t\n", r.Watchers, where, r.Events, r.Samples,
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond), r.FirstP50.Round(time.Microsecond),
			r.CPUPerDelivery.Round(10*time.Nanosecond), r.WritesPerDelivery, r.ReadsPerDelivery, r.AllocsPerDelivery, clientCPU)
	}
	tw.Flush()
}

// procCounters are the process's CPU time, read and write system calls
// and heap allocations so far.
type procCounters struct {
	cpu                   time.Duration
	writes, reads, allocs int64
}

// readProcCounters reads the process's counters from Linux's /proc (zero
// where they cannot be read) and the Go runtime. The CPU time counts in the kernel's clock
// ticks, 10 ms: a turn's is hundreds of them.
func readProcCounters() procCounters {
	var c procCounters
	if data, err := os.ReadFile("/proc/self/stat"); err == nil {
		// After the command's name (in parentheses): state, then ppid …;
		// utime and stime are the 12th and 13th fields from there.
		if _, rest, ok := bytes.Cut(data, []byte(") ")); ok {
			if f := strings.Fields(string(rest)); len(f) > 12 {
				utime, _ := strconv.ParseInt(f[11], 10, 64)
				stime, _ := strconv.ParseInt(f[12], 10, 64)
				c.cpu = time.Duration(utime+stime) * (time.Second / clockTicksPerSecond)
			}
		}
	}
	if data, err := os.ReadFile("/proc/self/io"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "syscw: "); ok {
				c.writes, _ = strconv.ParseInt(v, 10, 64)
			}
			if v, ok := strings.CutPrefix(line, "syscr: "); ok {
				c.reads, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	c.allocs = int64(ms.Mallocs)
	return c
}

// clockTicksPerSecond is Linux's USER_HZ, the unit of /proc's CPU times
// (100 on every architecture Go supports).
const clockTicksPerSecond = 100

// since is what was counted from before to c.
func (c procCounters) since(before procCounters) procCounters {
	return procCounters{cpu: c.cpu - before.cpu, writes: c.writes - before.writes, reads: c.reads - before.reads, allocs: c.allocs - before.allocs}
}
