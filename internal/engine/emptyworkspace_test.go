package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestEmptyWorkspaceAcrossARestart: a session whose tools never wrote a
// file gets no snapshot list beside its workspace (the list's file is an
// inode a session), and its next turn after a restart of the node finds the
// copy as the journal left it: no environment.lost, no restore. A file put
// in the copy meanwhile (behind the journal's back) is found, as before.
func TestEmptyWorkspaceAcrossARestart(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[
		{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"},
		{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done again"},
		{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done a third time"}]`,
		lt.ToolSpec{Name: "list_files"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	require.DirExists(t, ws)
	require.NoFileExists(t, ws+".snapshots")
	checkpoints := len(events(t, h, s.ID, lt.EventCheckpointCreated))
	require.Positive(t, checkpoints)

	turn := func() {
		t.Helper()
		before := len(events(t, h, s.ID, lt.EventTurnCompleted))
		_, err := h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
		require.NoError(t, err)
		waitUntil(t, 10*time.Second, func() bool { return len(events(t, h, s.ID, lt.EventTurnCompleted)) > before })
		h.waitStatus(s.ID, lt.SessionIdle)
	}
	h.restart("node-a")
	// A person's read finds the copy current too (nothing restored, no
	// list written).
	listing, err := h.eng.ListFiles(ctx, s.ID, ".")
	require.NoError(t, err)
	require.Empty(t, listing.Entries)
	require.NoFileExists(t, ws+".snapshots")
	turn()
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost, lt.EventEnvironmentRestored))
	require.Greater(t, len(events(t, h, s.ID, lt.EventCheckpointCreated)), checkpoints)
	require.NoFileExists(t, ws+".snapshots")

	// Not the empty snapshot any longer: restored to it.
	require.NoError(t, os.WriteFile(filepath.Join(ws, "stray.txt"), []byte("x"), 0o600))
	h.restart("node-a")
	turn()
	require.Len(t, events(t, h, s.ID, lt.EventEnvironmentLost), 1)
	require.NoFileExists(t, filepath.Join(ws, "stray.txt"))
	checkJournal(t, h.store, s.ID)
}

// TestWorkspaceThatMayBeSharedKeepsItsList: a session that may spawn a
// sub-agent into its workspace keeps its snapshot list on disk from its
// first checkpoint, empty as the workspace is (its entry must outlive a
// restart once a sub-agent's files are in the copy).
func TestWorkspaceThatMayBeSharedKeepsItsList(t *testing.T) {
	h := newHarness(t)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "list_files"}, lt.ToolSpec{Name: "spawn_agent"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.FileExists(t, filepath.Join(h.dir, "workspaces", s.ID+".snapshots"))
}
