package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// StartRequest is a long-lived program: Command is run by `sh -c` in the
// workspace, like an Exec request, but the caller talks to it through its
// standard input and output (an MCP server over stdio) for as long as it
// runs, rather than waiting for it to end.
type StartRequest struct {
	Command string
	// Program is the program Command runs, when the caller knows it (an
	// MCP server's command): a backend that shows the sandbox only part of
	// the host checks it is visible first, so a server that cannot start
	// says why, naming the path.
	Program string
	Env     map[string]string
	// MaxStderrBytes bounds what Process.Stderr keeps of the program's
	// standard error (its beginning and its end). Default:
	// DefaultMaxOutputBytes.
	MaxStderrBytes int
	// UnboundedAddressSpace lifts Limits.MemoryBytes (RLIMIT_AS) for this
	// program: a browser's JavaScript engine reserves terabytes of address
	// space up front (V8's sandbox and pointer cages) that it never uses,
	// so no useful RLIMIT_AS lets it start. Every other limit holds.
	UnboundedAddressSpace bool
	// MemoryBytes, when positive, bounds the memory the program and its
	// children use (resident and swapped) with a memory cgroup of its own,
	// where the kernel lets the server make one (MemoryBound says); past
	// it the kernel kills one of its processes (Process.OutOfMemory). It
	// is the bound of a program whose address space is not bounded.
	MemoryBytes int64
}

// check validates a start request, naming the field.
func (req *StartRequest) check() error {
	if req == nil {
		return errors.New("request: is nil")
	}
	if req.MaxStderrBytes < 0 {
		return errors.New("request.max_stderr_bytes: must be >= 0")
	}
	if req.MemoryBytes < 0 {
		return errors.New("request.memory_bytes: must be >= 0")
	}
	// The command and environment follow the rules of a run.
	_, _, err := checkRequest(&tool.ExecRequest{Command: req.Command, Env: req.Env}, Limits{Wall: time.Hour})
	return err
}

// Process is a program started by Backend.Start. Its limits are those of a
// run except the wall time and the output limit: it lives until it exits or
// is stopped, and its standard output is the caller's to read.
type Process struct {
	stdin  *os.File
	stdout *os.File

	mu     sync.Mutex
	stderr *tool.HeadTail

	pid int
	// reaped: the program runs under a reaper (see ReapCommand).
	reaped  bool
	done    chan struct{}
	state   *os.ProcessState
	waitErr error
	// readers ends when stderr is drained (or given up on).
	readers sync.WaitGroup
	stopped sync.Once
	// cleanup runs once the process is reaped (the bwrap backend removes
	// its pids cgroup).
	cleanup func()
	// memory is its memory cgroup (nil: none); oom is set when the kernel
	// killed one of its processes there, read before the cgroup goes.
	memory *runCgroup
	oom    bool
}

// OutOfMemory reports whether the kernel killed one of the program's
// processes for going past StartRequest.MemoryBytes.
func (p *Process) OutOfMemory() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.oom && p.memory != nil {
		p.oom = oomKilled(p.memory)
	}
	return p.oom
}

// Stdin is the program's standard input. Closing it tells a well-behaved
// program (an MCP stdio server) to exit.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Stdout is the program's standard output.
func (p *Process) Stdout() io.ReadCloser { return p.stdout }

// Done is closed once the program has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stderr returns what the program wrote to its standard error so far (its
// beginning and its end, within MaxStderrBytes).
func (p *Process) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, _ := p.stderr.Text()
	return s
}

// Exit describes how the program ended ("exit status 3", "killed by signal
// killed"), or "" while it runs.
func (p *Process) Exit() string {
	select {
	case <-p.done:
	default:
		return ""
	}
	if p.state == nil {
		if p.waitErr != nil {
			return p.waitErr.Error()
		}
		return "ended"
	}
	if sig, ok := waitSignal(p.state); ok {
		return "killed by signal " + sig.String()
	}
	code := p.state.ExitCode()
	if code > 128 && code <= 128+64 {
		// bwrap (and sh) report a program killed by signal n as 128+n.
		return fmt.Sprintf("exit status %d (killed by signal %s)", code, syscall.Signal(code-128))
	}
	return fmt.Sprintf("exit status %d", code)
}

// Stop ends the program: it closes its standard input, waits up to grace
// for it to exit by itself, then kills its process group, and returns once
// it is reaped. It is safe to call more than once and concurrently.
func (p *Process) Stop(grace time.Duration) {
	p.stopped.Do(func() {
		p.stdin.Close()
		if grace > 0 {
			t := time.NewTimer(grace)
			select {
			case <-p.done:
			case <-t.C:
			}
			t.Stop()
		}
		terminate(p.pid, p.reaped, p.done, killGrace)
	})
	<-p.done
	p.stdout.Close()
}

// Kill kills the program's process group at once and returns once it is
// reaped.
func (p *Process) Kill() {
	terminate(p.pid, p.reaped, p.done, killGrace)
	<-p.done
}

// startSpec is one long-lived process to start.
type startSpec struct {
	argv      []string
	env       []string
	dir       string
	files     []*os.File // given as fds 4, 5, ...; fd 3 is the status pipe
	maxStderr int
	cleanup   func()
	// memory is the program's memory cgroup (nil: none; cleanup removes
	// it).
	memory *runCgroup
	// newMountNS, reaper: see runSpec.
	newMountNS bool
	reaper     string
}

// startProcess starts spec, waits until the wrapper script reports that the
// sandbox is set up, and returns the running process. A process that ends
// before (the sandbox could not be set up, a limit could not be set) is an
// error with what it said on stderr.
func startProcess(ctx context.Context, spec *startSpec) (*Process, error) {
	if err := ctx.Err(); err != nil {
		if spec.cleanup != nil {
			spec.cleanup()
		}
		return nil, fmt.Errorf("not started: %w", context.Cause(ctx))
	}
	ps, _, err := openPipes(4) // each end is closed on its own below
	if err != nil {
		if spec.cleanup != nil {
			spec.cleanup()
		}
		return nil, err
	}
	inR, inW := ps[0].r, ps[0].w
	outR, outW := ps[1].r, ps[1].w
	errR, errW := ps[2].r, ps[2].w
	statusR, statusW := ps[3].r, ps[3].w

	p := &Process{
		stdin: inW, stdout: outR, stderr: tool.NewHeadTail(spec.maxStderr),
		done: make(chan struct{}), cleanup: spec.cleanup, reaped: spec.reaper != "", memory: spec.memory,
	}
	// The reader runs before the program does: it sees EOF once every
	// write end is closed, whether the program started or not.
	p.readers.Go(func() { drainStderr(p, errR) })
	started := make(chan error, 1)
	// The goroutine that starts the process keeps its OS thread until the
	// process is reaped: Pdeathsig fires when the starting thread exits,
	// not the server (golang/go#27505). It never unlocks, so the thread
	// ends with it, after the reaping.
	go func() {
		runtime.LockOSThread()
		files := append([]*os.File{statusW}, spec.files...)
		argv, attr := underReaper(spec.reaper, spec.argv, len(files), spec.newMountNS)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = spec.dir
		cmd.Env = spec.env
		cmd.Stdin = inR
		cmd.Stdout = outW
		cmd.Stderr = errW
		cmd.ExtraFiles = files
		cmd.SysProcAttr = attr
		err := cmd.Start()
		// The child has its own copies; ours of its ends must go, or
		// readers never see EOF and writers never see EPIPE.
		inR.Close()
		outW.Close()
		errW.Close()
		statusW.Close()
		if err != nil {
			p.readers.Wait()
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.waitErr = cmd.Wait()
		p.state = cmd.ProcessState
		// Whatever the program left running in its group goes with it.
		_ = killGroup(p.pid)
		drained := make(chan struct{})
		go func() {
			p.readers.Wait()
			close(drained)
		}()
		grace := time.NewTimer(killGrace)
		select {
		case <-drained:
		case <-grace.C:
			// Something outside the group still holds the pipe; stop
			// reading rather than wait for it.
			errR.Close()
			<-drained
		}
		grace.Stop()
		p.OutOfMemory() // read while the memory cgroup is there
		if p.cleanup != nil {
			p.cleanup()
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		inW.Close()
		outR.Close()
		statusR.Close()
		if spec.cleanup != nil {
			spec.cleanup()
		}
		return nil, err
	}

	// The wrapper writes "ok" to fd 3 once the sandbox is set up and the
	// command is about to start; EOF without it means it ended before.
	status := make(chan string, 1)
	go func() {
		defer statusR.Close()
		b, _ := io.ReadAll(io.LimitReader(statusR, 64))
		status <- string(b)
	}()
	select {
	case s := <-status:
		if s == "ok" {
			return p, nil
		}
		<-p.done
		p.stdin.Close()
		p.stdout.Close()
		msg := strings.TrimSpace(p.Stderr())
		if len(msg) > 1000 {
			msg = msg[:1000] + "..."
		}
		if msg == "" {
			msg = p.Exit()
		}
		return nil, errors.New(msg)
	case <-ctx.Done():
		p.Kill()
		p.stdin.Close()
		p.stdout.Close()
		return nil, fmt.Errorf("not started: %w", context.Cause(ctx))
	}
}

// drainStderr keeps what the program writes to stderr until the pipe is
// closed (by the program's end, or by the reaper killGrace after it).
func drainStderr(p *Process, r *os.File) {
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.mu.Lock()
			_, _ = p.stderr.Write(buf[:n])
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}
