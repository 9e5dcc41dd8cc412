//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// findPidsCgroup returns a directory of the pids cgroup controller (cgroup
// v1, or v2 with pids delegated) under which this process may create child
// cgroups: the server's own cgroup. It checks by creating and removing one.
func findPidsCgroup() (string, error) {
	return findCgroup("pids", func(dir string) error {
		c, err := newRunCgroup(dir, 1)
		if err != nil {
			return err
		}
		return c.remove()
	})
}

// findCgroup returns the first directory of the controller's hierarchy
// (cgroup v1's, preferred, or v2's) holding this process's cgroup that
// probe accepts (it creates and removes a child there).
func findCgroup(controller string, probe func(dir string) error) (string, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	var v1Path, v2Path string
	haveV1, haveV2 := false, false
	for line := range strings.Lines(string(self)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path, haveV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				v1Path, haveV1 = parts[2], true
			}
		}
	}
	var candidates []string
	for line := range strings.Lines(string(mountinfo)) {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(strings.TrimSpace(line), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		root, mnt := unescapeMount(f[3]), unescapeMount(f[4])
		switch {
		case haveV1 && g[0] == "cgroup" && hasOption(g[2], controller):
			if rel, ok := relUnder(v1Path, root); ok {
				candidates = append([]string{filepath.Join(mnt, rel)}, candidates...)
			}
		case haveV2 && g[0] == "cgroup2":
			if rel, ok := relUnder(v2Path, root); ok {
				candidates = append(candidates, filepath.Join(mnt, rel))
			}
		}
	}
	var errs []error
	for _, dir := range candidates {
		if err := probe(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		return dir, nil
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("no %s cgroup controller is mounted", controller)
	}
	return "", errors.Join(errs...)
}

// relUnder returns path relative to the mount's root, if it is under it.
func relUnder(path, root string) (string, bool) {
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

func hasOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// unescapeMount undoes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupPrefix starts the name of every per-run cgroup.
const cgroupPrefix = "longhaul-sandbox-"

// runCgroup is the pids cgroup of one run.
type runCgroup struct {
	dir string
}

// newRunCgroup creates a child of parent whose processes may number max.
func newRunCgroup(parent string, max int) (*runCgroup, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	// The server's pid in the name tells a later server whether it is
	// stale (removeStaleCgroups).
	dir := filepath.Join(parent, cgroupPrefix+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create pids cgroup: %w", err)
	}
	c := &runCgroup{dir: dir}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		_ = c.remove()
		return nil, fmt.Errorf("create pids cgroup: %w", err)
	}
	return c, nil
}

// procs is the file a process writes its pid to, to join the cgroup.
func (c *runCgroup) procs() string { return filepath.Join(c.dir, "cgroup.procs") }

// hitMax reports whether a fork or clone was refused because of pids.max.
func (c *runCgroup) hitMax() bool {
	b, err := os.ReadFile(filepath.Join(c.dir, "pids.events"))
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == "max" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return err == nil && n > 0
		}
	}
	return false
}

// remove deletes the cgroup. Its processes are dead when the run returns,
// but the kernel may take a moment to let them go: EBUSY is retried for a
// short while.
func (c *runCgroup) remove() error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := syscall.Rmdir(c.dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove pids cgroup: %w", err)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}
