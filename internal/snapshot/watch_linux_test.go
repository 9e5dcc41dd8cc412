//go:build linux

package snapshot

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/inotify"
	"github.com/stretchr/testify/require"
)

// newWatchingCache returns a Cache that watches the workspaces it walks,
// skipping the test if this machine gives no inotify instance (the
// user's max_user_instances are all in use).
func newWatchingCache(t testing.TB, b Blobs) *Cache {
	t.Helper()
	ino, err := inotify.Open()
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		t.Skip("no inotify instance left on this machine")
	}
	require.NoError(t, err)
	ino.Close()
	c, err := NewCache(b, &CacheConfig{Now: func() time.Time { return farFuture }, Watch: true})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// newWatchedWorkspace returns a store, a watching Cache for it and an
// empty workspace.
func newWatchedWorkspace(t *testing.T) (*memBlobs, *Cache, string) {
	t.Helper()
	b := newMemBlobs()
	return b, newWatchingCache(t, b), t.TempDir()
}

// shell runs script with sh in ws as an unknown writer, as the engine runs
// a shell step: the Cache is told that something writes, not what.
func shell(t testing.TB, c *Cache, ws, script string) {
	t.Helper()
	end := c.BeginUnknownWrites(ws)
	defer end()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = ws
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s\n%s", script, out)
}

// TestWatchedShellStepIsIncremental: after a command changed one file of a
// watched workspace, the Take reads that file only.
func TestWatchedShellStepIsIncremental(t *testing.T) {
	t.Parallel()
	b, c, ws := newWatchedWorkspace(t)
	for i := range 300 {
		writeFile(t, ws, fmt.Sprintf("d%d/e%d/f%d.txt", i%5, i%3, i), randomBytes(uint64(i), 2000), 0o644)
	}
	st := requireSameAsWalk(t, b, c, ws, Options{})
	require.False(t, st.Incremental, "the first Take walks")
	shell(t, c, ws, "printf changed > d1/e2/f11.txt")
	st = requireSameAsWalk(t, b, c, ws, Options{})
	require.True(t, st.Incremental, "the watches told what the command changed")
	require.Equal(t, int64(len("changed")), st.ReadBytes, "only the changed file is read")

	// A command that changes nothing costs nothing.
	shell(t, c, ws, "cat d1/e2/f11.txt >/dev/null; ls -R >/dev/null")
	st = requireSameAsWalk(t, b, c, ws, Options{})
	require.True(t, st.Incremental)
	require.Zero(t, st.ReadBytes)
}

// TestWatchedMatchesWalkRandomized runs random shell commands (writes,
// appends, removals, renames of files and directories, new directories,
// chmod, touch, symlinks, copies) and checks after each that the watched
// incremental snapshot is the walk's.
func TestWatchedMatchesWalkRandomized(t *testing.T) {
	t.Parallel()
	b, c, ws := newWatchedWorkspace(t)
	dirs := []string{".", "a", "a/b", "a/b/c", "d", "d/e"}
	for i, d := range dirs {
		for j := range 4 {
			writeFile(t, ws, filepath.Join(d, "f"+strconv.Itoa(j)), []byte(fmt.Sprintf("%d %d", i, j)), 0o644)
		}
	}
	requireSameAsWalk(t, b, c, ws, Options{})
	rng := rand.New(rand.NewPCG(18, 4))
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	file := func() string { return pick(dirs) + "/f" + strconv.Itoa(rng.IntN(6)) }
	ops := []func() string{
		func() string { return fmt.Sprintf("printf %%s %d > %s", rng.Int(), file()) },
		func() string { return fmt.Sprintf("printf %%s %d >> %s", rng.Int(), file()) },
		func() string { return "rm -f " + file() },
		func() string { return fmt.Sprintf("mv -f %s %s", file(), file()) },
		func() string {
			return fmt.Sprintf("mkdir -p %s/n%d && printf new > %s/n%d/g", pick(dirs), rng.IntN(3), pick(dirs), rng.IntN(3))
		},
		func() string { return fmt.Sprintf("rm -rf %s/n%d", pick(dirs), rng.IntN(3)) },
		func() string { return fmt.Sprintf("chmod %s %s", pick([]string{"600", "755", "644"}), file()) },
		func() string { return fmt.Sprintf("chmod %s %s", pick([]string{"700", "755"}), pick(dirs[1:])) },
		func() string { return "touch -d 2001-02-03 " + file() },
		func() string {
			return fmt.Sprintf("ln -sfn %s %s/l%d", pick([]string{"f0", "../x", "/etc/passwd"}), pick(dirs), rng.IntN(2))
		},
		func() string { return fmt.Sprintf("cp -r %s %s/cp%d", pick(dirs[1:]), pick(dirs), rng.IntN(2)) },
		func() string {
			return fmt.Sprintf("mv %s/n%d %s/m%d", pick(dirs), rng.IntN(3), pick(dirs), rng.IntN(3))
		},
		func() string { return fmt.Sprintf("truncate -s %d %s", rng.IntN(100), file()) },
		func() string { return fmt.Sprintf("printf x > %s.tmp && mv %s.tmp %s", file(), file(), file()) },
	}
	incremental := 0
	const rounds = 120
	for range rounds {
		var script []string
		for range 1 + rng.IntN(3) {
			script = append(script, ops[rng.IntN(len(ops))]())
		}
		shell(t, c, ws, "{ "+strings.Join(script, "; ")+"; } 2>/dev/null; true")
		if requireSameAsWalk(t, b, c, ws, Options{}).Incremental {
			incremental++
		}
	}
	t.Logf("%d of %d Takes after a command were incremental", incremental, rounds)
	// Moved directories make some walk; most do not.
	require.Greater(t, incremental, rounds/2, "most Takes after a command are incremental")
}

// TestWatchOverflowWalks: when the kernel's queue overflowed, the next Take
// walks, and the one after a later command is incremental again.
func TestWatchOverflowWalks(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	require.NoError(t, err)
	queue, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	b, c, ws := newWatchedWorkspace(t)
	writeFile(t, ws, "a/x.txt", []byte("x"), 0o644)
	writeFile(t, ws, "b/y.txt", []byte("y"), 0o644)
	requireSameAsWalk(t, b, c, ws, Options{})

	end := c.BeginUnknownWrites(ws)
	// Each write queues a modification and a close; consecutive equal
	// events are merged, these alternate.
	for i := range queue {
		writeFile(t, ws, "a/x.txt", []byte(strconv.Itoa(i)), 0o644)
	}
	writeFile(t, ws, "b/y.txt", []byte("after the overflow"), 0o644)
	end()
	st := requireSameAsWalk(t, b, c, ws, Options{})
	require.False(t, st.Incremental, "lost events: the Take walks")

	shell(t, c, ws, "printf again > b/y.txt")
	st = requireSameAsWalk(t, b, c, ws, Options{})
	require.True(t, st.Incremental, "the walk watched the workspace again")
}

// TestWatchLimitWalks: past the Cache's watches, the workspace is walked
// after every command, and stays right.
func TestWatchLimitWalks(t *testing.T) {
	t.Parallel()
	b := newMemBlobs()
	c := newWatchingCache(t, b)
	c.maxWatches = 3
	ws := t.TempDir()
	for i := range 6 {
		writeFile(t, ws, fmt.Sprintf("d%d/f", i), []byte("f"), 0o644)
	}
	requireSameAsWalk(t, b, c, ws, Options{})
	for i := range 3 {
		shell(t, c, ws, fmt.Sprintf("printf %d > d5/f", i))
		st := requireSameAsWalk(t, b, c, ws, Options{})
		require.False(t, st.Incremental, "not watched: the Take walks")
	}
	c.mu.Lock()
	require.Zero(t, c.nWatches, "the partial watches were removed")
	c.mu.Unlock()
	// A write told by name is still incremental.
	c.NoteWrites(ws, "d0/f")
	writeFile(t, ws, "d0/f", []byte("told"), 0o644)
	c.NoteWrites(ws, "d0/f")
	require.True(t, requireSameAsWalk(t, b, c, ws, Options{}).Incremental)
}

// TestWatchedHardLinkWalks: a file with another name outside the workspace
// can change with no event here, so such a workspace is walked after
// commands.
func TestWatchedHardLinkWalks(t *testing.T) {
	t.Parallel()
	b := newMemBlobs()
	c := newWatchingCache(t, b)
	ws, outside := t.TempDir(), t.TempDir()
	writeFile(t, ws, "d/f", []byte("f"), 0o644)
	writeFile(t, outside, "shared", []byte("one"), 0o644)
	require.NoError(t, os.Link(filepath.Join(outside, "shared"), filepath.Join(ws, "d/linked")))
	requireSameAsWalk(t, b, c, ws, Options{})
	end := c.BeginUnknownWrites(ws)
	require.NoError(t, os.WriteFile(filepath.Join(outside, "shared"), []byte("two, written outside"), 0o644))
	end()
	st := requireSameAsWalk(t, b, c, ws, Options{})
	require.False(t, st.Incremental)
}

// TestWatchedRootReplacedWalks: a workspace directory removed and made
// again is walked.
func TestWatchedRootReplacedWalks(t *testing.T) {
	t.Parallel()
	b := newMemBlobs()
	c := newWatchingCache(t, b)
	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, ws, "f", []byte("f"), 0o644)
	requireSameAsWalk(t, b, c, ws, Options{})
	end := c.BeginUnknownWrites(ws)
	require.NoError(t, os.RemoveAll(ws))
	writeFile(t, ws, "g", []byte("g"), 0o644)
	end()
	require.False(t, requireSameAsWalk(t, b, c, ws, Options{}).Incremental)
}

// TestWatchedConcurrentWriters: commands write in one workspace at once
// while Takes run; once they are over, the incremental snapshot is the
// walk's, whatever the Takes in between saw.
func TestWatchedConcurrentWriters(t *testing.T) {
	t.Parallel()
	b, c, ws := newWatchedWorkspace(t)
	for w := range 4 {
		writeFile(t, ws, fmt.Sprintf("w%d/seed", w), []byte("seed"), 0o644)
	}
	requireSameAsWalk(t, b, c, ws, Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	takes := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				close(takes)
				return
			default:
			}
			if _, _, err := Take(ctx, b, ws, Options{Cache: c, Incremental: true}); err != nil {
				takes <- err
				close(takes)
				return
			}
		}
	}()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				shell(t, c, ws, fmt.Sprintf(
					"printf %d > w%d/f%d; mkdir -p w%d/n%d && printf x > w%d/n%d/g; rm -f w%d/f%d; chmod 600 w%d/seed",
					i, w, i%4, w, i%3, w, i%3, w, (i+2)%4, w))
			}
		}()
	}
	wg.Wait()
	close(stop)
	for err := range takes {
		require.NoError(t, err)
	}
	requireSameAsWalk(t, b, c, ws, Options{})
	shell(t, c, ws, "printf last > w0/seed")
	require.True(t, requireSameAsWalk(t, b, c, ws, Options{}).Incremental)
}

// TestWatchedSeesSandboxedWrites: a command in bubblewrap writes through a
// bind mount of the workspace, as the engine's sandbox runs it; the
// watches are on the same directories and see its changes.
func TestWatchedSeesSandboxedWrites(t *testing.T) {
	t.Parallel()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("no bwrap")
	}
	b, c, ws := newWatchedWorkspace(t)
	writeFile(t, ws, "d/f", []byte("f"), 0o644)
	writeFile(t, ws, "e/g", []byte("g"), 0o644)
	requireSameAsWalk(t, b, c, ws, Options{})
	sandboxed := func(script string) {
		end := c.BeginUnknownWrites(ws)
		defer end()
		cmd := exec.Command(bwrap, "--ro-bind", "/", "/", "--tmpfs", "/mnt", "--bind", ws, "/mnt/ws",
			"--unshare-all", "--die-with-parent", "--chdir", "/mnt/ws", "sh", "-c", script)
		out, err := cmd.CombinedOutput()
		if err != nil && strings.Contains(string(out), "namespace") {
			t.Skipf("bwrap cannot run here: %s", out)
		}
		require.NoError(t, err, "%s", out)
	}
	for i, script := range []string{
		"printf sandboxed > d/f",
		"mkdir -p e/new/deeper && printf n > e/new/deeper/h && chmod 600 e/g",
		"rm -r e/new && ln -s d/f link && mv d/f d/f2",
	} {
		sandboxed(script)
		st := requireSameAsWalk(t, b, c, ws, Options{})
		require.True(t, st.Incremental, "command %d", i)
	}
}
