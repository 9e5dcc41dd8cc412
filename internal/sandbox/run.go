package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Inside a bwrap sandbox.
const (
	// WorkspaceDir is where the workspace is mounted, and the working
	// directory and HOME of every command.
	WorkspaceDir = "/workspace"
	// ProxyListen is the address the forwarder listens on, in the
	// sandbox's own network namespace; HTTP_PROXY and HTTPS_PROXY point at
	// it.
	ProxyListen = "127.0.0.1:3128"
	// ProxySocketPath is where the proxy's Unix socket is mounted.
	ProxySocketPath = "/run/longhaul/proxy.sock"
	// ForwarderPath is where the forwarder's binary is mounted, read-only.
	ForwarderPath = "/run/longhaul/longhaul"
	// ForwardCommand is the hidden subcommand of the longhaul binary that
	// runs Forward: `longhaul __sandbox-forward --listen ADDR --socket PATH`.
	// Once it listens it writes ForwardReady and a newline to its stdout and
	// closes it.
	ForwardCommand = "__sandbox-forward"
	// ForwardReady is the line the forwarder writes once it listens.
	ForwardReady = "ready"
)

// wrapperScript is the program a run starts with `sh -c`, before the
// command: it starts the forwarder (when there is a proxy) and waits until it
// listens, lowers the resource limits with the shell's ulimit builtin (so
// they bind the command and everything it starts, but not the forwarder,
// whose Go runtime needs more address space than a command may get), tells
// the server through fd 3 that the sandbox is set up, closes fd 3 and execs
// `sh -c COMMAND` in its own place (same pid, so a signal that ends the
// command ends the run). Positional parameters: $1 the command, $2 CPU
// seconds, $3 address space in KiB, $4 file size in 512-byte blocks (the
// unit of `ulimit -f` in POSIX shells), $5 processes ("" for none), $6 the
// forwarder ("" for none).
//
// `ulimit -u` (bash) and `ulimit -p` (dash, busybox) both set RLIMIT_NPROC;
// the soft CPU limit is set before the hard one so that soft <= hard holds
// at every step.
const wrapperScript = `if [ -n "$6" ]; then
	ready=$("$6" ` + ForwardCommand + ` --listen ` + ProxyListen + ` --socket ` + ProxySocketPath + ` 3>&- </dev/null &)
	if [ "$ready" != ` + ForwardReady + ` ]; then
		echo "longhaul sandbox: the network forwarder did not start" >&2
		exit 125
	fi
fi
if ! { ulimit -S -t "$2" && ulimit -H -t $(($2 + 1)) && ulimit -v "$3" && ulimit -f "$4"; }; then
	echo "longhaul sandbox: cannot set resource limits" >&2
	exit 125
fi
if [ -n "$5" ] && ! { ulimit -u "$5" || ulimit -p "$5"; } 2>/dev/null; then
	echo "longhaul sandbox: cannot set the process limit" >&2
	exit 125
fi
printf ok >&3 || exit 125
exec 3>&-
exec /bin/sh -c "$1"`

// wrapperArgs returns the arguments after `-c wrapperScript`.
func wrapperArgs(command string, lim Limits, processes bool, forwarder string) []string {
	nproc := ""
	if processes {
		nproc = strconv.Itoa(lim.Processes)
	}
	return []string{
		"longhaul-sandbox", // $0
		command,
		strconv.Itoa(lim.CPUSeconds),
		addressSpace(lim.MemoryBytes),
		strconv.FormatInt(max(lim.FileBytes/512, 1), 10),
		nproc,
		forwarder,
	}
}

// addressSpace is `ulimit -v`'s argument for bytes (KiB); negative is
// unlimited (StartRequest.UnboundedAddressSpace).
func addressSpace(bytes int64) string {
	if bytes < 0 {
		return "unlimited"
	}
	return strconv.FormatInt(max(bytes/1024, 1), 10)
}

// killGrace is how long, after a run's processes are killed, one that
// escaped (a local daemon that called setsid) may keep the output pipes open
// before the reading stops; also the exec.Cmd WaitDelay.
const killGrace = 2 * time.Second

// Why a run was killed.
var (
	errWall        = errors.New("wall time limit")
	errOutputLimit = errors.New("output limit")
)

// runSpec is one process to run.
type runSpec struct {
	argv []string
	env  []string
	dir  string
	// files are given to the process as fds 4, 5, ...; fd 3 is the status
	// pipe the wrapper writes "ok" to.
	files       []*os.File
	timeout     time.Duration
	maxCapture  int
	outputLimit int
	// newMountNS starts the process in a mount namespace of its own (the
	// enter helper of a root server).
	newMountNS bool
	// reaper, when set, is the binary that runs ReapCommand: the process
	// is started under a reaper, which kills whatever it leaves when it
	// ends, is cancelled or the server dies (the local backend).
	reaper string
	// monitor, when set, runs while the process does; an error it returns
	// kills the run, and is the outcome's stopErr (the disk quota).
	monitor func(ctx context.Context) error
}

// runOutcome is how a run went.
type runOutcome struct {
	state          *os.ProcessState
	stdout, stderr string
	truncated      bool
	// started is true once the wrapper reached the command: an exit
	// before that is a failure of the sandbox, not of the command.
	started       bool
	timedOut      bool
	cancelled     bool
	outputLimited bool
	// stopErr is the monitor's error that killed the run, if one did.
	stopErr error
}

// runProcess runs spec to completion, timeout, output limit or cancellation
// of ctx, and always returns with the process group it started dead and
// reaped.
func runProcess(ctx context.Context, spec *runSpec) (*runOutcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("not started: %w", context.Cause(ctx))
	}
	// Pdeathsig fires when the OS thread that started the child exits, not
	// the process; the starting goroutine keeps its thread until the child
	// is reaped (golang/go#27505).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	ps, closeAll, err := openPipes(3)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	outR, outW := ps[0].r, ps[0].w
	errR, errW := ps[1].r, ps[1].w
	statusR, statusW := ps[2].r, ps[2].w

	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	runCtx, cancelTimeout := context.WithTimeoutCause(runCtx, spec.timeout, errWall)
	defer cancelTimeout()

	files := append([]*os.File{statusW}, spec.files...)
	argv, attr := underReaper(spec.reaper, spec.argv, len(files), spec.newMountNS)
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	cmd.Dir = spec.dir
	cmd.Env = spec.env
	// Our own pipes as *os.File: exec then starts no copying goroutines, so
	// Wait returns when the process exits, not when the last holder of the
	// pipe does.
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.ExtraFiles = files
	cmd.SysProcAttr = attr
	var killed bool
	var killMu sync.Mutex
	cmd.Cancel = func() error {
		killMu.Lock()
		killed = true
		killMu.Unlock()
		// A reaper that does not end within WaitDelay is killed, and its
		// group with it after Wait.
		return signalRun(cmd.Process.Pid, spec.reaper != "")
	}
	cmd.WaitDelay = killGrace

	startErr := cmd.Start()
	// The child has its own copies of the write ends; ours must go, or the
	// readers never see EOF.
	outW.Close()
	errW.Close()
	statusW.Close()
	if startErr != nil {
		return nil, startErr
	}

	budget := &outputBudget{left: int64(spec.outputLimit), exceeded: func() { cancelRun(errOutputLimit) }}
	stdout := newCapture(spec.maxCapture, budget)
	stderr := newCapture(spec.maxCapture, budget)
	var status bytes.Buffer
	var readers sync.WaitGroup
	readers.Go(func() { _, _ = io.Copy(stdout, outR) })
	readers.Go(func() { _, _ = io.Copy(stderr, errR) })
	readers.Go(func() { _, _ = io.Copy(&status, io.LimitReader(statusR, 64)) })
	if spec.monitor != nil {
		monitorCtx, stopMonitor := context.WithCancel(runCtx)
		defer stopMonitor()
		go func() {
			if err := spec.monitor(monitorCtx); err != nil {
				cancelRun(err)
			}
		}()
	}

	_ = cmd.Wait() // the exit status is read from ProcessState below
	// The process is gone; whatever it left running in its group goes too.
	_ = killGroup(cmd.Process.Pid)

	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	grace := time.NewTimer(killGrace)
	select {
	case <-drained:
	case <-grace.C:
		// Something outside the group still holds the output pipes;
		// stop reading them rather than wait for it. Not the status
		// pipe: the wrapper closes fd 3 before it execs the command, so
		// nothing the command starts holds it, and its reader ends by
		// itself; closed now, an "ok" not read yet would be dropped, and a
		// command that ran reported as one that never started.
		outR.Close()
		errR.Close()
		grace.Reset(killGrace)
		select {
		case <-drained:
		case <-grace.C:
			statusR.Close() // a holder no wrapper should leave: do not hang on it
			<-drained
		}
	}
	grace.Stop()

	out := &runOutcome{state: cmd.ProcessState, started: status.String() == "ok"}
	var truncOut, truncErr bool
	out.stdout, truncOut = stdout.Text()
	out.stderr, truncErr = stderr.Text()
	out.outputLimited = budget.exceededLimit()
	out.truncated = truncOut || truncErr || out.outputLimited
	killMu.Lock()
	wasKilled := killed
	killMu.Unlock()
	if wasKilled {
		switch cause := context.Cause(runCtx); {
		case ctx.Err() != nil:
			out.cancelled = true
		case errors.Is(cause, errWall):
			out.timedOut = true
		case errors.Is(cause, errOutputLimit):
			// out.outputLimited is already set.
		default:
			out.stopErr = cause
		}
	}
	return out, nil
}

// underReaper returns the argv and process attributes that start argv,
// whose extra files number nfiles, under reaper (see ReapCommand), or as
// itself when reaper is "".
func underReaper(reaper string, argv []string, nfiles int, newMountNS bool) ([]string, *syscall.SysProcAttr) {
	if reaper == "" {
		return argv, procAttr(newMountNS)
	}
	return append([]string{reaper, ReapCommand, strconv.Itoa(os.Getpid()), strconv.Itoa(nfiles), "--"}, argv...), reaperAttr()
}

// dataFile returns a pipe whose read end holds data, for bwrap's
// --ro-bind-data; the caller closes it. data must fit in a pipe buffer (64
// KiB on Linux), which the small files it carries do.
func dataFile(data string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = io.WriteString(w, data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// pipe is the two ends of an os.Pipe.
type pipe struct{ r, w *os.File }

// openPipes opens n pipes. On failure it closes those it opened; otherwise
// closeAll closes every end (closing an end twice is harmless).
func openPipes(n int) (ps []pipe, closeAll func(), err error) {
	closeAll = func() {
		for _, p := range ps {
			p.r.Close()
			p.w.Close()
		}
	}
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		ps = append(ps, pipe{r, w})
	}
	return ps, closeAll, nil
}
