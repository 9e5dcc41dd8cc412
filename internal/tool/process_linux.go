//go:build linux

package tool

import "syscall"

// shellProcAttr puts the shell (or its reaper) in a new process group
// (pgid = its pid), so the group can be killed as one, and asks the kernel
// to signal it if the thread that started it dies with the server: SIGKILL
// for the shell, SIGTERM for a reaper, which catches it to kill everything
// under it first.
func shellProcAttr(reaped bool) *syscall.SysProcAttr {
	if reaped {
		return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
