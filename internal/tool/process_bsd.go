//go:build unix && !linux

package tool

import "syscall"

// shellProcAttr puts the shell in a new process group (pgid = its pid), so
// the group can be killed as one. These systems have no parent-death signal;
// the group is still killed on timeout and cancellation.
func shellProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
