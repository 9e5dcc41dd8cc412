package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestCheckpointFilesOfASnapshotNotOwned: a checkpoint's snapshot is
// read (listed, a file opened) only when the session's project owns it,
// as the session files' snapshot view is: a snapshot id journaled in the
// session's checkpoint is no proof that its blobs are the project's. The
// environments here record no owners, so the checkpoint journals a
// snapshot its project does not own: 409, also once another project owns
// it; served once the session's own project does.
func TestCheckpointFilesOfASnapshotNotOwned(t *testing.T) {
	h := newHarness(t)
	h.wrapEnvironments = func(b environment.Backend) environment.Backend { return b }
	h.keepOwners = false // the snapshots' owners are not recorded
	h.restart("node-a")
	ctx := context.Background()
	s := create(t, h, spec(t, `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"one"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "write_file"}), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	cps, err := h.eng.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	var cp lt.Checkpoint
	for _, c := range cps {
		if c.Snapshot != "" {
			cp = c
		}
	}
	require.NotEmpty(t, cp.Snapshot, "a checkpoint with a snapshot")
	owned, err := snapshot.Owned(ctx, h.store, lt.DefaultProject, cp.Snapshot)
	require.NoError(t, err)
	require.False(t, owned, "the test's premise: the session's project does not own its checkpoint's snapshot")

	refused := func() {
		t.Helper()
		_, err := h.eng.ListCheckpointFiles(ctx, s.ID, cp.ID, "")
		requireAPIError(t, err, lt.CodeConflict, "not its session's project's")
		_, _, err = h.eng.OpenCheckpointFile(ctx, s.ID, cp.ID, "a.txt")
		requireAPIError(t, err, lt.CodeConflict, "not its session's project's")
	}
	refused()
	// Another project's ownership does not make it this one's.
	_, err = snapshot.Claim(ctx, h.store, h.store, "beta", cp.Snapshot, snapshot.ClaimOptions{})
	require.NoError(t, err)
	refused()

	_, err = snapshot.Claim(ctx, h.store, h.store, lt.DefaultProject, cp.Snapshot, snapshot.ClaimOptions{})
	require.NoError(t, err)
	l, err := h.eng.ListCheckpointFiles(ctx, s.ID, cp.ID, "")
	require.NoError(t, err)
	require.Len(t, l.Entries, 1)
	_, rc, err := h.eng.OpenCheckpointFile(ctx, s.ID, cp.ID, "a.txt")
	require.NoError(t, err)
	require.Equal(t, "one", readAll(t, rc))
}
