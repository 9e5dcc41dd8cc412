package tool

import (
	"os/exec"
	"path/filepath"
	"sync/atomic"
)

// A Reaper runs the shell tool's plain commands (a call without an Exec:
// an engine with no sandbox and no environment backend, as in tests and
// when embedding) under a process that kills everything a command starts
// when the command ends, times out or is cancelled, and when the server
// dies, SIGKILL included. The command's process group alone does not: a
// daemon that called setsid left it, and a parent-death signal binds only
// the process it is set on.
//
// It returns the argv that runs argv (whose first element is an absolute
// path) under the reaper, or nil when it cannot (the command then runs
// without one). The reaper must take SIGTERM, which is also its
// parent-death signal, as the order to kill every process under it and
// exit; and it must exit as argv did, so that the command's exit code and
// signal read as without it.
type Reaper func(argv []string) []string

// reaper is the Reaper of plain commands (nil: none).
var reaper atomic.Pointer[Reaper]

// SetReaper makes r the Reaper of plain shell commands (nil: none).
// internal/sandbox sets its own when it is linked in, on Linux: the
// running binary re-executed as sandbox.ReapCommand, which every binary
// linking internal/sandbox answers (the longhaul binary, a program
// embedding the engine, a test binary). A binary that links this package
// without internal/sandbox runs plain commands without a reaper: their
// process group is killed when they end and, on Linux, the shell itself
// dies with the server, but a process that left the group may outlive
// both.
func SetReaper(r Reaper) {
	if r == nil {
		reaper.Store(nil)
		return
	}
	reaper.Store(&r)
}

// underReaper returns the argv that runs interpreter -c command, under the
// Reaper when there is one and the interpreter resolves to an absolute
// path (the reaper starts it without a PATH lookup), and whether it is.
func underReaper(interpreter, command string) ([]string, bool) {
	argv := []string{interpreter, "-c", command}
	r := reaper.Load()
	if r == nil {
		return argv, false
	}
	path, err := exec.LookPath(interpreter)
	if err != nil || !filepath.IsAbs(path) {
		// Run as without a reaper: exec reports a missing interpreter.
		return argv, false
	}
	wrapped := (*r)([]string{path, "-c", command})
	if wrapped == nil {
		return argv, false
	}
	return wrapped, true
}
