package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"
)

// The watchers run's clients read the streams either in the run's own
// process (the server's), where their reads compete with the server inside
// one Go runtime and its counters cannot tell the two apart, or in a
// process of their own: the bench binary re-executed in its client mode
// (ServeWatcherClients), which the run drives over the child's standard
// input and output. The child reports, for each subscriber, each frame's
// seq and the wall-clock time (CLOCK_REALTIME, in Unix nanoseconds) at
// which its read returned; the run compares it with the event's append
// time, which the engine stamps from the same machine's wall clock and the
// store keeps to the microsecond.

// watcherClients is where a watchers run's subscribers run.
type watcherClients interface {
	// open subscribes n clients to url (each reading the frames after
	// seq after) and returns once every stream's headers are in.
	open(ctx context.Context, url string, after int64, n, capacity int) error
	// finish waits until every client has read up to seq end, stops them
	// and returns what each read, and what the clients cost from open's
	// return to the last read (zero in the run's own process, where the
	// run's counters count them).
	finish(ctx context.Context, end int64) ([][]receipt, procCounters, error)
	// close stops the clients (after finish, or on an error).
	close()
}

// inProcessClients runs the subscribers as goroutines of the run's process.
type inProcessClients struct {
	client *http.Client
	subs   []*subscriber
	stop   context.CancelFunc
	g      *followGroup
}

func (c *inProcessClients) open(ctx context.Context, url string, after int64, n, capacity int) error {
	c.subs, c.client, c.stop, c.g = followAll(ctx, url, after, n, capacity)
	return waitOpened(ctx, c.subs, c.g)
}

func (c *inProcessClients) finish(ctx context.Context, end int64) ([][]receipt, procCounters, error) {
	if err := waitCaughtUp(ctx, c.subs, end); err != nil {
		return nil, procCounters{}, err
	}
	c.close()
	out := make([][]receipt, len(c.subs))
	for i, s := range c.subs {
		out[i] = s.received
	}
	return out, procCounters{}, nil
}

func (c *inProcessClients) close() {
	if c.stop != nil {
		c.stop()
		c.g.wg.Wait()
		c.client.CloseIdleConnections()
		c.stop = nil
	}
}

// followGroup counts the subscribers opened and running.
type followGroup struct {
	opened, wg sync.WaitGroup
}

// followAll starts n subscribers of url; they run until stop is called.
func followAll(ctx context.Context, url string, after int64, n, capacity int) ([]*subscriber, *http.Client, context.CancelFunc, *followGroup) {
	// The clients read a backlog in few system calls (the default buffer
	// is 4 KiB), so that they cost the run as little as they can.
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: n, DisableCompression: true, ReadBufferSize: watchersReadBuffer,
	}}
	wctx, stop := context.WithCancel(ctx)
	subs := make([]*subscriber, n)
	g := &followGroup{}
	for i := range subs {
		// Room for every receipt of the turn, so that the clients'
		// appends do not make garbage.
		subs[i] = &subscriber{after: after, received: make([]receipt, 0, capacity)}
		g.opened.Add(1)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			subs[i].follow(wctx, client, url, g.opened.Done)
		}()
	}
	return subs, client, stop, g
}

// waitOpened waits for every subscriber's stream to open.
func waitOpened(ctx context.Context, subs []*subscriber, g *followGroup) error {
	if err := waitGroupWithin(ctx, &g.opened, watchersOpenTimeout); err != nil {
		return fmt.Errorf("bench: waiting for the subscribers' streams to open: %w", err)
	}
	for _, sub := range subs {
		if err := sub.failure(); err != nil {
			return err
		}
	}
	return nil
}

// waitCaughtUp waits until every subscriber has read up to seq end.
func waitCaughtUp(ctx context.Context, subs []*subscriber, end int64) error {
	deadline := time.Now().Add(watchersOpenTimeout)
	for _, sub := range subs {
		for sub.last.Load() < end {
			if err := sub.failure(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("bench: a subscriber read up to event %d of %d within %s", sub.last.Load(), end, watchersOpenTimeout)
			}
			time.Sleep(time.Millisecond) // poll: the bench's own wait, not a measurement
		}
	}
	return nil
}

// The messages between a run and its client process, one JSON object a
// line: the run sends clientsStart, the child answers clientsOpened once
// every stream is open; after the turn the run sends clientsEnd, and the
// child answers clientsDone once every client has read up to it, and
// exits when its input ends.
type (
	clientsStart struct {
		URL      string `json:"url"`
		After    int64  `json:"after"`
		Watchers int    `json:"watchers"`
		Capacity int    `json:"capacity"`
	}
	clientsOpened struct {
		Error string `json:"error,omitempty"`
	}
	clientsEnd struct {
		End int64 `json:"end"`
	}
	clientsDone struct {
		Error string `json:"error,omitempty"`
		// Seqs and Times hold, for each subscriber, the seq of each
		// frame read and the Unix nanoseconds of the read that brought it.
		Seqs  [][]int64 `json:"seqs,omitempty"`
		Times [][]int64 `json:"times,omitempty"`
		// CPUNanos, Writes and Reads are the child's CPU time and system
		// calls from the streams' opening to the last read.
		CPUNanos      int64 `json:"cpu_ns"`
		Writes, Reads int64
	}
)

// ServeWatcherClients is the watchers run's client process: it reads the
// run's messages from in and answers on out (see watcherClients). The
// bench binary runs it in a hidden mode, re-executed by the run.
func ServeWatcherClients(ctx context.Context, in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	enc := json.NewEncoder(out)
	var start clientsStart
	if err := dec.Decode(&start); err != nil {
		return fmt.Errorf("bench clients: read the start: %w", err)
	}
	if start.Watchers < 1 || start.URL == "" {
		return fmt.Errorf("bench clients: want a url and 1 or more watchers, got %q and %d", start.URL, start.Watchers)
	}
	subs, client, stop, g := followAll(ctx, start.URL, start.After, start.Watchers, start.Capacity)
	defer func() {
		stop()
		g.wg.Wait()
		client.CloseIdleConnections()
	}()
	if err := waitOpened(ctx, subs, g); err != nil {
		return enc.Encode(clientsOpened{Error: err.Error()})
	}
	before := readProcCounters()
	if err := enc.Encode(clientsOpened{}); err != nil {
		return err
	}
	var end clientsEnd
	if err := dec.Decode(&end); err != nil {
		return fmt.Errorf("bench clients: read the end: %w", err)
	}
	if err := waitCaughtUp(ctx, subs, end.End); err != nil {
		return enc.Encode(clientsDone{Error: err.Error()})
	}
	used := readProcCounters().since(before)
	stop()
	g.wg.Wait()
	done := clientsDone{
		Seqs: make([][]int64, len(subs)), Times: make([][]int64, len(subs)),
		CPUNanos: int64(used.cpu), Writes: used.writes, Reads: used.reads,
	}
	for i, s := range subs {
		done.Seqs[i] = make([]int64, len(s.received))
		done.Times[i] = make([]int64, len(s.received))
		for j, rc := range s.received {
			done.Seqs[i][j], done.Times[i][j] = rc.seq, rc.at.UnixNano()
		}
	}
	if err := enc.Encode(done); err != nil {
		return err
	}
	// The run closes the input once it has read the answer.
	_, _ = io.Copy(io.Discard, in)
	return nil
}

// processClients runs the subscribers in a child process.
type processClients struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	dec *json.Decoder
}

func newProcessClients(ctx context.Context, command func(context.Context) *exec.Cmd) (*processClients, error) {
	cmd := command(ctx)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start the client process: %w", err)
	}
	return &processClients{cmd: cmd, in: in, dec: json.NewDecoder(bufio.NewReaderSize(outR, 1<<20))}, nil
}

func (c *processClients) open(ctx context.Context, url string, after int64, n, capacity int) error {
	if err := json.NewEncoder(c.in).Encode(clientsStart{URL: url, After: after, Watchers: n, Capacity: capacity}); err != nil {
		return fmt.Errorf("bench: start the clients: %w", err)
	}
	var opened clientsOpened
	if err := c.dec.Decode(&opened); err != nil {
		return fmt.Errorf("bench: the client process: %w", c.exit(err))
	}
	if opened.Error != "" {
		return fmt.Errorf("bench: the client process: %s", opened.Error)
	}
	return nil
}

func (c *processClients) finish(ctx context.Context, end int64) ([][]receipt, procCounters, error) {
	if err := json.NewEncoder(c.in).Encode(clientsEnd{End: end}); err != nil {
		return nil, procCounters{}, fmt.Errorf("bench: end the clients: %w", err)
	}
	var done clientsDone
	if err := c.dec.Decode(&done); err != nil {
		return nil, procCounters{}, fmt.Errorf("bench: the client process: %w", c.exit(err))
	}
	if done.Error != "" {
		return nil, procCounters{}, fmt.Errorf("bench: the client process: %s", done.Error)
	}
	if len(done.Seqs) != len(done.Times) {
		return nil, procCounters{}, errors.New("bench: the client process answered seqs and times of different lengths")
	}
	out := make([][]receipt, len(done.Seqs))
	for i, seqs := range done.Seqs {
		if len(seqs) != len(done.Times[i]) {
			return nil, procCounters{}, fmt.Errorf("bench: the client process answered %d seqs and %d times for subscriber %d", len(seqs), len(done.Times[i]), i)
		}
		out[i] = make([]receipt, len(seqs))
		for j, seq := range seqs {
			out[i][j] = receipt{seq: seq, at: time.Unix(0, done.Times[i][j])}
		}
	}
	return out, procCounters{cpu: time.Duration(done.CPUNanos), writes: done.Writes, reads: done.Reads}, nil
}

// exit returns err with how the child ended, when it did.
func (c *processClients) exit(err error) error {
	c.in.Close()
	if werr := c.cmd.Wait(); werr != nil {
		return fmt.Errorf("%w (%v)", err, werr)
	}
	return err
}

func (c *processClients) close() {
	if c.cmd == nil {
		return
	}
	c.in.Close() // the child exits when its input ends
	wait := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(wait) }()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-wait:
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-wait
	}
	c.cmd = nil
}

// clientsEnv names the environment variable that, set to "1", makes a test
// binary run ServeWatcherClients (TestMain): the package's benchmarks
// re-execute themselves as the client process.
const clientsEnv = "LONGHAUL_BENCH_WATCHER_CLIENTS"

// SelfClients returns a Config.ClientCommand that re-executes the running
// binary with args (its client mode) and env added to its environment.
func SelfClients(args []string, env ...string) func(context.Context) *exec.Cmd {
	return func(ctx context.Context) *exec.Cmd {
		exe, err := os.Executable()
		if err != nil {
			exe = os.Args[0]
		}
		cmd := exec.CommandContext(ctx, exe, args...)
		cmd.Env = append(os.Environ(), env...)
		return cmd
	}
}
