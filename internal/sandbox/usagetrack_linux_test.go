//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// trackedWalks returns how many times the tracker walked workspace ws.
func trackedWalks(t *testing.T, ws string) int {
	t.Helper()
	usage.mu.Lock()
	defer usage.mu.Unlock()
	s := usage.spaces[ws]
	if s == nil {
		return -1
	}
	return s.walks
}

// requireMeasuredLikeAWalk measures ws through the tracker and requires
// the usage a walk finds; it returns whether the tracker walked to find it.
func requireMeasuredLikeAWalk(t *testing.T, ws, step string) (walked bool) {
	t.Helper()
	before := trackedWalks(t, ws)
	got, gotErr := measureWorkspace(ws, nil)
	want, wantErr := scanWorkspace(ws, nil)
	require.Equal(t, wantErr != nil, gotErr != nil, "%s: the tracker's error %v, the walk's %v", step, gotErr, wantErr)
	require.Equal(t, want, got, "%s: the tracker's usage is the walk's", step)
	return trackedWalks(t, ws) != before
}

func writeBytes(t *testing.T, p string, n int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, make([]byte, n), 0o644))
}

// TestUsageTrackerFollowsEveryWayToWrite: the quota's tracker must find
// what a walk of the workspace finds after each way a hostile command may
// try to write past it (the model is hostile): each step below writes, and
// the next measure must agree with a walk. The steps the events describe
// exactly are measured without walking; the others must walk.
func TestUsageTrackerFollowsEveryWayToWrite(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	writeBytes(t, filepath.Join(ws, "src/a.go"), 10_000)
	writeBytes(t, filepath.Join(ws, "src/deep/b.go"), 300_000)
	require.NoError(t, os.Symlink("src/a.go", filepath.Join(ws, "link")))
	require.True(t, requireMeasuredLikeAWalk(t, ws, "first measure"), "the first measure walks")

	steps := []struct {
		name string
		// walks: the step must make the next measure walk (the events
		// cannot vouch); false: it must not.
		walks bool
		do    func(t *testing.T)
	}{
		{"a new file", false, func(t *testing.T) { writeBytes(t, filepath.Join(ws, "new.bin"), 2<<20) }},
		{"a file grown by appending", false, func(t *testing.T) {
			f, err := os.OpenFile(filepath.Join(ws, "src/a.go"), os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.Write(make([]byte, 1<<20))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}},
		{"a sparse file (its size counts)", false, func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(ws, "sparse"), nil, 0o644))
			require.NoError(t, os.Truncate(filepath.Join(ws, "sparse"), 1<<30))
		}},
		{"blocks allocated past the size (fallocate, keep size)", false, func(t *testing.T) {
			f, err := os.Create(filepath.Join(ws, "prealloc"))
			require.NoError(t, err)
			defer f.Close()
			err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 8<<20)
			if errors.Is(err, unix.EOPNOTSUPP) {
				t.Log("fallocate is not supported on this file system")
				return
			}
			require.NoError(t, err)
		}},
		{"a write through a shared mapping", false, func(t *testing.T) {
			f, err := os.Create(filepath.Join(ws, "mapped"))
			require.NoError(t, err)
			defer f.Close()
			require.NoError(t, f.Truncate(4<<20))
			m, err := unix.Mmap(int(f.Fd()), 0, 4<<20, unix.PROT_WRITE|unix.PROT_READ, unix.MAP_SHARED)
			require.NoError(t, err)
			for i := 0; i < len(m); i += 4096 {
				m[i] = 1
			}
			require.NoError(t, unix.Munmap(m))
		}},
		{"a file in a directory made since the last measure", false, func(t *testing.T) {
			writeBytes(t, filepath.Join(ws, "made/now/f"), 100)
		}},
		{"a write in that directory, at the next measure", false, func(t *testing.T) {
			writeBytes(t, filepath.Join(ws, "made/now/g"), 3<<20)
		}},
		{"a hard link inside the workspace, written through its second name", false, func(t *testing.T) {
			require.NoError(t, os.Link(filepath.Join(ws, "new.bin"), filepath.Join(ws, "src/twin.bin")))
		}},
		{"the same inode grown through the second name", false, func(t *testing.T) {
			writeBytes(t, filepath.Join(ws, "src/twin.bin"), 5<<20)
		}},
		{"a file renamed within the workspace", false, func(t *testing.T) {
			require.NoError(t, os.Rename(filepath.Join(ws, "src/deep/b.go"), filepath.Join(ws, "b.go")))
		}},
		{"a file moved in from outside", false, func(t *testing.T) {
			writeBytes(t, filepath.Join(outside, "in.bin"), 1<<20)
			require.NoError(t, os.Rename(filepath.Join(outside, "in.bin"), filepath.Join(ws, "in.bin")))
		}},
		{"a file deleted while open and written after", false, func(t *testing.T) {
			f, err := os.Create(filepath.Join(ws, "ghost"))
			require.NoError(t, err)
			defer f.Close()
			require.NoError(t, os.Remove(filepath.Join(ws, "ghost")))
			_, err = f.Write(make([]byte, 1<<20))
			require.NoError(t, err)
		}},
		// Stat'ed when made (its link count changed): right at once,
		// and every later measure walks while the other name exists.
		{"a hard link to a file outside the workspace", false, func(t *testing.T) {
			writeBytes(t, filepath.Join(outside, "shared"), 100)
			require.NoError(t, os.Link(filepath.Join(outside, "shared"), filepath.Join(ws, "shared")))
		}},
		{"that file grown through its name outside (no watch sees it)", true, func(t *testing.T) {
			writeBytes(t, filepath.Join(outside, "shared"), 6<<20)
		}},
		{"the outside name removed: the workspace is tracked again", true, func(t *testing.T) {
			require.NoError(t, os.Remove(filepath.Join(outside, "shared")))
		}},
		{"and stays tracked", false, func(t *testing.T) { writeBytes(t, filepath.Join(ws, "shared"), 7<<20) }},
		{"a directory moved within the workspace", true, func(t *testing.T) {
			require.NoError(t, os.Rename(filepath.Join(ws, "made"), filepath.Join(ws, "moved")))
		}},
		{"a write in the moved directory", false, func(t *testing.T) {
			writeBytes(t, filepath.Join(ws, "moved/now/h"), 2<<20)
		}},
		{"a directory moved in from outside", true, func(t *testing.T) {
			writeBytes(t, filepath.Join(outside, "tree/x/y"), 3<<20)
			require.NoError(t, os.Rename(filepath.Join(outside, "tree"), filepath.Join(ws, "tree")))
		}},
		{"a write in it, at the next measure", false, func(t *testing.T) {
			writeBytes(t, filepath.Join(ws, "tree/x/z"), 3<<20)
		}},
		{"a directory swapped for a symlink to outside, written through", false, func(t *testing.T) {
			require.NoError(t, os.RemoveAll(filepath.Join(ws, "src/deep")))
			require.NoError(t, os.Symlink(outside, filepath.Join(ws, "src/deep")))
			writeBytes(t, filepath.Join(ws, "src/deep/through"), 4<<20) // lands outside: counted by neither
		}},
		{"a symlink swapped for a directory, written in", false, func(t *testing.T) {
			require.NoError(t, os.Remove(filepath.Join(ws, "src/deep")))
			writeBytes(t, filepath.Join(ws, "src/deep/back"), 4<<20)
		}},
		{"a tree removed", false, func(t *testing.T) { require.NoError(t, os.RemoveAll(filepath.Join(ws, "tree"))) }},
		{"more changes than the events can hold", true, func(t *testing.T) {
			// The kernel's queue holds 16,384 events by default, and the
			// tracker follows maxUsageDirty paths; each file here is
			// three events (create, modify, close), in a watched
			// directory (a new one's are not reported: it is walked).
			for i := range max(6000, maxUsageDirty+1) {
				writeBytes(t, filepath.Join(ws, "src", fmt.Sprint(i)), 10)
			}
		}},
		{"directories nested past the walk's depth (unmeasurable)", true, func(t *testing.T) {
			require.NoError(t, os.MkdirAll(filepath.Join(ws, strings.Repeat("n/", maxDepth+3)), 0o755))
		}},
		{"the nesting removed", true, func(t *testing.T) { require.NoError(t, os.RemoveAll(filepath.Join(ws, "n"))) }},
		{"the workspace directory replaced", true, func(t *testing.T) {
			require.NoError(t, os.Rename(ws, ws+".old"))
			require.NoError(t, os.Mkdir(ws, 0o755))
			writeBytes(t, filepath.Join(ws, "fresh"), 1<<20)
			t.Cleanup(func() { os.RemoveAll(ws + ".old") })
		}},
		{"a write in the new workspace", false, func(t *testing.T) { writeBytes(t, filepath.Join(ws, "fresh2"), 1<<20) }},
	}
	for _, st := range steps {
		st.do(t)
		walked := requireMeasuredLikeAWalk(t, ws, st.name)
		if st.walks {
			require.True(t, walked, "%s: the events cannot vouch, the measure walks", st.name)
		} else {
			require.False(t, walked, "%s: measured from the events, without walking", st.name)
		}
		// Measured again with nothing changed: still the walk's usage.
		requireMeasuredLikeAWalk(t, ws, st.name+", again")
	}
}

// TestUsageTrackerSeesABackgroundWriter: a process a command left running
// keeps writing after the command's last measure; the next measure (the
// next command's, or a file tool's check) counts what it wrote.
func TestUsageTrackerSeesABackgroundWriter(t *testing.T) {
	ws := t.TempDir()
	writeBytes(t, filepath.Join(ws, "a"), 100)
	requireMeasuredLikeAWalk(t, ws, "first")
	done := make(chan error, 1)
	go func() {
		err := os.Mkdir(filepath.Join(ws, "bg"), 0o755)
		var f *os.File
		if err == nil {
			f, err = os.Create(filepath.Join(ws, "bg/log"))
		}
		if err == nil {
			for range 64 {
				if _, err = f.Write(make([]byte, 64<<10)); err != nil {
					break
				}
			}
			err = errors.Join(err, f.Close())
		}
		done <- err
	}()
	require.NoError(t, <-done)
	require.False(t, requireMeasuredLikeAWalk(t, ws, "after the background writer"))
	got, err := measureWorkspace(ws, nil)
	require.NoError(t, err)
	require.Greater(t, got, int64(4<<20))
}

// TestUsageTrackerQuotaRefusesAWriteAfterUntrackedGrowth: the file tools'
// check (checkWrite) uses the tracker; a file grown through a hard link
// from outside the workspace is still counted against the quota.
func TestUsageTrackerQuotaRefusesAWriteAfterUntrackedGrowth(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	writeBytes(t, filepath.Join(outside, "big"), 100)
	require.NoError(t, os.Link(filepath.Join(outside, "big"), filepath.Join(ws, "big")))
	require.NoError(t, checkWrite(ws, 8<<20, 1<<20))
	writeBytes(t, filepath.Join(outside, "big"), 8<<20)
	var we *writeError
	require.ErrorAs(t, checkWrite(ws, 8<<20, 1<<20), &we)
}
