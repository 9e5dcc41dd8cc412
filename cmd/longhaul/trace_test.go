package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestTraceCommand(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	sess, err := s.client.CreateSession(context.Background(), &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Name: "demo", Script: json.RawMessage(`[
			  {"error": {"status": 500}},
			  {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.md", "content": "a"}}],
			   "usage": {"input_tokens": 1200, "output_tokens": 30}, "cost_usd": 0.0125},
			  {"text": "done", "usage": {"input_tokens": 1300, "output_tokens": 4}, "cost_usd": 0.0131}]`)},
			Instructions: "Write.",
			Tools:        []lt.ToolSpec{{Name: "write_file"}},
		},
		Input: "write a.md",
	})
	require.NoError(t, err)
	s.waitEvent(t, sess.ID, lt.EventTurnCompleted)

	out := cliOK(t, "trace", sess.ID, "--server", s.url)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Equal(t, "Session "+sess.ID+" (agent inline v1): 1 turn, 2,500 in, 34 out, $0.0256", lines[0], out)
	require.Regexp(t, `^SPAN +DURATION +IN +OUT +COST +STATUS$`, lines[2])
	// The tree, line by line: name, then the columns.
	want := []string{
		`^turn 1 +\d+(ms|\.\ds) +2,500 +34 +\$0\.0256 +ok$`,
		`^├─ step 1 +\S+ +1,200 +30 +\$0\.0125 +ok$`,
		`^│  ├─ model demo +\S+ +0 +0 +\$0\.0000 +error: .+, retried$`,
		`^│  ├─ model demo +\S+ +1,200 +30 +\$0\.0125 +ok$`,
		`^│  └─ tool write_file +\S+ +ok$`,
		`^└─ step 2 +\S+ +1,300 +4 +\$0\.0131 +ok$`,
		`^   └─ model demo +\S+ +1,300 +4 +\$0\.0131 +ok$`,
	}
	require.Len(t, lines, 3+len(want), out)
	for i, re := range want {
		require.Regexp(t, regexp.MustCompile(re), lines[3+i], "line %d of\n%s", 3+i, out)
	}
	// Columns line up: every duration ends at the same place.
	col := strings.Index(lines[2], "DURATION") + len("DURATION")
	for _, l := range lines[3:] {
		require.Equal(t, ' ', []rune(l)[col], "line %q", l)
	}

	tr := cliJSON[lt.Trace](t, "trace", sess.ID, "--server", s.url, "--json", "--subagents")
	require.Equal(t, sess.ID, tr.SessionID)
	require.Len(t, tr.Spans, 1)
	require.Equal(t, int64(2500), tr.Spans[0].Usage.InputTokens)

	r := cliRun(t, "trace", "ses_missing", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "not_found")
	r = cliRun(t, "trace", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	r = cliRun(t, "trace", sess.ID, "--help")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "--subagents")
}
