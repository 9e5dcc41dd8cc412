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

	"github.com/longhaul-dev/longhaul/internal/tool"
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
	require.NoError(t, checkWrite(ws, nil, 8<<20, 1<<20))
	writeBytes(t, filepath.Join(outside, "big"), 8<<20)
	var we *writeError
	require.ErrorAs(t, checkWrite(ws, nil, 8<<20, 1<<20), &we)
}

// TestLocalCommandLinkingFromOutsideIsCounted: an unconfined command (the
// local backend) gives a workspace file a second name outside the
// workspace, then something writes through that name after the command
// ended. The kernel reports neither to the workspace's watches, so the
// local backend walks around its commands: the walk at the command's end
// finds the outside name (a link count above the names in the workspace),
// and every measure walks while it exists.
func TestLocalCommandLinkingFromOutsideIsCounted(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	writeBytes(t, filepath.Join(ws, "victim"), 100)
	ex := NewLocal().Exec(Spec{SessionID: "s", Workspace: ws, Limits: Limits{DiskBytes: 8 << 20}})
	q := ex.(tool.DiskQuota)
	require.NoError(t, q.CheckWrite(1<<20))
	res := run(t, ex, fmt.Sprintf("ln victim %q", filepath.Join(outside, "alias")))
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	writeBytes(t, filepath.Join(outside, "alias"), 8<<20) // a process left behind
	var we *writeError
	require.ErrorAs(t, q.CheckWrite(1<<20), &we, "the bytes written through the outside name count")
}

// TestSandboxedCommandCannotLinkOutside: the tracker trusts a sandboxed
// command's writes to be reported because the workspace is the only
// writable mount of the sandbox on its file system: a second name outside
// it cannot be made (EXDEV), and the quota measured from the record
// matches a walk after the command.
func TestSandboxedCommandCannotLinkOutside(t *testing.T) {
	t.Parallel()
	b := testBwrap(t)
	ws := t.TempDir()
	writeBytes(t, filepath.Join(ws, "victim"), 100)
	writeBytes(t, filepath.Join(ws, "dir/old"), 100)
	ex := b.Exec(Spec{SessionID: "s", Workspace: ws, Limits: Limits{DiskBytes: 64 << 20}})
	requireMeasuredLikeAWalk(t, ws, "before")
	res := run(t, ex, `for d in /tmp /dev/shm /workspace/..; do ln /workspace/victim $d/alias 2>/dev/null && echo linked $d; done; `+
		`dd if=/dev/zero of=dir/grown bs=1M count=3 2>/dev/null; mkdir -p made/deep && dd if=/dev/zero of=made/deep/f bs=1M count=2 2>/dev/null; true`)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.NotContains(t, res.Stdout, "linked")
	require.False(t, requireMeasuredLikeAWalk(t, ws, "after the command"), "measured from the events")
}

// TestUsageTrackerGivesNewFilesToTheSandboxUser: a root server gives the
// sandbox's user what the engine wrote before a command runs; measured
// from the events, the paths they name are given too, new directories
// whole.
func TestUsageTrackerGivesNewFilesToTheSandboxUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root gives files away")
	}
	ws := t.TempDir()
	owner := &ids{uid: 54321, gid: 54321}
	writeBytes(t, filepath.Join(ws, "a"), 100)
	_, err := measureWorkspace(ws, owner)
	require.NoError(t, err)
	writeBytes(t, filepath.Join(ws, "b"), 100)
	writeBytes(t, filepath.Join(ws, "new/dir/c"), 100)
	before := trackedWalks(t, ws)
	_, err = measureWorkspace(ws, owner)
	require.NoError(t, err)
	require.Equal(t, before, trackedWalks(t, ws), "measured from the events")
	for _, p := range []string{".", "a", "b", "new", "new/dir", "new/dir/c"} {
		var st unix.Stat_t
		require.NoError(t, unix.Lstat(filepath.Join(ws, p), &st))
		require.Equal(t, []uint32{54321, 54321}, []uint32{st.Uid, st.Gid}, p)
	}
}

// TestUsageTrackerGivesFilesAnUnownedMeasureSaw: a measure without an
// owner (a write's quota check, a command's monitor) between a write and
// the measure before a command must not keep the file from the sandbox's
// user: it stat'ed the file's events, so the next measure with an owner
// would otherwise not see them, and the command could not write the file.
// Plain files are given from the events, without a walk.
func TestUsageTrackerGivesFilesAnUnownedMeasureSaw(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root gives files away: run as root to test that a measure without an owner leaves nothing to root")
	}
	ws := t.TempDir()
	owner := &ids{uid: 54321, gid: 54321}
	measure := func(owner *ids) {
		t.Helper()
		_, err := measureWorkspace(ws, owner)
		require.NoError(t, err)
	}
	requireGiven := func(paths ...string) {
		t.Helper()
		for _, p := range paths {
			var st unix.Stat_t
			require.NoError(t, unix.Lstat(filepath.Join(ws, p), &st))
			require.Equal(t, []uint32{54321, 54321}, []uint32{st.Uid, st.Gid}, p)
		}
	}
	measure(owner)
	writeBytes(t, filepath.Join(ws, "a"), 100)
	measure(nil) // the next write's check
	before := trackedWalks(t, ws)
	measure(owner) // before the command
	require.Equal(t, before, trackedWalks(t, ws), "given from the events")
	requireGiven(".", "a")

	writeBytes(t, filepath.Join(ws, "b"), 100)
	writeBytes(t, filepath.Join(ws, "new/dir/c"), 100)
	measure(nil) // a monitor's poll
	measure(owner)
	requireGiven(".", "a", "b", "new", "new/dir", "new/dir/c")
}

// TestDiskMonitorWalksAsABackstop: of every diskWalkEvery measures of a
// running command's workspace, one walks it whole, whatever the events
// say, so a write inotify does not report is caught within that bound.
func TestDiskMonitorWalksAsABackstop(t *testing.T) {
	ws := t.TempDir()
	writeBytes(t, filepath.Join(ws, "a"), 100)
	_, err := measureWorkspace(ws, nil)
	require.NoError(t, err)
	before := trackedWalks(t, ws)
	for poll := range 2 * diskWalkEvery {
		require.NoError(t, overQuotaBy(pollMeasurer(measureWorkspace, poll), ws, nil, 8<<20, 0))
	}
	require.Equal(t, before+2, trackedWalks(t, ws), "walked once every diskWalkEvery measures")
}

// TestUsageTrackerConcurrentMeasures: measures of one workspace from
// several goroutines (a command's monitor, a sub-agent's file tool) while
// it is written end with the walk's usage.
func TestUsageTrackerConcurrentMeasures(t *testing.T) {
	ws := t.TempDir()
	writeBytes(t, filepath.Join(ws, "seed"), 100)
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if _, err := measureWorkspace(ws, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 300 {
		d := filepath.Join(ws, fmt.Sprint(i%7), fmt.Sprint(i%3))
		writeBytes(t, filepath.Join(d, fmt.Sprint(i)), i*1000)
		if i%25 == 0 {
			require.NoError(t, os.RemoveAll(filepath.Join(ws, fmt.Sprint((i/25)%7))))
		}
	}
	close(stop)
	for range 4 {
		require.NoError(t, <-errs)
	}
	requireMeasuredLikeAWalk(t, ws, "after the writer")
}

// TestUsageTrackerDropsARemovedWorkspace: a removed workspace's record and
// watches go with it (the kernel reports the removal), so sessions that
// come and go do not pile records up.
func TestUsageTrackerDropsARemovedWorkspace(t *testing.T) {
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	writeBytes(t, filepath.Join(ws, "d/f"), 100)
	requireMeasuredLikeAWalk(t, ws, "first")
	require.NotEqual(t, -1, trackedWalks(t, ws))
	require.NoError(t, os.RemoveAll(ws))
	other := t.TempDir()
	_, err := measureWorkspace(other, nil) // reads the events
	require.NoError(t, err)
	require.Equal(t, -1, trackedWalks(t, ws), "the record is dropped")
	usage.mu.Lock()
	defer usage.mu.Unlock()
	for _, locs := range usage.watches {
		for _, l := range locs {
			require.NotEqual(t, ws, l.s.key, "no watch of the removed workspace is left")
		}
	}
}
