//go:build !linux

package sandbox

import (
	"syscall"
	"time"
)

// ReapCommand is the hidden subcommand that stands between the server and
// a local command (Linux only: see reap_linux.go).
const ReapCommand = "__sandbox-reap"

// reaperPath is "": without Linux's subreapers, commands run without one.
func reaperPath() string { return "" }

// reaperAttr is never used without a reaper.
func reaperAttr() *syscall.SysProcAttr { return procAttr(false) }

// signalRun kills the process group of pid.
func signalRun(pid int, _ bool) error { return killGroup(pid) }

// terminate kills the process group of pid.
func terminate(pid int, _ bool, _ <-chan struct{}, _ time.Duration) { _ = killGroup(pid) }

func wakeOrphanedReapers() int { return 0 }
