//go:build linux

package freespacetest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of sizeMiB mebibytes on a new directory and
// unmounts it when the test ends.
func MountTmpfs(t testing.TB, sizeMiB int) string {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "mounting a tmpfs needs root (CI runs as root)"
	}
	if why == "" {
		if _, err := exec.LookPath("mount"); err != nil {
			why = "the mount command is not installed"
		}
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if why == "" {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatalf("create mount point: %v", err)
		}
		out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(sizeMiB)+"m,mode=0700", "tmpfs", dir).CombinedOutput()
		if err != nil {
			why = "mount a tmpfs: " + err.Error() + ": " + string(bytes.TrimSpace(out))
		}
	}
	if why != "" {
		skip(t, why)
	}
	t.Cleanup(func() {
		// Lazy: a process the test started may still hold a file open.
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount the test's tmpfs: %v", err)
		}
	})
	return dir
}

// Fill writes a ballast file into dir until the file system is full (or
// holds at most leaveMiB mebibytes free, when leaveMiB > 0: Fill then
// stops at that), and returns the ballast's path. Removing the file gives
// the space back.
func Fill(t testing.TB, dir string, leaveMiB int) string {
	t.Helper()
	p := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("create ballast: %v", err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if leaveMiB > 0 {
			var st syscall.Statfs_t
			if err := syscall.Statfs(dir, &st); err != nil {
				t.Fatalf("statfs: %v", err)
			}
			free := uint64(st.Bavail) * uint64(st.Bsize) //nolint:gosec // not negative
			if free <= uint64(leaveMiB)<<20 {
				return p
			}
		}
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				// Fill the last partial block too.
				for n := len(chunk) / 2; n > 0; n /= 2 {
					for {
						if _, err := f.Write(chunk[:n]); err != nil {
							break
						}
					}
				}
				return p
			}
			t.Fatalf("write ballast: %v", err)
		}
	}
}
