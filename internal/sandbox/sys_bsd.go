//go:build unix && !linux

package sandbox

import "syscall"

// procAttr puts the process in a new process group (pgid = its pid), so the
// group can be killed as one. These systems have no parent-death signal; the
// group is still killed on timeout and cancellation.
func procAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
