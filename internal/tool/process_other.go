//go:build !unix

package tool

import (
	"errors"
	"os"
	"syscall"
)

// The shell tool needs POSIX process groups.
const shellSupported = false

func shellProcAttr() *syscall.SysProcAttr { return nil }

func killProcessGroup(int) error { return errors.New("process groups are not supported") }

func exitSignal(*os.ProcessState) string { return "" }
