//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reapOrphans kills what sandboxes a dead server left behind. bwrap's
// sandbox process waits, right after it is cloned, for the outer bwrap to
// write its uid map; if the server dies in that moment, the outer bwrap dies
// with it (parent-death signal) and the sandbox process, whose own
// parent-death signal is not set yet, waits forever. Such a process is a
// bwrap with this package's arguments, in a pid namespace of its own, whose
// parent is not a bwrap. It returns how many it killed.
func reapOrphans() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	ownLevels := nspidLevels(os.Getpid())
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if !isOurBwrap(pid) || nspidLevels(pid) <= ownLevels {
			continue
		}
		ppid := parentPid(pid)
		if ppid > 0 && isBwrap(ppid) {
			continue // a sandbox whose outer bwrap is alive
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(string(bytes.TrimSuffix(b, []byte{0})), "\x00")
}

func isBwrap(pid int) bool {
	args := cmdline(pid)
	return len(args) > 0 && filepath.Base(args[0]) == "bwrap"
}

// isOurBwrap reports whether pid is a bwrap started by this package: it has
// the package's hostname and working directory.
func isOurBwrap(pid int) bool {
	args := cmdline(pid)
	if len(args) == 0 || filepath.Base(args[0]) != "bwrap" {
		return false
	}
	host, chdir := false, false
	for i := 0; i+1 < len(args); i++ {
		switch {
		case args[i] == "--hostname" && args[i+1] == hostname:
			host = true
		case args[i] == "--chdir" && args[i+1] == WorkspaceDir:
			chdir = true
		case args[i] == "--":
			return host && chdir
		}
	}
	return host && chdir
}

// statusField returns a field of /proc/pid/status.
func statusField(pid int, name string) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// nspidLevels is how many pid namespaces pid is seen in.
func nspidLevels(pid int) int {
	return len(strings.Fields(statusField(pid, "NSpid")))
}

func parentPid(pid int) int {
	n, _ := strconv.Atoi(statusField(pid, "PPid"))
	return n
}

// removeStaleCgroups removes the per-run cgroups under parent whose server
// is dead (their names carry its pid), killing what is left in them first.
// A cgroup of a live server, or of one in another pid namespace that this
// one cannot see, is left alone.
func removeStaleCgroups(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		owner, err := strconv.Atoi(pidText)
		if err != nil || owner == os.Getpid() || !errors.Is(syscall.Kill(owner, 0), syscall.ESRCH) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(procs)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		deadline := time.Now().Add(time.Second)
		for syscall.Rmdir(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond) // polling with a deadline
		}
	}
}
