//go:build !unix

package tool

import (
	"errors"
	"os"
	"syscall"
)

// The shell tool needs POSIX process groups.
const shellSupported = false

func shellProcAttr(bool) *syscall.SysProcAttr { return nil }

func terminateReaper(int) error { return errors.New("process groups are not supported") }

func killProcessGroup(int) error { return errors.New("process groups are not supported") }

func exitSignal(*os.ProcessState) string { return "" }
