//go:build unix

package tool

import (
	"errors"
	"os"
	"syscall"
)

const shellSupported = true

// killProcessGroup sends SIGKILL to every process in group pgid. A group
// that is already empty is not an error.
func killProcessGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// terminateReaper sends SIGTERM to the reaper pid: it kills every process
// under it, then exits as its command did. One already gone is not an
// error.
func terminateReaper(pid int) error {
	err := syscall.Kill(pid, syscall.SIGTERM)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// exitSignal names the signal that ended the process, or "".
func exitSignal(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}
