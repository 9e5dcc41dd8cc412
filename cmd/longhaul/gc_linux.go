package main

import (
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// availableMemory is the memory this process may use, in bytes: the
// machine's, or its memory cgroup's limit when that is lower (a container);
// 0 when the machine's cannot be read.
func availableMemory() int64 {
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return 0
	}
	total := int64(info.Totalram) * int64(info.Unit)
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return total
	}
	if limit := cgroupMemoryLimit(os.DirFS("/"), string(self)); limit > 0 && limit < total {
		return limit
	}
	return total
}

// cgroupMemoryLimit is the lowest memory limit set on the cgroups that
// self (the text of /proc/self/cgroup) names, or on their ancestors, read
// from the cgroup file systems in fsys (the root file system); 0 when none
// is set or none can be read. Both versions are read: version 2's
// memory.max ("max" when unset) and version 1's memory.limit_in_bytes (a
// huge number when unset, which the caller's bound by the machine drops).
// A cgroup directory missing from the mount (another namespace's path) is
// skipped, and its ancestors read.
func cgroupMemoryLimit(fsys fs.FS, self string) int64 {
	var lowest int64
	for line := range strings.Lines(self) {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			continue
		}
		var dir, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, file = "sys/fs/cgroup", "memory.max"
		case hasController(parts[1], "memory"):
			dir, file = "sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		for p := path.Clean(parts[2]); ; p = path.Dir(p) {
			if limit := readMemoryLimit(fsys, path.Join(dir, p, file)); limit > 0 && (lowest == 0 || limit < lowest) {
				lowest = limit
			}
			if p == "/" {
				break
			}
		}
	}
	return lowest
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readMemoryLimit reads one cgroup limit file: 0 when it is missing,
// unset ("max") or not a positive number.
func readMemoryLimit(fsys fs.FS, name string) int64 {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
