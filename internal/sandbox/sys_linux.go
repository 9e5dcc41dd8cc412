//go:build linux

package sandbox

import "syscall"

// procAttr puts the process in a new process group (pgid = its pid), so the
// group can be killed as one, and asks the kernel to SIGKILL it if the thread
// that started it dies with the server. newMountNS starts it in a mount
// namespace of its own (see EnterCommand).
func procAttr(newMountNS bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if newMountNS {
		a.Cloneflags = syscall.CLONE_NEWNS
	}
	return a
}
