package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// NewLocal returns the local backend: each command is a plain subprocess
// (`sh -c`) of the server, in the workspace, in a process group of its own
// with a scrubbed environment. It isolates nothing: see the package
// documentation.
func NewLocal() Backend {
	// What a previous incarnation's reapers left undone.
	wakeOrphansOnce()
	return localBackend{}
}

// wakeOrphansOnce finishes, once per process, what reapers of a previous
// incarnation left undone (wakeOrphanedReapers), when the first local
// backend is made.
var wakeOrphansOnce = sync.OnceFunc(func() { wakeOrphanedReapers() })

// localBackend's disk is the default workspace quota (0: DefaultDiskBytes).
type localBackend struct{ disk int64 }

func (localBackend) Name() string { return "local" }

func (localBackend) ConfinesNetwork() bool { return false }

func (b localBackend) Exec(spec Spec) tool.Exec { return &localExec{spec: spec, disk: b.disk} }

type localExec struct {
	spec Spec
	disk int64
}

// Run implements tool.Exec.
func (e *localExec) Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error) {
	lim, err := e.spec.validate(e.disk)
	if err != nil {
		return nil, fmt.Errorf("local exec: %w", err)
	}
	timeout, maxOut, err := checkRequest(req, lim)
	if err != nil {
		return nil, fmt.Errorf("local exec: %w", err)
	}
	if !processGroupsSupported {
		return nil, fmt.Errorf("local exec: not supported on %s", runtime.GOOS)
	}
	ws := e.spec.Workspace
	tmp, err := localTmp(ws)
	if err != nil {
		return nil, fmt.Errorf("local exec: %w", err)
	}
	before := usageBeforeBy(walkWorkspace, ws, nil)
	argv := append([]string{"/bin/sh", "-c", wrapperScript},
		// No process limit: RLIMIT_NPROC would count every process of
		// the server's user, the server's own threads included.
		wrapperArgs(req.Command, lim, false, "")...)
	out, err := runProcess(ctx, &runSpec{
		argv:        argv,
		env:         environ(localBase(ws, tmp), req.Env),
		dir:         ws,
		timeout:     timeout,
		maxCapture:  maxOut,
		outputLimit: lim.OutputBytes,
		monitor:     diskMonitor(walkWorkspace, ws, nil, lim.DiskBytes, before),
		reaper:      reaperPath(),
	})
	if err != nil {
		return nil, fmt.Errorf("local exec: %w", err)
	}
	if !out.started && !out.timedOut && !out.cancelled && !out.outputLimited && out.stopErr == nil {
		return nil, fmt.Errorf("local exec: %w", setupError(out))
	}
	res := toResult(out, lim, false, false)
	applyQuota(walkWorkspace, res, out, ws, nil, lim.DiskBytes, before)
	return res, nil
}

// Start implements Backend: the program is a plain subprocess in the
// workspace, like a command of Exec, with the same environment and limits
// (but the wall time and the output limit).
func (b localBackend) Start(ctx context.Context, spec Spec, req *StartRequest) (*Process, error) {
	lim, err := spec.validate(b.disk)
	if err != nil {
		return nil, fmt.Errorf("local start: %w", err)
	}
	if err := req.check(); err != nil {
		return nil, fmt.Errorf("local start: %w", err)
	}
	if req.UnboundedAddressSpace {
		lim.MemoryBytes = -1
	}
	if !processGroupsSupported {
		return nil, fmt.Errorf("local start: not supported on %s", runtime.GOOS)
	}
	tmp, err := localTmp(spec.Workspace)
	if err != nil {
		return nil, fmt.Errorf("local start: %w", err)
	}
	argv, mem := startBounded(append([]string{"/bin/sh", "-c", wrapperScript}, wrapperArgs(req.Command, lim, false, "")...), req)
	var cleanup func()
	if mem != nil {
		cleanup = func() { _ = mem.remove() }
	}
	p, err := startProcess(ctx, &startSpec{
		memory:    mem,
		cleanup:   cleanup,
		argv:      argv,
		env:       environ(localBase(spec.Workspace, tmp), req.Env),
		dir:       spec.Workspace,
		maxStderr: cmp.Or(req.MaxStderrBytes, DefaultMaxOutputBytes),
		reaper:    reaperPath(),
	})
	if err != nil {
		return nil, fmt.Errorf("local start: %w", err)
	}
	return p, nil
}

// localTmp checks the workspace and returns its TMPDIR, created if needed.
func localTmp(ws string) (string, error) {
	if err := checkWorkspace(ws); err != nil {
		return "", err
	}
	tmp := filepath.Join(ws, ".tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("create TMPDIR: %w", err)
	}
	return tmp, nil
}

// localBase is the scrubbed environment of a local program.
func localBase(ws, tmp string) map[string]string {
	return map[string]string{
		"PATH":   DefaultPath,
		"HOME":   ws,
		"PWD":    ws,
		"TMPDIR": tmp,
		"LANG":   "C.UTF-8",
	}
}
