//go:build unix

package sandbox

import (
	"errors"
	"os"
	"syscall"
)

const processGroupsSupported = true

// killGroup sends SIGKILL to every process in group pgid. A group that is
// already empty is not an error.
func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// waitSignal returns the signal that ended the process, if one did.
func waitSignal(ps *os.ProcessState) (syscall.Signal, bool) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal(), true
	}
	return 0, false
}

// cpuTime is the CPU time the process and the descendants it reaped used.
func cpuTime(ps *os.ProcessState) float64 {
	return (ps.UserTime() + ps.SystemTime()).Seconds()
}

// Signals that name a limit.
const (
	sigXCPU = syscall.SIGXCPU
	sigXFSZ = syscall.SIGXFSZ
	sigKILL = syscall.SIGKILL
)
