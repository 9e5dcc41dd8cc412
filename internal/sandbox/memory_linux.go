//go:build linux

package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// A memory cgroup per started program bounds what it may use when its
// address space is not (StartRequest.MemoryBytes): cgroup v1's
// memory.limit_in_bytes (and memory.memsw.limit_in_bytes, so that swap does
// not extend it), in a child of the server's own memory cgroup. cgroup v2 is
// not used yet (newMemoryCgroup says why).
// Past the limit the kernel reclaims, then kills a process of the cgroup
// (its OOM killer, within the cgroup only): the server and the other
// sandboxes are not touched.

var (
	memoryOnce   sync.Once
	memoryParent string
	memoryErr    error
)

// memoryCgroupParent returns the directory under which per-program memory
// cgroups are made, found once ("" and why when there is none: no memory
// controller this process may write to).
func memoryCgroupParent() (string, error) {
	memoryOnce.Do(func() {
		memoryParent, memoryErr = findCgroup("memory", func(dir string) error {
			c, err := newMemoryCgroup(dir, 64<<20)
			if err != nil {
				return err
			}
			return c.remove()
		})
		if memoryErr == nil {
			removeStaleCgroups(memoryParent)
		}
	})
	return memoryParent, memoryErr
}

// newMemoryCgroup creates a child of parent whose processes may use limit
// bytes of memory.
func newMemoryCgroup(parent string, limit int64) (*runCgroup, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	dir := filepath.Join(parent, cgroupPrefix+strconv.Itoa(os.Getpid())+"-mem-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create memory cgroup: %w", err)
	}
	c := &runCgroup{dir: dir}
	value := []byte(strconv.FormatInt(limit, 10))
	if _, err := os.Stat(filepath.Join(dir, "memory.max")); err == nil {
		// v2 is not used yet: its hierarchy is one, and the per-run pids
		// cgroup the sandbox then puts the program in (bwrap.go) moves it
		// out of this one, so memory.max would bound nothing. Until the
		// pids cgroup is made inside this one, say so (MemoryBound): the
		// browser is then bounded by its V8 heap limit alone.
		_ = c.remove()
		return nil, fmt.Errorf("create memory cgroup: cgroup v2 is not supported yet (the per-run pids cgroup would move the program out of it)")
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), value, 0); err != nil {
		_ = c.remove()
		return nil, fmt.Errorf("create memory cgroup: set its limit: %w", err)
	}
	// v1: memory and swap together (after the memory limit, which it may
	// not be below); absent without swap accounting.
	_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), value, 0)
	return c, nil
}

// oomKilled reports whether the kernel killed a process of the memory
// cgroup for going past its limit.
func oomKilled(c *runCgroup) bool {
	for _, f := range []string{"memory.events", "memory.oom_control"} {
		b, err := os.ReadFile(filepath.Join(c.dir, f))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
			if ok && k == "oom_kill" {
				n, err := strconv.ParseInt(v, 10, 64)
				return err == nil && n > 0
			}
		}
	}
	return false
}

// boundMemory makes argv start in a memory cgroup of limit bytes (none
// when limit is 0), and returns what removes it once the program is gone.
// Where the server cannot make one, argv is returned as it is, with why:
// the program is then bounded only by what it does itself (the browser's
// V8 heap limit).
func boundMemory(argv []string, limit int64) ([]string, *runCgroup, error) {
	if limit <= 0 {
		return argv, nil, nil
	}
	parent, err := memoryCgroupParent()
	if err != nil {
		return argv, nil, fmt.Errorf("no memory cgroup: %w", err)
	}
	c, err := newMemoryCgroup(parent, limit)
	if err != nil {
		return argv, nil, err
	}
	// The shell joins the cgroup and becomes the program: every process
	// of it is born inside.
	return append([]string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, c.procs()}, argv...), c, nil
}

// MemoryBound says whether programs started with StartRequest.MemoryBytes
// are bounded by a memory cgroup here, and if not, why.
func MemoryBound() (bool, string) {
	if _, err := memoryCgroupParent(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// startBounded is argv of a program started for req, in a memory cgroup
// when req asks for one and the server can make it (nil otherwise: see
// MemoryBound).
func startBounded(argv []string, req *StartRequest) ([]string, *runCgroup) {
	out, c, err := boundMemory(argv, req.MemoryBytes)
	if err != nil {
		return argv, nil
	}
	return out, c
}
