package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAdversarialRunnerFiles_PlantedSymlinkOnAPendingPath runs the real
// binary as a server and a `longhaul runner`. The model, after its last
// checkpoint, makes notes a symlink to its scripts directory and waits;
// the runner is killed, so a person's upload of notes/today.md is checked
// against the journal's snapshot (where notes is free) and journaled. The
// runner comes back with its workspace: the change is not applied
// (workspace.change_not_applied, reason conflict: the path is not what
// the person saw, it goes through a symlink), nothing is written through
// the link into scripts, and the turn goes on.
func TestAdversarialRunnerFiles_PlantedSymlinkOnAPendingPath(t *testing.T) {
	t.Parallel()
	a := parkedOnAKilledRunner(t, "lh-adv-runner-planted-bootstrap", "Plant a link.",
		[]map[string]any{shellOf("mkdir scripts && echo deploy > scripts/deploy.sh")},
		[]map[string]any{shellOf("ln -s scripts notes"), {"name": "lookup", "arguments": map[string]any{}}},
		[]map[string]any{shellOf("ls scripts")})
	change, err := a.admin.PutFile(t.Context(), a.s.ID, "notes/today.md", []byte("by-a-person\n"), "")
	require.NoError(t, err, "the snapshot view has no notes: the change is accepted")
	require.Equal(t, lt.BasedOnAbsent, change.BasedOn)

	lastOutput, notApplied := a.resume(t)
	require.Len(t, notApplied, 1, "the change is not applied through the planted link")
	require.Equal(t, change.Seq, notApplied[0].ChangeSeq)
	require.Equal(t, "notes/today.md", notApplied[0].Path)
	require.Equal(t, lt.NotAppliedConflict, notApplied[0].Reason)
	require.Equal(t, lt.BasedOnAbsent, notApplied[0].BasedOn)
	require.Equal(t, "a path through a symlink", notApplied[0].Found, "what the path holds now, not what the person saw")
	require.NotContains(t, lastOutput, "today.md", "the model's scripts hold nothing of the person's")
	ws := filepath.Join(a.r.data, "workspaces", a.s.ID)
	_, err = os.Lstat(filepath.Join(ws, "scripts", "today.md"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing written through the link")
	got, err := os.ReadFile(filepath.Join(ws, "scripts", "deploy.sh"))
	require.NoError(t, err)
	require.Equal(t, "deploy\n", string(got))
}
