//go:build !unix

package sandbox

import (
	"errors"
	"os"
	"syscall"
)

// Running programs needs POSIX process groups.
const processGroupsSupported = false

func procAttr(bool) *syscall.SysProcAttr { return nil }

func killGroup(int) error { return errors.New("process groups are not supported") }

func waitSignal(*os.ProcessState) (syscall.Signal, bool) { return 0, false }

func cpuTime(ps *os.ProcessState) float64 {
	return (ps.UserTime() + ps.SystemTime()).Seconds()
}

const (
	sigXCPU = syscall.Signal(-1)
	sigXFSZ = syscall.Signal(-2)
	sigKILL = syscall.SIGKILL
)
