package runner

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

// maxProcessesPerEnv bounds the programs one environment runs at once.
const maxProcessesPerEnv = 64

// processStart answers link.MethodProcessStart: the program runs once it
// answers; process.wait relays its stdout.
func (c *connEnvs) processStart(ctx context.Context, req *link.Request) (any, error) {
	var p link.ProcessStartParams
	e, err := c.decode(req, &p, func() string { return p.EnvID })
	if err != nil {
		return nil, err
	}
	if err := link.CheckHandle("process", p.Process); err != nil {
		return nil, link.Errorf(link.CodeBadParams, "%v", err)
	}
	e.mu.Lock()
	_, taken := e.procs[p.Process]
	n := len(e.procs)
	e.mu.Unlock()
	switch {
	case taken:
		return nil, link.Errorf(link.CodeBadParams, "process: %s runs already", p.Process)
	case n >= maxProcessesPerEnv:
		return nil, link.Errorf(link.CodeBusy, "%d programs run in this environment, the most at once", n)
	}
	proc, err := e.env.Start(ctx, &sandbox.StartRequest{Command: p.Command, Program: p.Program, Env: p.Env, MaxStderrBytes: p.MaxStderrBytes})
	if err != nil {
		return nil, c.r.wireError(err)
	}
	e.mu.Lock()
	e.procs[p.Process] = proc
	e.mu.Unlock()
	return nil, nil
}

func (e *openEnv) proc(id string) (procLike, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.procs[id]
	if !ok {
		return nil, link.Errorf(link.CodeClosed, "process %s does not run", id)
	}
	return p, nil
}

// procLike is environment.Process (named here to keep the signatures
// short).
type procLike interface {
	Stdin() io.WriteCloser
	Stdout() io.ReadCloser
	Done() <-chan struct{}
	Stderr() string
	Exit() string
	Stop(grace time.Duration)
	Kill()
}

// processWait answers link.MethodProcessWait: the program's stdout as
// output frames until it ends, then how it ended. The call's end (the
// server gave up on it, or the connection ended) kills the program.
func (c *connEnvs) processWait(ctx context.Context, req *link.Request) (any, error) {
	var p link.ProcessRef
	e, err := c.decode(req, &p, func() string { return p.EnvID })
	if err != nil {
		return nil, err
	}
	proc, err := e.proc(p.Process)
	if err != nil {
		return nil, err
	}
	defer func() {
		e.mu.Lock()
		delete(e.procs, p.Process)
		e.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, proc.Kill)
	defer stop()
	buf := make([]byte, 32<<10)
	out := proc.Stdout()
	for {
		n, err := out.Read(buf)
		if n > 0 {
			if oerr := req.Output(ctx, link.StreamStdout, buf[:n]); oerr != nil {
				proc.Kill()
				return nil, oerr
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				c.r.log.Debug("read a program's stdout", "err", err)
			}
			break
		}
	}
	select {
	case <-proc.Done():
	case <-ctx.Done():
		proc.Kill()
		<-proc.Done()
	}
	return link.ProcessWaitResult{Exit: proc.Exit(), Stderr: proc.Stderr()}, nil
}

func (c *connEnvs) processWrite(_ context.Context, req *link.Request) (any, error) {
	var p link.ProcessWriteParams
	e, err := c.decode(req, &p, func() string { return p.EnvID })
	if err != nil {
		return nil, err
	}
	proc, err := e.proc(p.Process)
	if err != nil {
		return nil, err
	}
	if _, err := proc.Stdin().Write(p.Data); err != nil {
		return nil, link.Errorf(link.CodeClosed, "write to process %s: its stdin is closed", p.Process)
	}
	return nil, nil
}

func (c *connEnvs) processCloseStdin(_ context.Context, req *link.Request) (any, error) {
	var p link.ProcessRef
	e, err := c.decode(req, &p, func() string { return p.EnvID })
	if err != nil {
		return nil, err
	}
	proc, err := e.proc(p.Process)
	if err != nil {
		return nil, err
	}
	_ = proc.Stdin().Close()
	return nil, nil
}

func (c *connEnvs) processStop(_ context.Context, req *link.Request) (any, error) {
	var p link.ProcessStopParams
	e, err := c.decode(req, &p, func() string { return p.EnvID })
	if err != nil {
		return nil, err
	}
	proc, err := e.proc(p.Process)
	if err != nil {
		return nil, err
	}
	if p.Kill {
		proc.Kill()
	} else {
		proc.Stop(time.Duration(p.GraceMS) * time.Millisecond)
	}
	return nil, nil
}
