package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

// maxUnreadStdout bounds what a program's relay holds that its reader has
// not read yet: the link cannot wait for a slow reader (it would hold
// every call of the connection), so past it the program is killed.
const maxUnreadStdout = 16 << 20

// Start implements environment.Environment: process.start starts the
// program on the runner; process.wait, kept open while it runs, relays
// its stdout and ends with its exit.
func (e *env) Start(ctx context.Context, req *sandbox.StartRequest) (environment.Process, error) {
	if req == nil {
		return nil, errors.New("start: request is nil")
	}
	e.mu.Lock()
	e.nextID++
	p := &process{e: e, id: "p" + strconv.FormatUint(e.nextID, 10), done: make(chan struct{})}
	e.mu.Unlock()
	p.cond = sync.NewCond(&p.mu)
	err := e.call(ctx, link.MethodProcessStart, link.ProcessStartParams{EnvID: e.id, Process: p.id, Command: req.Command,
		Program: req.Program, Env: req.Env, MaxStderrBytes: req.MaxStderrBytes}, nil, nil)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		p.signal(link.ProcessStopParams{Kill: true})
		return nil, fmt.Errorf("environment of session %s: %w", e.params.Session, environment.ErrClosed)
	}
	if e.procs == nil {
		e.procs = map[*process]struct{}{}
	}
	e.procs[p] = struct{}{}
	e.mu.Unlock()
	go p.wait()
	return p, nil
}

// process relays a program on the runner (environment.Process).
type process struct {
	e    *env
	id   string
	done chan struct{}

	mu     sync.Mutex
	cond   *sync.Cond
	out    []byte // stdout not read yet
	eof    bool
	exit   string
	stderr string
}

// wait runs process.wait until the program ends (or the connection).
func (p *process) wait() {
	var res link.ProcessWaitResult
	err := p.e.r.Conn.Call(context.Background(), link.MethodProcessWait, link.ProcessRef{EnvID: p.e.id, Process: p.id}, &res,
		&link.CallOptions{OnOutput: p.stdout})
	if err != nil {
		res.Exit = "lost: " + p.e.mapErr(err).Error()
		// Refused (the runner's capacity): the program must not run on
		// unrelayed. A connection that ended ended it already.
		if !errors.Is(err, link.ErrClosed) {
			p.Kill()
		}
	}
	p.finish(res.Exit, res.Stderr)
}

// stdout takes a chunk of the program's stdout (on the link's reader: it
// must not block).
func (p *process) stdout(_ string, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.out)+len(data) > maxUnreadStdout {
		go p.Kill()
		return
	}
	p.out = append(p.out, data...)
	p.cond.Broadcast()
}

func (p *process) finish(exit, stderr string) {
	p.mu.Lock()
	if p.exit == "" {
		p.exit, p.stderr = exit, stderr
		if p.exit == "" {
			p.exit = "exited"
		}
		p.eof = true
		close(p.done)
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.e.mu.Lock()
	delete(p.e.procs, p)
	p.e.mu.Unlock()
}

// lost ends the relay when its environment closed: the runner ended the
// program.
func (p *process) lost() { p.finish("killed: the environment was closed", "") }

func (p *process) Stdin() io.WriteCloser { return stdin{p} }

func (p *process) Stdout() io.ReadCloser { return stdout{p} }

func (p *process) Done() <-chan struct{} { return p.done }

func (p *process) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr
}

func (p *process) Exit() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

func (p *process) Stop(grace time.Duration) {
	p.signal(link.ProcessStopParams{GraceMS: grace.Milliseconds()})
	select {
	case <-p.done:
	case <-time.After(grace + time.Minute):
	}
}

func (p *process) Kill() { p.signal(link.ProcessStopParams{Kill: true}) }

// signal asks the runner to stop the program (a program already over, or
// a runner gone, needs nothing more).
func (p *process) signal(sp link.ProcessStopParams) {
	sp.EnvID, sp.Process = p.e.id, p.id
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(sp.GraceMS)*time.Millisecond+time.Minute)
	defer cancel()
	_ = p.e.r.Conn.Call(ctx, link.MethodProcessStop, sp, nil, nil)
}

type stdin struct{ p *process }

// Write sends b in parts that fit a frame.
func (w stdin) Write(b []byte) (int, error) {
	part := link.ChunkBytes(w.p.e.r.Conn.MaxMessageBytes()) - 1024
	n := 0
	for n < len(b) {
		end := min(n+part, len(b))
		err := w.p.e.call(context.Background(), link.MethodProcessWrite, link.ProcessWriteParams{EnvID: w.p.e.id, Process: w.p.id, Data: b[n:end]}, nil, nil)
		if err != nil {
			return n, fmt.Errorf("write to the program's stdin: %w", err)
		}
		n = end
	}
	return n, nil
}

func (w stdin) Close() error {
	return w.p.e.call(context.Background(), link.MethodProcessCloseStdin, link.ProcessRef{EnvID: w.p.e.id, Process: w.p.id}, nil, nil)
}

type stdout struct{ p *process }

func (r stdout) Read(b []byte) (int, error) {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.out) == 0 && !p.eof {
		p.cond.Wait()
	}
	if len(p.out) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.out)
	p.out = p.out[n:]
	return n, nil
}

// Close stops the relay's reading; the program runs on.
func (r stdout) Close() error { return nil }
