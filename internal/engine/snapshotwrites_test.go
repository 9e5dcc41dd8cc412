package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/snapshot"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestIncrementalCheckpointsSeeEveryWrite: checkpoints start from the
// previous one (snapshotwrites.go), so each step's snapshot must still hold
// exactly what the workspace holds: the files write_file and edit_file
// wrote, and everything a shell command changed, including a rewrite of
// the same size within the same second as the write before it.
func TestIncrementalCheckpointsSeeEveryWrite(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"one"}}]},
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"dir/b.txt","content":"two"}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"printf x > c.txt && printf ONE > a.txt"}}]},
	  {"tool_calls":[{"name":"edit_file","arguments":{"path":"a.txt","old":"ONE","new":"uno"}}]},
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"dir/new/d.txt","content":"four"}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"rm -r dir/new"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "write_file"}, lt.ToolSpec{Name: "edit_file"}, lt.ToolSpec{Name: "shell"})
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	want := []map[string]string{
		{"a.txt": "one"},
		{"a.txt": "one", "dir/b.txt": "two"},
		{"a.txt": "ONE", "c.txt": "x", "dir/b.txt": "two"},
		{"a.txt": "uno", "c.txt": "x", "dir/b.txt": "two"},
		{"a.txt": "uno", "c.txt": "x", "dir/b.txt": "two", "dir/new/d.txt": "four"},
		{"a.txt": "uno", "c.txt": "x", "dir/b.txt": "two"},
	}
	cps, err := h.eng.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	var steps []lt.Checkpoint
	for _, c := range cps {
		if c.Kind == lt.CheckpointStep {
			steps = append(steps, c)
		}
	}
	require.Len(t, steps, len(want))
	for i, c := range steps {
		require.Empty(t, c.SnapshotError)
		m, err := snapshot.Load(ctx, h.store, c.Snapshot)
		require.NoError(t, err)
		got := map[string]string{}
		for _, e := range m.Entries {
			if e.Type == snapshot.TypeFile {
				got[e.Path] = e.SHA256
			}
		}
		wantSums := map[string]string{}
		for p, content := range want[i] {
			sum := sha256.Sum256([]byte(content))
			wantSums[p] = hex.EncodeToString(sum[:])
		}
		require.Equal(t, wantSums, got, "step %d", c.Step)
		require.Equal(t, len(want[i]), c.Files, "step %d", c.Step)
		var bytes int64
		for _, content := range want[i] {
			bytes += int64(len(content))
		}
		require.Equal(t, bytes, c.Bytes, fmt.Sprintf("step %d", c.Step))
	}
}
