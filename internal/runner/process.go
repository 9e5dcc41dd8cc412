package runner

import (
	"context"
	"encoding/json"
	"time"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

// maxProcessesPerEnv bounds the programs one environment runs at once.
const maxProcessesPerEnv = 64

// processStart answers link.MethodProcessStart: the program runs once it
// answers; process.wait relays its stdout.
func (c *connEnvs) processStart(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.ProcessStartParams) (any, error) {
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
			return nil, err
		}
		e.mu.Lock()
		e.procs[p.Process] = proc
		e.mu.Unlock()
		return nil, nil
	})
}

// onProcess runs op on the program a call names.
func onProcess[P any](c *connEnvs, req *link.Request, op func(e *openEnv, proc environment.Process, p *P) (any, error)) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *P) (any, error) {
		var ref link.ProcessRef
		_ = json.Unmarshal(req.Params, &ref) // decoded strictly by onEnv
		e.mu.Lock()
		proc, ok := e.procs[ref.Process]
		e.mu.Unlock()
		if !ok {
			return nil, link.Errorf(link.CodeClosed, "process %q does not run", ref.Process)
		}
		return op(e, proc, p)
	})
}

// processWait answers link.MethodProcessWait: the program's stdout as
// output frames until it ends, then how it ended. The call's end (the
// server gave up on it, or the connection ended) kills the program.
func (c *connEnvs) processWait(ctx context.Context, req *link.Request) (any, error) {
	return onProcess(c, req, func(e *openEnv, proc environment.Process, p *link.ProcessRef) (any, error) {
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
				break // EOF, or the program's end closed its pipe
			}
		}
		select {
		case <-proc.Done():
		case <-ctx.Done():
			proc.Kill()
			<-proc.Done()
		}
		return link.ProcessWaitResult{Exit: proc.Exit(), Stderr: proc.Stderr()}, nil
	})
}

func (c *connEnvs) processWrite(_ context.Context, req *link.Request) (any, error) {
	return onProcess(c, req, func(_ *openEnv, proc environment.Process, p *link.ProcessWriteParams) (any, error) {
		if _, err := proc.Stdin().Write(p.Data); err != nil {
			return nil, link.Errorf(link.CodeClosed, "write to process %s: its stdin is closed", p.Process)
		}
		return nil, nil
	})
}

func (c *connEnvs) processCloseStdin(_ context.Context, req *link.Request) (any, error) {
	return onProcess(c, req, func(_ *openEnv, proc environment.Process, _ *link.ProcessRef) (any, error) {
		_ = proc.Stdin().Close()
		return nil, nil
	})
}

func (c *connEnvs) processStop(_ context.Context, req *link.Request) (any, error) {
	return onProcess(c, req, func(_ *openEnv, proc environment.Process, p *link.ProcessStopParams) (any, error) {
		if p.Kill {
			proc.Kill()
		} else {
			proc.Stop(time.Duration(p.GraceMS) * time.Millisecond)
		}
		return nil, nil
	})
}
