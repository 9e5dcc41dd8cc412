package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestStaleCopyKeptWhileItsWorkspaceIsLocked: a node's copy of a stopped
// environment's workspace (made by a person's read on an API node after
// the stop) is stale, but while the workspace's lock is held (a person's
// change being applied to the copy, files.go) a look at it leaves it
// there; once the lock is let go, the next look removes it.
func TestStaleCopyKeptWhileItsWorkspaceIsLocked(t *testing.T) {
	h, s := stoppedWithAFile(t)
	ctx := context.Background()

	// An API node (not started: no scheduler, no listener of its own
	// that would look at its copies meanwhile) with a data directory of
	// its own: a person's read brings its copy back from the stop's
	// snapshot, though the environment stays stopped.
	root := filepath.Join(t.TempDir(), "workspaces")
	api, err := engine.New(h.store, &engine.Config{WorkspaceRoot: root, NodeID: "node-b", Clock: h.clock})
	require.NoError(t, err)
	listing, err := api.ListFiles(ctx, s.ID, "")
	require.NoError(t, err)
	require.NotEmpty(t, listing.Entries)
	copyOnB := filepath.Join(root, s.ID)
	require.FileExists(t, filepath.Join(copyOnB, "a.txt"))
	require.Len(t, events(t, h, s.ID, lt.EventEnvironmentStopped), 1)
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentProvisioned, lt.EventEnvironmentRestored), "still stopped")

	unlock := api.HoldWorkspaceForTest(s.ID)
	api.DiscardIfStaleForTest(ctx, s.ID)
	require.FileExists(t, filepath.Join(copyOnB, "a.txt"), "a copy whose workspace lock is held stays")
	unlock()

	api.DiscardIfStaleForTest(ctx, s.ID)
	require.NoDirExists(t, copyOnB, "let go, the stale copy is removed")
	checkJournal(t, h.store, s.ID)
}

// TestReadThatCannotWaitForTheCopyIsUnavailable: a person's read of a
// stopped session finds this node's copy discarded while a claim of this
// node holds the workspace (bringing it back) for longer than a read
// waits. The read is a 503 to try again, never the empty workspace the
// discard left; it makes no copy of its own under the claim. The wait
// (lockWait) passes in a synctest bubble, taking no real time.
func TestReadThatCannotWaitForTheCopyIsUnavailable(t *testing.T) {
	h, s := stoppedWithAFile(t)
	ctx := context.Background()
	api, copyOnB := apiNodeWithACopy(t, h, s)
	require.NoError(t, os.RemoveAll(copyOnB), "the discard removes the copy")

	synctest.Test(t, func(t *testing.T) {
		claim := api.ShareWorkspaceForTest(s.ID)
		defer claim()
		_, err := api.ListFiles(ctx, s.ID, "")
		requireAPIError(t, err, "unavailable", "is being brought back from its snapshot: try again")
		_, _, err = api.OpenFile(ctx, s.ID, "a.txt")
		requireAPIError(t, err, "unavailable", "is being brought back from its snapshot: try again")
	})
	require.NoDirExists(t, copyOnB, "nothing read or made under the claim")
	require.Zero(t, api.WorkspaceLockHoldersForTest(s.ID), "the reads let go of the lock")
	checkJournal(t, h.store, s.ID)
}

// apiNodeWithACopy makes an API node (not started) with a data directory
// of its own, on which a person's read brought a copy of s's workspace
// back from the stop's snapshot; it returns the node and where the copy
// is.
func apiNodeWithACopy(t *testing.T, h *harness, s *lt.Session) (*engine.Engine, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "workspaces")
	api, err := engine.New(h.store, &engine.Config{WorkspaceRoot: root, NodeID: "node-b", Clock: h.clock})
	require.NoError(t, err)
	_, err = api.ListFiles(context.Background(), s.ID, "")
	require.NoError(t, err)
	copyOnB := filepath.Join(root, s.ID)
	require.FileExists(t, filepath.Join(copyOnB, "a.txt"))
	return api, copyOnB
}

// stoppedWithAFile starts a session on node-a that writes a.txt, parks,
// and is idle-stopped at a snapshot holding it. The snapshots' owners are
// kept, as a server's environments keep them: an API node's read checks
// the session's project owns the stop's snapshot.
func stoppedWithAFile(t *testing.T) (*harness, *lt.Session) {
	t.Helper()
	h := newIdleStopHarness(t)
	h.keepOwners = true
	h.restart("node-a")
	s := create(t, h, idleSpec(t, 60, `[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo kept > a.txt"}}]},
	  {"tool_calls":[{"name":"lookup","arguments":{}}]},
	  {"text":"done"}]`,
		lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}), nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)
	h.clock.Advance(61 * time.Second)
	require.NotEmpty(t, stoppedEvent(t, h, s.ID).Snapshot)
	return h, s
}

// TestReadWaitingForADiscardSeesTheStopsSnapshot: a person's read of a
// stopped session comes while this node discards its stale copy (the
// discard holds the workspace's lock). Once the discard lets go, the read
// does not list the empty workspace the copy left, but the stop's
// snapshot, brought back as for any stale copy.
func TestReadWaitingForADiscardSeesTheStopsSnapshot(t *testing.T) {
	h, s := stoppedWithAFile(t)
	ctx := context.Background()
	api, copyOnB := apiNodeWithACopy(t, h, s)

	// The discard holds the lock; the read waits for it.
	unlock := api.HoldWorkspaceForTest(s.ID)
	type answer struct {
		l   *lt.FileListing
		err error
	}
	got := make(chan answer, 1)
	go func() {
		l, err := api.ListFiles(ctx, s.ID, "")
		got <- answer{l, err}
	}()
	require.Eventually(t, func() bool { return api.WorkspaceLockHoldersForTest(s.ID) == 2 }, 10*time.Second, time.Millisecond, "the read waits for the lock")
	require.NoError(t, os.RemoveAll(copyOnB), "the discard removes the copy")
	unlock()
	a := <-got
	require.NoError(t, a.err)
	var names []string
	for _, e := range a.l.Entries {
		names = append(names, e.Name)
	}
	require.Contains(t, names, "a.txt", "the stop's snapshot, not an empty workspace")
	checkJournal(t, h.store, s.ID)
}
