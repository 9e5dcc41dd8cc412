package sandbox

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// DefaultPath is the PATH commands see.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// toResult maps how a run went to the result a tool sees. shellStatus says
// that the exit code is in shell encoding (bwrap reports a command killed by
// signal n as exit code 128+n), so 129..192 are read as signals.
// processesHit says the run met its process limit.
func toResult(o *runOutcome, lim Limits, shellStatus, processesHit bool) *tool.ExecResult {
	r := &tool.ExecResult{
		Stdout:    o.stdout,
		Stderr:    o.stderr,
		Truncated: o.truncated,
		TimedOut:  o.timedOut,
	}
	sig, signaled := waitSignal(o.state)
	if !signaled {
		r.ExitCode = o.state.ExitCode()
		if shellStatus && r.ExitCode > 128 && r.ExitCode <= 128+64 {
			sig, signaled = syscall.Signal(r.ExitCode-128), true
		}
	}
	if signaled {
		r.ExitCode = -1
		r.Signal = sig.String()
	}
	switch {
	case o.timedOut:
		r.Limit = LimitWall
	case o.outputLimited:
		r.Limit = LimitOutput
	case signaled && sig == sigXCPU:
		r.Limit = LimitCPU
	case signaled && sig == sigKILL && cpuTime(o.state) >= float64(lim.CPUSeconds):
		// The hard CPU limit, one second after the soft one, for a
		// program that ignored SIGXCPU.
		r.Limit = LimitCPU
	case signaled && sig == sigXFSZ:
		r.Limit = LimitFileSize
	case processesHit && r.ExitCode != 0:
		r.Limit = LimitProcesses
	}
	return r
}

// setupError is the error of a run that ended before its command started
// (the sandbox could not be set up), with the first lines of what it said.
func setupError(o *runOutcome) error {
	msg := strings.TrimSpace(o.stderr)
	if len(msg) > 1000 {
		msg = msg[:1000] + "..."
	}
	if msg == "" {
		msg = "exit status " + fmt.Sprint(o.state.ExitCode())
	}
	return errors.New(msg)
}

// environ turns base and the request's variables (which win) into a sorted
// environment list.
func environ(base, req map[string]string) []string {
	all := make(map[string]string, len(base)+len(req))
	for k, v := range base {
		all[k] = v
	}
	for k, v := range req {
		all[k] = v
	}
	env := make([]string, 0, len(all))
	for k, v := range all {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// checkWorkspace reports whether dir is an existing directory.
func checkWorkspace(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("workspace: %s is not a directory", dir)
	}
	return nil
}
