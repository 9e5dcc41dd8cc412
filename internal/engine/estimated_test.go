package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// silentProvider answers without reporting usage, as some
// OpenAI-compatible servers do.
type silentProvider struct{}

func (silentProvider) Respond(context.Context, *model.Request) (*model.Response, error) {
	return &model.Response{Text: "no usage reported"}, nil
}

// TestEstimatedUsageIsMarked: token counts the server estimated (a
// provider that reports no usage, a scripted step without usage) say so
// in model.responded and in the turn's and session's totals; counts the
// provider reported do not.
func TestEstimatedUsageIsMarked(t *testing.T) {
	h := newHarnessWith(t, map[string]model.Provider{"silent": silentProvider{}}, nil)
	ctx := context.Background()
	run := func(sp *lt.AgentSpec) (*lt.Session, lt.Usage) {
		t.Helper()
		s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"})
		require.NoError(t, err)
		s = h.waitStatus(s.ID, lt.SessionIdle)
		responded := events(t, h, s.ID, lt.EventModelResponded)
		require.Len(t, responded, 1)
		return s, data[lt.ModelRespondedData](t, responded[0]).Usage
	}

	s, u := run(&lt.AgentSpec{Model: lt.ModelSpec{Provider: "silent", Name: "local"}, Instructions: "Answer."})
	require.True(t, u.Estimated, "counted offline")
	require.Positive(t, u.InputTokens)
	require.True(t, s.Usage.Estimated, "the session's total includes an estimate")
	turns, err := h.eng.ListTurns(ctx, s.ID)
	require.NoError(t, err)
	require.True(t, turns[0].Usage.Estimated, "the turn's total includes an estimate")

	s, u = run(spec(t, `[{"text":"done"}]`))
	require.True(t, u.Estimated, "the scripted step gave no usage")
	require.True(t, s.Usage.Estimated)

	s, u = run(spec(t, `[{"text":"done","usage":{"input_tokens":12,"output_tokens":3}}]`))
	require.False(t, u.Estimated, "the step's own counts")
	require.Equal(t, int64(12), u.InputTokens)
	require.False(t, s.Usage.Estimated)
}
