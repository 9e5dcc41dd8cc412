package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A retry (its claim taken over) makes the fork, and the fork works on in
// its workspace; then the first run of the same request, which stalled,
// goes on: it answers with the fork, and restores nothing over its work.
func TestSeededForkOfALateFirstRunLeavesTheForksWorkspace(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"draft.md","content":"v1"}}]},
	  {"text":"origin done"}]`, lt.ToolSpec{Name: "write_file"})
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	cps, err := h.eng.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	var cp *lt.Checkpoint
	for i := range cps {
		if cps[i].Kind == lt.CheckpointStep && cps[i].Step == 1 {
			cp = &cps[i]
		}
	}
	require.NotNil(t, cp)
	require.NotEmpty(t, cp.Snapshot)
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()

	seed := seedAt(h.clock.Now())
	// The retry (its claim taken over) runs first and makes the fork.
	f, err := h.eng.ForkSession(engine.WithCreationSeed(ctx, seed, true), s.ID, &lt.ForkRequest{CheckpointID: cp.ID}, "")
	require.NoError(t, err)
	ws := filepath.Join(h.dir, "workspaces", f.ID)
	// The fork works on: its workspace changes.
	require.NoError(t, os.WriteFile(filepath.Join(ws, "draft.md"), []byte("fork's work"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "new.txt"), []byte("fork's file"), 0o644))
	// The stalled first run goes on.
	late, err := h.eng.ForkSession(engine.WithCreationSeed(ctx, seed, false), s.ID, &lt.ForkRequest{CheckpointID: cp.ID}, "")
	require.NoError(t, err)
	require.Equal(t, f.ID, late.ID, "the fork the retry made")
	data, err := os.ReadFile(filepath.Join(ws, "draft.md"))
	require.NoError(t, err)
	require.Equal(t, "fork's work", string(data), "the checkpoint was not restored over the fork's work")
	require.FileExists(t, filepath.Join(ws, "new.txt"))
}
