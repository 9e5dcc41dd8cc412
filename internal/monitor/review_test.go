package monitor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestParseVerdict(t *testing.T) {
	for _, tc := range []struct {
		in      string
		verdict string
		reasons []string
		bad     bool
	}{
		{in: `{"verdict":"ok"}`, verdict: "ok"},
		{in: " {\"verdict\":\"warn\",\"reasons\":[\"a\",\"b\"]}\n", verdict: "warn", reasons: []string{"a", "b"}},
		{in: "```json\n{\"verdict\":\"pause\",\"reasons\":[\"x\"]}\n```", verdict: "pause", reasons: []string{"x"}},
		{in: `Sure: {"verdict":"ok"}`, bad: true},
		{in: `{"verdict":"ok"} and more`, bad: true},
		{in: `{"verdict":"ok"}{"verdict":"pause"}`, bad: true},
		{in: `{"verdict":"OK"}`, bad: true},
		{in: `{"reasons":[]}`, bad: true},
		{in: `{"verdict":"ok","extra":1}`, bad: true},
		{in: `{"verdict":"ok","reasons":"no"}`, bad: true},
		{in: ``, bad: true},
	} {
		v, r, err := ParseVerdict(tc.in)
		if tc.bad {
			require.ErrorIs(t, err, ErrVerdict, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.verdict, v)
		require.Equal(t, tc.reasons, r)
	}
	many := make([]string, 30)
	for i := range many {
		many[i] = strings.Repeat("x", 900)
	}
	raw, _ := json.Marshal(map[string]any{"verdict": "warn", "reasons": many})
	_, r, err := ParseVerdict(string(raw))
	require.NoError(t, err)
	require.Len(t, r, maxReasons)
	require.LessOrEqual(t, len(r[0]), maxReasonBytes+len("…"))
}

// TestSummaryRedactsBeforeClipping: a secret cut by the clip would leave a
// fragment the redactor no longer knows; redaction comes first.
func TestSummaryRedactsBeforeClipping(t *testing.T) {
	secret := "S3CRET-" + strings.Repeat("k", 40)
	args, _ := json.Marshal(map[string]string{"command": strings.Repeat("a", clipArgs-30) + secret})
	data, _ := json.Marshal(lt.ToolRequestedData{CallID: "c1", Tool: "shell", Class: lt.EffectIrreversible, Arguments: args})
	red := func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED:K]") }
	it, ok := Summarize("ses_1", lt.Event{Seq: 3, Type: lt.EventToolRequested, Data: data}, red)
	require.True(t, ok)
	require.NotContains(t, string(it.Line), "S3CRET")
	require.Contains(t, string(it.Line), "[REDACTED:K]")
}

func TestBuildSummaryKeepsTheLatest(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var items []SummaryItem
	for i := range 100 {
		data, _ := json.Marshal(lt.ToolFailedData{CallID: "c", Tool: "read_file", Error: strings.Repeat("e", 100)})
		it, ok := Summarize("ses_1", lt.Event{Seq: int64(i + 1), Time: at.Add(time.Duration(i) * time.Second), Type: lt.EventToolFailed, Data: data}, nil)
		require.True(t, ok)
		items = append(items, it)
	}
	s := BuildSummary(items, 2000)
	require.LessOrEqual(t, len(s), 2000+40)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	require.True(t, strings.HasPrefix(lines[0], `{"omitted_older_items":`), lines[0])
	require.Contains(t, lines[len(lines)-1], `"seq":100`, "the most recent item is kept")
	require.Equal(t, "", BuildSummary(nil, 100))
}
