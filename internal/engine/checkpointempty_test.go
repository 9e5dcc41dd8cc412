package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// workspaceScribbler is an embedder's Go tool that writes in the workspace
// itself (not through the call's Environment) when told a name, and
// writes nothing otherwise.
type workspaceScribbler struct{}

func (workspaceScribbler) Name() string                { return "scribble" }
func (workspaceScribbler) Description() string         { return "Writes a file in the workspace, or nothing." }
func (workspaceScribbler) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (workspaceScribbler) Effect() lt.EffectClass      { return lt.EffectRead }
func (workspaceScribbler) Run(_ context.Context, c *tool.Call) (*tool.Result, error) {
	var args struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return nil, err
	}
	if args.Path != "" {
		p := filepath.Join(c.Workspace, filepath.FromSlash(args.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(args.Path), 0o644); err != nil {
			return nil, err
		}
	}
	return &tool.Result{Output: "ok"}, nil
}

// TestCheckpointAfterAGoToolInAnEmptyWorkspace: a Go tool of the
// embedder's may write in the workspace without the engine knowing; while
// the workspace is empty the snapshot Cache watches it instead of walking
// it after each such call, and what the tool wrote, in the workspace's
// directory or below a new one, is in the step's checkpoint all the same,
// as is a later write below it once it is no longer empty.
func TestCheckpointAfterAGoToolInAnEmptyWorkspace(t *testing.T) {
	h := newHarness(t, workspaceScribbler{})
	s := create(t, h, spec(t, `[
		{"tool_calls":[{"name":"scribble","arguments":{}}]},
		{"tool_calls":[{"name":"scribble","arguments":{}}]},
		{"tool_calls":[{"name":"scribble","arguments":{"path":"d/a.txt"}}]},
		{"tool_calls":[{"name":"scribble","arguments":{"path":"d/b.txt"}}]},
		{"tool_calls":[{"name":"scribble","arguments":{"path":"c.txt"}}]},
		{"text":"done"}]`, lt.ToolSpec{Name: "scribble"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	cps, err := h.eng.ListCheckpoints(context.Background(), s.ID)
	require.NoError(t, err)
	var files []int
	for _, c := range cps {
		require.Empty(t, c.SnapshotError)
		if c.Kind == lt.CheckpointStep {
			files = append(files, c.Files)
		}
	}
	require.Equal(t, []int{0, 0, 1, 2, 3}, files)
	require.Equal(t, cps[0].Snapshot, cps[1].Snapshot, "nothing written: the same snapshot")
	checkJournal(t, h.store, s.ID)
}
