package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

const twoTurnSpec = `{"model": {"provider": "scripted", "script": [{"text": "First answer."}, {"text": "Shorter answer."}]}}`

// TestSendFollowUp: send starts the session's next turn with the message
// and follows that turn only (not the first turn's events again) to its
// output.
func TestSendFollowUp(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spec := writeFile(t, "spec.json", twoTurnSpec)
	first := cliOK(t, "run", "--server", s.url, "--agent-spec", spec, "Answer")
	require.Contains(t, first, "Output:\nFirst answer.")
	id := cliJSON[[]lt.Session](t, "ls", "--json", "--server", s.url)[0].ID

	out := cliOK(t, "send", id, "Make it shorter", "--server", s.url)
	require.Contains(t, out, "Output:\nShorter answer.")
	require.NotContains(t, out, "First answer.", "only the new turn's events")
	require.Regexp(t, `turn turn_\S+ of session `+id+` is \w+; following it`, out)
	turns, err := s.client.ListTurns(t.Context(), id)
	require.NoError(t, err)
	require.Len(t, turns.Data, 2)
	require.Equal(t, "Make it shorter", turns.Data[1].Input)

	r := cliRun(t, "send", "ses_missing", "hello", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "code:    not_found (HTTP 404)")
	r = cliRun(t, "send", id, "  ", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.True(t, strings.Contains(r.stderr, "INPUT is empty"), r.stderr)
}

// TestRunSetsEveryLimit: run's limit flags become the session's budget.
func TestRunSetsEveryLimit(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spec := writeFile(t, "spec.json", twoTurnSpec)
	sess := cliJSON[lt.Session](t, "run", "--server", s.url, "--agent-spec", spec, "--detach", "--json",
		"--max-cost", "5", "--soft-cost", "2", "--max-tokens", "2000000", "--soft-tokens", "1000000",
		"--max-model-calls", "200", "--soft-model-calls", "100", "--max-tool-calls", "500", "--soft-tool-calls", "250",
		"--max-wall", "72h", "--soft-wall", "24h", "Answer")
	require.Equal(t, lt.Budget{MaxCostUSD: 5, SoftCostUSD: 2, MaxTokens: 2000000, SoftTokens: 1000000,
		MaxModelCalls: 200, SoftModelCalls: 100, MaxToolCalls: 500, SoftToolCalls: 250,
		MaxWallSeconds: 72 * 3600, SoftWallSeconds: 24 * 3600}, sess.Budget)
}
