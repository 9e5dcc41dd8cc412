package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Shell defaults and limits.
const (
	// DefaultShellTimeout bounds a command when neither the arguments nor
	// the call say otherwise.
	DefaultShellTimeout = 60 * time.Second
	// MaxShellTimeoutSeconds is the largest timeout_seconds a model may ask
	// for.
	MaxShellTimeoutSeconds = 600
	// DefaultMaxOutputBytes bounds each of stdout and stderr.
	DefaultMaxOutputBytes = 64 << 10
	// DefaultShellPath is the PATH commands see.
	DefaultShellPath = "/usr/local/bin:/usr/bin:/bin"
	// DefaultShellInterpreter runs the command as `sh -c command`.
	DefaultShellInterpreter = "/bin/sh"

	// shellKillGrace is how long, after the command's process group is
	// killed, a process that escaped the group (setsid) may keep the output
	// pipes open before we stop reading; also the exec.Cmd WaitDelay.
	shellKillGrace = 2 * time.Second
)

var shellSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1,
      "description": "Shell command, run by sh -c in the workspace directory."},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 600,
      "description": "Kill the command after this many seconds (default 60)."}
  },
  "required": ["command"],
  "additionalProperties": false
}`)

// Shell is the shell built-in: it runs `sh -c command` in the session's
// workspace. The zero value is ready to use.
//
// The command runs in a process group of its own; when the shell exits,
// times out or the context is cancelled, the whole group is killed, so a
// background process does not outlive its call (its effects could not be
// accounted for). On Linux the kernel also kills the shell if the server
// dies. The environment holds only PATH, HOME and TMPDIR (the workspace and
// a .tmp directory in it), LANG, LONGHAUL_SESSION_ID and
// LONGHAUL_IDEMPOTENCY_KEY: nothing of the server's environment, secrets
// included, reaches the command.
//
// A non-zero exit status is a normal output: the model sees exit_code. A
// timeout or a cancellation is a Result.Error that keeps the partial output.
//
// When the call carries an Exec (the session's sandbox), the command runs
// through it instead, and everything above is the sandbox's to keep: Shell
// passes the command, LONGHAUL_SESSION_ID and LONGHAUL_IDEMPOTENCY_KEY, the
// timeout and the output bound, and maps the ExecResult to the same output,
// with the limit that ended the command, if one did.
type Shell struct {
	// Interpreter is the shell binary (default DefaultShellInterpreter).
	Interpreter string
	// PathEnv is the PATH the command sees (default DefaultShellPath).
	PathEnv string
}

// ShellOutput is the output of a shell call.
type ShellOutput struct {
	// ExitCode is the exit status, or -1 when the shell was killed by a
	// signal.
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Truncated is true when either stream lost bytes to the output bound.
	Truncated bool `json:"truncated"`
	TimedOut  bool `json:"timed_out"`
	// Signal names the signal that ended the shell, if one did.
	Signal string `json:"signal,omitempty"`
	// Limit names the sandbox limit that ended the command, if one did
	// (cpu, memory, processes, output, wall, file_size, disk); only commands run
	// through Call.Exec have one.
	Limit string `json:"limit,omitempty"`
}

// Name implements Tool.
func (*Shell) Name() string { return "shell" }

// Description implements Tool.
func (*Shell) Description() string {
	return "Run a shell command (sh -c) in the session's workspace directory. " +
		"Returns exit_code, stdout and stderr; long output keeps its beginning and end. " +
		"Background processes are killed when the command finishes."
}

// Parameters implements Tool.
func (*Shell) Parameters() json.RawMessage { return clone(shellSchema) }

// Effect implements Tool.
func (*Shell) Effect() lt.EffectClass { return lt.EffectIrreversible }

// Run implements Tool.
func (s *Shell) Run(ctx context.Context, call *Call) (*Result, error) {
	var args struct {
		Command        string      `json:"command"`
		TimeoutSeconds json.Number `json:"timeout_seconds"`
	}
	if res := decodeArguments(s, call, &args); res != nil {
		return res, nil
	}
	if strings.IndexByte(args.Command, 0) >= 0 {
		return &Result{Error: "arguments.command: must not contain a NUL byte"}, nil
	}
	// The model's timeout_seconds wins; otherwise the agent's per-tool
	// timeout (Call.Timeout), which an operator may set above the model's
	// maximum.
	timeout := DefaultShellTimeout
	if call.Timeout > 0 {
		timeout = call.Timeout
	}
	if args.TimeoutSeconds != "" {
		secs, err := intArgument("timeout_seconds", args.TimeoutSeconds)
		if err != nil {
			return &Result{Error: err.Error()}, nil
		}
		timeout = time.Duration(secs) * time.Second
	}
	maxOutput := DefaultMaxOutputBytes
	if call.MaxOutputBytes > 0 {
		maxOutput = call.MaxOutputBytes
	}
	if call.Exec != nil {
		return runExec(ctx, call, args.Command, timeout, maxOutput)
	}
	if !shellSupported {
		return nil, fmt.Errorf("run shell: not supported on %s", runtime.GOOS)
	}
	if call.Workspace == "" {
		return nil, errors.New("run shell: call has no workspace")
	}
	fi, err := os.Stat(call.Workspace)
	if err != nil {
		return nil, fmt.Errorf("run shell: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("run shell: workspace %s is not a directory", call.Workspace)
	}
	tmp := filepath.Join(call.Workspace, ".tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("run shell: create TMPDIR: %w", err)
	}

	run, err := runCommand(ctx, &commandSpec{
		interpreter: orDefault(s.Interpreter, DefaultShellInterpreter),
		command:     args.Command,
		dir:         call.Workspace,
		env: []string{
			"PATH=" + orDefault(s.PathEnv, DefaultShellPath),
			"HOME=" + call.Workspace,
			"PWD=" + call.Workspace,
			"TMPDIR=" + tmp,
			"LANG=C.UTF-8",
			"LONGHAUL_SESSION_ID=" + call.SessionID,
			"LONGHAUL_IDEMPOTENCY_KEY=" + call.IdempotencyKey,
		},
		timeout:   timeout,
		maxOutput: maxOutput,
	})
	if err != nil {
		return nil, fmt.Errorf("run shell: %w", err)
	}
	stdout, truncOut := run.stdout.Text()
	stderr, truncErr := run.stderr.Text()
	out := &ShellOutput{
		ExitCode:  run.exitCode,
		Stdout:    stdout,
		Stderr:    stderr,
		Truncated: truncOut || truncErr,
		TimedOut:  run.timedOut,
		Signal:    run.signal,
	}
	res := &Result{Output: out}
	switch {
	case run.timedOut:
		res.Error = "command timed out after " + formatSeconds(timeout)
	case run.cancelled:
		res.Error = "command cancelled: " + context.Cause(ctx).Error()
	}
	return res, nil
}

// runExec runs command through the call's Exec (the session's sandbox).
func runExec(ctx context.Context, call *Call, command string, timeout time.Duration, maxOutput int) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("run shell: not started: %w", context.Cause(ctx))
	}
	run, err := call.Exec.Run(ctx, &ExecRequest{
		Command: command,
		Env: map[string]string{
			"LONGHAUL_SESSION_ID":      call.SessionID,
			"LONGHAUL_IDEMPOTENCY_KEY": call.IdempotencyKey,
		},
		Timeout:        timeout,
		MaxOutputBytes: maxOutput,
	})
	if err != nil {
		return nil, fmt.Errorf("run shell: %w", err)
	}
	res := &Result{Output: &ShellOutput{
		ExitCode:  run.ExitCode,
		Stdout:    run.Stdout,
		Stderr:    run.Stderr,
		Truncated: run.Truncated,
		TimedOut:  run.TimedOut,
		Signal:    run.Signal,
		Limit:     run.Limit,
	}}
	switch {
	case run.TimedOut:
		res.Error = "command timed out after " + formatSeconds(timeout)
	case ctx.Err() != nil:
		res.Error = "command cancelled: " + context.Cause(ctx).Error()
	case run.Error != "":
		res.Error = run.Error
	}
	return res, nil
}

// commandSpec is one command to run.
type commandSpec struct {
	interpreter string
	command     string
	dir         string
	env         []string
	timeout     time.Duration
	maxOutput   int
}

// commandRun is what happened.
type commandRun struct {
	exitCode       int
	signal         string
	stdout, stderr *HeadTail
	timedOut       bool
	cancelled      bool
}

// runCommand runs spec to completion, timeout or cancellation of ctx, and
// always returns with the command's process group dead and reaped.
func runCommand(ctx context.Context, spec *commandSpec) (*commandRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("not started: %w", context.Cause(ctx))
	}
	// Pdeathsig fires when the OS thread that started the child exits, not
	// the process. Go may end a thread that another goroutine locked and
	// left locked, so the starting goroutine keeps its thread to itself
	// until the child is reaped (golang/go#27505).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}

	runCtx, cancel := context.WithTimeout(ctx, spec.timeout)
	defer cancel()
	// Under the reaper when there is one (SetReaper): what the command
	// starts dies with it and with the server, setsid daemons included.
	argv, reaped := underReaper(spec.interpreter, spec.command)
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...)
	cmd.Dir = spec.dir
	cmd.Env = spec.env
	// Our own pipes as *os.File: exec then starts no copying goroutines, so
	// Wait returns when the shell exits, not when the last process holding
	// the pipe does.
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = shellProcAttr(reaped)
	var killed atomic.Bool
	cmd.Cancel = func() error {
		killed.Store(true)
		if reaped {
			// The reaper kills everything under it, then exits; one
			// that does not within the WaitDelay is killed by exec,
			// and its group below.
			return terminateReaper(cmd.Process.Pid)
		}
		return killProcessGroup(cmd.Process.Pid)
	}
	cmd.WaitDelay = shellKillGrace

	startErr := cmd.Start()
	// The child has its own copies of the write ends; ours must go, or the
	// readers never see EOF.
	outW.Close()
	errW.Close()
	if startErr != nil {
		outR.Close()
		errR.Close()
		return nil, startErr
	}

	run := &commandRun{stdout: NewHeadTail(spec.maxOutput), stderr: NewHeadTail(spec.maxOutput)}
	var readers sync.WaitGroup
	readers.Go(func() { _, _ = io.Copy(run.stdout, outR) })
	readers.Go(func() { _, _ = io.Copy(run.stderr, errR) })

	_ = cmd.Wait() // the exit status is read from ProcessState below
	// The shell is gone; whatever it left running in its group goes too.
	_ = killProcessGroup(cmd.Process.Pid)

	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	grace := time.NewTimer(shellKillGrace)
	select {
	case <-drained:
	case <-grace.C:
		// Something outside the group still holds the pipes; stop
		// reading rather than wait for it.
		outR.Close()
		errR.Close()
		<-drained
	}
	grace.Stop()
	outR.Close()
	errR.Close()

	run.exitCode = cmd.ProcessState.ExitCode()
	run.signal = exitSignal(cmd.ProcessState)
	if killed.Load() && reaped && run.signal == "terminated" {
		// The reaper took the SIGTERM that stands for the tool's kill
		// before it could catch it (a timeout while it started): the
		// command was killed, as it reads without a reaper.
		run.signal = "killed"
	}
	if killed.Load() {
		if ctx.Err() != nil {
			run.cancelled = true
		} else {
			run.timedOut = true
		}
	}
	return run, nil
}

// formatSeconds writes d as "60s" or "0.25s".
func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func clone(b json.RawMessage) json.RawMessage {
	return append(json.RawMessage(nil), b...)
}
