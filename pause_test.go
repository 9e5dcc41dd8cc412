package longhaul_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRuntimePauseResume: the embedded runtime pauses a session waiting
// for a person at once and resumes it; a second resume is a conflict.
func TestRuntimePauseResume(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	ctx := t.Context()
	sp := scripted(`[{"tool_calls":[{"name":"ask_human","arguments":{"question":"Which city?"}}]},{"text":"done"}]`, lt.ToolSpec{Name: "ask_human"})
	s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &sp, Input: "go"})
	require.NoError(t, err)
	waitStatus(t, rt, s.ID, lt.SessionRequiresAction)

	p, err := rt.Pause(ctx, s.ID, nil)
	require.NoError(t, err)
	require.Equal(t, lt.SessionPaused, p.Status)
	r, err := rt.Resume(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, lt.SessionRequiresAction, r.Status)
	_, err = rt.Resume(ctx, s.ID)
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, lt.CodeConflict, ae.Code)
	_, err = rt.Pause(ctx, "", nil)
	require.EqualError(t, err, "pause session: sessionID is empty")
}
