package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// Defaults of Limits: a zero field takes the value here.
const (
	// DefaultCPUSeconds is the CPU time one program run may use (all its
	// processes, each bounded separately by RLIMIT_CPU).
	DefaultCPUSeconds = 600
	// DefaultMemoryBytes is the address space (RLIMIT_AS) of each process.
	// It bounds virtual memory, not resident memory: runtimes that reserve
	// much address space up front (Go needs about 1.6 GiB, a JVM or a
	// WebAssembly engine more) need a larger value.
	DefaultMemoryBytes = 4 << 30
	// DefaultProcesses is the number of processes (threads included) a run
	// may have at once.
	DefaultProcesses = 256
	// DefaultOutputBytes is how much a run may write to stdout and stderr
	// together before it is killed.
	DefaultOutputBytes = 16 << 20
	// DefaultWall is the longest a run may last, whatever its request asks.
	DefaultWall = time.Hour
	// DefaultFileBytes is the largest file a run may write (RLIMIT_FSIZE).
	DefaultFileBytes = 1 << 30
	// DefaultTmpBytes is the size of the private /tmp of a bwrap sandbox.
	DefaultTmpBytes = 256 << 20
	// DefaultShmBytes is the size of the private /dev/shm of a bwrap
	// sandbox.
	DefaultShmBytes = 64 << 20
	// DefaultDiskBytes is the workspace quota (Limits.DiskBytes) when
	// neither the session nor the server sets one.
	DefaultDiskBytes = 10 << 30
	// DefaultMaxOutputBytes is how much of each of stdout and stderr a
	// result keeps (its beginning and its end) when the request does not
	// say.
	DefaultMaxOutputBytes = 64 << 10
	// DefaultTimeout bounds a run whose request has no timeout (and is
	// itself bounded by Limits.Wall).
	DefaultTimeout = 60 * time.Second
)

// Names of the limits in tool.ExecResult.Limit.
const (
	LimitCPU = "cpu"
	// LimitMemory is never reported by these backends: a program out of
	// address space sees failed allocations and ends as it chooses, which
	// cannot be told apart from outside.
	LimitMemory    = "memory"
	LimitProcesses = "processes"
	LimitOutput    = "output"
	LimitWall      = "wall"
	LimitFileSize  = "file_size"
	// LimitDisk: the workspace went over its quota (Limits.DiskBytes).
	LimitDisk = "disk"
)

// Limits bound one program run. A zero field takes its default (the
// Default* constants); a negative one is an error.
type Limits struct {
	// CPUSeconds is the CPU time each process may use: RLIMIT_CPU, soft at
	// CPUSeconds (SIGXCPU) and hard one second later (SIGKILL).
	CPUSeconds int
	// MemoryBytes is the address space of each process (RLIMIT_AS).
	MemoryBytes int64
	// Processes bounds the processes and threads of a run: a pids cgroup
	// when the server can create one, and RLIMIT_NPROC (which the kernel
	// does not enforce for root: see the package documentation).
	Processes int
	// OutputBytes is how much a run may write to stdout and stderr
	// together; past it the run is killed (Limit "output").
	OutputBytes int
	// Wall is the longest a run may last; a request's Timeout above it is
	// cut to it.
	Wall time.Duration
	// FileBytes is the largest file a process may write (RLIMIT_FSIZE;
	// SIGXFSZ, Limit "file_size").
	FileBytes int64
	// TmpBytes is the size of the private /tmp (bwrap only).
	TmpBytes int64
	// ShmBytes is the size of the private /dev/shm (bwrap only).
	ShmBytes int64
	// DiskBytes is the workspace's quota: what the workspace may use in
	// all (see the package documentation for how it is enforced). Zero
	// takes the backend's default (DetectOptions.DiskBytes, else
	// DefaultDiskBytes).
	DiskBytes int64
}

// withDefaults returns l with zero fields set to their defaults, or an
// error naming the first negative field.
func (l Limits) withDefaults() (Limits, error) {
	switch {
	case l.CPUSeconds < 0:
		return l, errors.New("limits.cpu_seconds: must be >= 0")
	case l.MemoryBytes < 0:
		return l, errors.New("limits.memory_bytes: must be >= 0")
	case l.Processes < 0:
		return l, errors.New("limits.processes: must be >= 0")
	case l.OutputBytes < 0:
		return l, errors.New("limits.output_bytes: must be >= 0")
	case l.Wall < 0:
		return l, errors.New("limits.wall: must be >= 0")
	case l.FileBytes < 0:
		return l, errors.New("limits.file_bytes: must be >= 0")
	case l.TmpBytes < 0:
		return l, errors.New("limits.tmp_bytes: must be >= 0")
	case l.ShmBytes < 0:
		return l, errors.New("limits.shm_bytes: must be >= 0")
	case l.DiskBytes < 0:
		return l, errors.New("limits.disk_bytes: must be >= 0")
	}
	if l.CPUSeconds == 0 {
		l.CPUSeconds = DefaultCPUSeconds
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = DefaultOutputBytes
	}
	if l.Wall == 0 {
		l.Wall = DefaultWall
	}
	if l.FileBytes == 0 {
		l.FileBytes = DefaultFileBytes
	}
	if l.TmpBytes == 0 {
		l.TmpBytes = DefaultTmpBytes
	}
	if l.ShmBytes == 0 {
		l.ShmBytes = DefaultShmBytes
	}
	if l.DiskBytes == 0 {
		l.DiskBytes = DefaultDiskBytes
	}
	return l, nil
}

// Spec is a session's sandbox.
type Spec struct {
	// SessionID names the session in errors.
	SessionID string
	// Workspace is the absolute path of the session's workspace: the only
	// directory the program may write, and its working directory. The bwrap
	// backend mounts it at WorkspaceDir (/workspace), so paths inside do not
	// depend on where the server keeps it (they survive a fork or a move to
	// another node); the local backend runs in it where it is.
	Workspace string
	// ProxySocket is "" for no network at all. Otherwise it is the path of
	// the Unix socket of the server's egress proxy: inside a bwrap sandbox,
	// HTTP_PROXY and HTTPS_PROXY (and their lower-case forms) point at
	// ProxyListen, where a forwarder relays each connection to that socket.
	// The local backend ignores it (see the package documentation).
	ProxySocket string
	// Limits bound each program run.
	Limits Limits
}

// validate checks s and returns its limits with defaults, the workspace
// quota defaulting to disk (when > 0).
func (s *Spec) validate(disk int64) (Limits, error) {
	if s.Workspace == "" {
		return Limits{}, errors.New("spec.workspace: is required")
	}
	if !filepath.IsAbs(s.Workspace) {
		return Limits{}, fmt.Errorf("spec.workspace: %q is not an absolute path", s.Workspace)
	}
	if s.ProxySocket != "" && !filepath.IsAbs(s.ProxySocket) {
		return Limits{}, fmt.Errorf("spec.proxy_socket: %q is not an absolute path", s.ProxySocket)
	}
	l := s.Limits
	if l.DiskBytes == 0 && disk > 0 {
		l.DiskBytes = disk
	}
	l, err := l.withDefaults()
	if err != nil {
		return l, err
	}
	// No single file may be larger than the whole quota: RLIMIT_FSIZE
	// stops it in the kernel, at once.
	l.FileBytes = min(l.FileBytes, l.DiskBytes)
	return l, nil
}

// Backend runs programs in sandboxes of one kind.
type Backend interface {
	// Name is "bwrap" or "local".
	Name() string
	// ConfinesNetwork reports whether programs in this backend's sandboxes
	// reach the network only through Spec.ProxySocket (bwrap), so the
	// engine starts the egress proxy for a session that has network; the
	// local backend ignores the socket and confines nothing.
	ConfinesNetwork() bool
	// Exec returns a tool.Exec bound to spec. A spec that is not valid is
	// reported by every Run of the returned Exec.
	Exec(spec Spec) tool.Exec
	// Start starts a long-lived program (an MCP server over stdio) in a
	// sandbox bound to spec, and returns once the sandbox is set up and
	// the program started; ctx bounds only that. The program then runs
	// until it exits or Process.Stop or Kill ends it, under spec's limits
	// except Wall and OutputBytes (its stdout is the caller's stream).
	Start(ctx context.Context, spec Spec, req *StartRequest) (*Process, error)
}

// DetectOptions configures Detect.
type DetectOptions struct {
	// Bwrap configures the bwrap backend Detect tries first.
	Bwrap BwrapOptions
	// Local picks the local backend without trying bwrap: an operator's
	// choice (a test that must see the host, a machine where bwrap is known
	// not to work). The warning still says what it means.
	Local bool
	// DiskBytes is the workspace quota of a Spec whose Limits.DiskBytes is
	// zero (0: DefaultDiskBytes); the server's --sandbox-disk-mb.
	DiskBytes int64
}

// Detect returns the bwrap backend when bubblewrap works on this machine
// (NewBwrap probes it by running a trivial sandbox once), else the local
// backend. The string is a warning for the operator, "" when there is
// nothing to say: why bwrap is not used and what that means, or what the
// bwrap backend cannot enforce here. The server prints it at start-up and
// shows it in /readyz details.
func Detect(ctx context.Context, opts DetectOptions) (Backend, string) {
	if opts.DiskBytes < 0 {
		opts.DiskBytes = 0
	}
	if opts.Local {
		wakeOrphansOnce()
		return localBackend{disk: opts.DiskBytes}, localWarning("it was chosen by configuration")
	}
	bo := opts.Bwrap
	if bo.DiskBytes == 0 {
		bo.DiskBytes = opts.DiskBytes
	}
	b, err := newBwrap(ctx, bo)
	if err != nil {
		wakeOrphansOnce()
		return localBackend{disk: opts.DiskBytes}, localWarning(err.Error()) +
			" Install bubblewrap (Debian package bubblewrap) and allow user namespaces to isolate them."
	}
	return b, b.warning()
}

func localWarning(why string) string {
	return "sandbox: using the local backend, which does not isolate commands: " + why +
		". Shell commands run as plain subprocesses of the server, as its user: " +
		"they can read and write whatever the server can, reach any network address the server can " +
		"(its own API port, cloud metadata) and see other sessions' workspaces."
}

// checkRequest validates a request and returns its effective timeout and
// output bound.
func checkRequest(req *tool.ExecRequest, lim Limits) (time.Duration, int, error) {
	if req == nil {
		return 0, 0, errors.New("request: is nil")
	}
	if req.Command == "" {
		return 0, 0, errors.New("request.command: is required")
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		return 0, 0, errors.New("request.command: must not contain a NUL byte")
	}
	if req.Timeout < 0 {
		return 0, 0, errors.New("request.timeout: must be >= 0")
	}
	if req.MaxOutputBytes < 0 {
		return 0, 0, errors.New("request.max_output_bytes: must be >= 0")
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return 0, 0, fmt.Errorf("request.env: invalid variable name %q", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return 0, 0, fmt.Errorf("request.env.%s: must not contain a NUL byte", k)
		}
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	timeout = min(timeout, lim.Wall)
	maxOut := req.MaxOutputBytes
	if maxOut == 0 {
		maxOut = DefaultMaxOutputBytes
	}
	return timeout, maxOut, nil
}
