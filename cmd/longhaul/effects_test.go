package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestEffectsSayWhatEachCallDid: the ledger's table tells two writes apart
// by what they did and what came of it, steps as integers; one effect (or
// every one, with --full) is shown whole, arguments and output.
func TestEffectsSayWhatEachCallDid(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	spec := writeFile(t, "spec.json", `{
	  "model": {"provider": "scripted", "script": [
	    {"tool_calls": [{"name": "write_file", "arguments": {"path": "plan.md", "content": "first: the plan"}}]},
	    {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "second"}}]},
	    {"text": "done"}
	  ]},
	  "tools": [{"name": "write_file"}]
	}`)
	cliOK(t, "run", "--server", s.url, "--agent-spec", spec, "write two files")
	sessions := cliJSON[[]lt.Session](t, "ls", "--server", s.url, "--json")
	require.Len(t, sessions, 1)
	id := sessions[0].ID

	out := cliOK(t, "effects", id, "--server", s.url)
	require.Regexp(t, `(?m)^ID +STEP +TOOL +CLASS +STATUS +WHAT +RESULT +STARTED`, out)
	require.Regexp(t, `(?m)^eff_\S+ +1 +write_file +idempotent +succeeded +Write plan\.md \(15 bytes\) +wrote 15 bytes to plan\.md `, out)
	require.Regexp(t, `(?m)^eff_\S+ +2 +write_file +idempotent +succeeded +Write notes\.md \(6 bytes\) +wrote 6 bytes to notes\.md `, out)
	require.Contains(t, out, "longhaul effects "+id+" EFFECT_ID")

	effects := cliJSON[[]lt.Effect](t, "effects", id, "--server", s.url, "--json")
	require.Len(t, effects, 2)
	require.Empty(t, effects[0].Arguments, "the list is the summaries")
	one := cliOK(t, "effects", id, effects[0].ID, "--server", s.url)
	require.Contains(t, one, "Write plan.md (15 bytes)")
	require.Contains(t, one, `"content": "first: the plan"`)
	require.Contains(t, one, `"bytes": 15`)
	require.Contains(t, one, "Step:         1 (call 1 of turn ")

	full := cliOK(t, "effects", id, "--full", "--server", s.url)
	require.Contains(t, full, `"content": "first: the plan"`)
	require.Contains(t, full, `"content": "second"`)
	whole := cliJSON[[]lt.Effect](t, "effects", id, "--full", "--json", "--server", s.url)
	require.JSONEq(t, `{"path": "notes.md", "content": "second"}`, string(whole[1].Arguments))

	r := cliRun(t, "effects", id, "eff_nope", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "eff_nope")
}
