//go:build linux

package tool

import "syscall"

// shellProcAttr puts the shell in a new process group (pgid = its pid), so
// the group can be killed as one, and asks the kernel to SIGKILL it if the
// thread that started it dies with the server.
func shellProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
