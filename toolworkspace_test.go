package longhaul_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestToolWithoutWorkspace: a Go tool made WithoutWorkspace gets no
// workspace path (it said it needs none), while one without the option
// gets the session's; a session of such calls keeps no snapshot list
// beside its empty workspace, while the other's is written before its
// second call (the first step's checkpoint, of the empty workspace, kept
// in memory until a call may change the copy).
func TestToolWithoutWorkspace(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	paths := map[string]string{}
	seen := func(name string) func(context.Context, longhaul.ToolCall, struct{}) (string, error) {
		return func(_ context.Context, call longhaul.ToolCall, _ struct{}) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			paths[name] = call.Workspace
			return "ok", nil
		}
	}
	quote := longhaul.Tool("quote", "Gets a price.", lt.EffectRead, seen("quote"), longhaul.WithoutWorkspace[struct{}, string]())
	scan := longhaul.Tool("scan", "Reads the workspace.", lt.EffectRead, seen("scan"))
	dir := t.TempDir()
	rt := open(t, longhaul.Options{DataDir: dir, Tools: []*longhaul.GoTool{quote, scan}})

	spec := scripted(`[{"tool_calls":[{"name":"quote","arguments":{}}]},{"tool_calls":[{"name":"quote","arguments":{}}]},{"text":"ok"}]`, quote.Spec())
	s, err := rt.CreateSession(t.Context(), &lt.CreateSessionRequest{AgentSpec: &spec, Input: "go"})
	require.NoError(t, err)
	waitStatus(t, rt, s.ID, lt.SessionIdle)
	spec = scripted(`[{"tool_calls":[{"name":"scan","arguments":{}}]},{"tool_calls":[{"name":"scan","arguments":{}}]},{"text":"ok"}]`, scan.Spec())
	s2, err := rt.CreateSession(t.Context(), &lt.CreateSessionRequest{AgentSpec: &spec, Input: "go"})
	require.NoError(t, err)
	waitStatus(t, rt, s2.ID, lt.SessionIdle)

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, paths["quote"])
	require.DirExists(t, paths["scan"])
	require.Equal(t, s2.ID, filepath.Base(paths["scan"]))
	require.NoFileExists(t, filepath.Join(filepath.Dir(paths["scan"]), s.ID+".snapshots"))
	require.FileExists(t, filepath.Join(filepath.Dir(paths["scan"]), s2.ID+".snapshots"), "written before a tool that may open the workspace, after the first step's empty checkpoint")
}
