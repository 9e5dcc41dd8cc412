package e2e

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The Effects tab in headless Chromium against the real binary: each row
// says what the call did and what came of it (two writes read apart, steps
// as integers), and clicking a row opens it whole, with the arguments and
// the output the journal holds.
func TestWebUIEffectRows(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	srv := startServer(t)

	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "write_file", "arguments": map[string]any{"path": "plan.md", "content": "first: the plan"}}}},
		{"tool_calls": []map[string]any{{"name": "write_file", "arguments": map[string]any{"path": "notes.md", "content": "second"}}}},
		{"tool_calls": []map[string]any{{"name": "write_file", "arguments": map[string]any{"path": "plan.md", "content": "first: the plan, revised"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "write two files", AgentSpec: &lt.AgentSpec{
		Model:    lt.ModelSpec{Provider: "scripted", Name: "demo", Script: script},
		Tools:    []lt.ToolSpec{{Name: "write_file"}},
		Policies: []lt.Policy{{Name: "revisions", Tool: "write_file", When: `args.content.contains("revised")`, Decision: lt.PolicyAsk}},
	}})
	require.NoError(t, err)

	// The approval of the rewrite shows, in the inbox, its plain summary,
	// the call as code and the diff it makes, line by line.
	page := b.root
	a := pendingAction(ctx, t, srv, sess.ID, "approval", "write_file")
	card := fmt.Sprintf(`article[data-action-id=%q]`, a.ID)
	b.do(page, "open the inbox", navigate(srv.url+"/#/inbox"))
	b.waitJS(page, "the approval's diff", fmt.Sprintf(`(document.querySelector(%s) || {}).innerText?.includes('+first: the plan, revised')`, jsString(card+" .evidence pre")))
	require.Equal(t, "Write plan.md (24 bytes)", b.text(page, card+" h3.summary"))
	require.Equal(t, `write_file(content="first: the plan, revised", path="plan.md")`, b.text(page, card+" code.call"))
	require.Contains(t, b.text(page, card+" .evidence pre"), "-first: the plan\n+first: the plan, revised")
	b.screenshot(page, "approval-diff")
	_, err = srv.api.DecideAction(ctx, sess.ID, a.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: a.ArgumentsSHA256})
	require.NoError(t, err)
	s := waitTerminal(ctx, t, srv, sess.ID, browserTimeout)
	require.Equal(t, lt.SessionIdle, s.Status)

	b.do(page, "open the session's effects", navigate(srv.url+"/#/sessions/"+sess.ID+"?tab=effects"))
	b.waitJS(page, "the three rows", `document.querySelectorAll('#effects-table tr.effect-row').length === 3`)
	table := b.text(page, "#effects-table")
	require.Contains(t, table, "Write plan.md (15 bytes)")
	require.Contains(t, table, "wrote 15 bytes to plan.md")
	require.Contains(t, table, "Write notes.md (6 bytes)")
	var steps []string
	b.eval(page, `[...document.querySelectorAll('#effects-table td[data-label="Step"]')].map((td) => td.innerText.trim())`, &steps)
	require.Equal(t, []string{"1", "2", "3"}, steps, "steps are integers")

	// Nothing whole until a row is clicked; then its arguments and output.
	require.True(t, evalBool(b, page, `[...document.querySelectorAll('#effects-table tr.effect-detail')].every((r) => r.hidden)`))
	b.click(page, `#effects-table tr.effect-row:first-of-type`)
	b.waitJS(page, "the first effect whole", `(document.querySelector('#effects-table tr.effect-detail:not([hidden]) .effect-arguments') || {}).innerText?.includes('first: the plan')`)
	detail := b.text(page, "#effects-table tr.effect-detail:not([hidden])")
	require.Contains(t, detail, `"path": "plan.md"`)
	require.Contains(t, detail, `"bytes": 15`)
	require.Contains(t, detail, "Idempotency key")
	b.screenshot(page, "effects-open")

	// Clicking it again closes it.
	b.click(page, `#effects-table tr.effect-row:first-of-type`)
	b.waitJS(page, "the row closed", `document.querySelector('#effects-table tr.effect-detail:not([hidden])') === null`)
}
