package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The web UI end to end, in headless Chromium against the real binary: a
// session that needs approvals appears in the inbox; the arguments edited in
// the page are checked (the tool's schema in the page, the server's 400 shown
// next to them) and the session goes on with them (the journal, the ledger
// and the artifact say so); the session page's timeline follows the session
// live without a reload; accepting the artifact changes the report; and a
// server with API keys asks for one. Every page is screenshotted.

// webuiAgent is a configured agent (so the page can read its function
// tool's schema) whose script writes a file and mails it, both behind an
// approval, then delivers the file.
func webuiAgent(t *testing.T) *lt.PutAgentRequest {
	t.Helper()
	script := []map[string]any{
		{"text": "I will draft the weekly report first.", "tool_calls": []map[string]any{
			{"name": "write_file", "arguments": map[string]any{"path": "report.md", "content": "# Draft\n\nnot reviewed"}}}},
		{"text": "The report is written; I will mail it to the CEO.", "tool_calls": []map[string]any{
			{"name": "send_email", "arguments": map[string]any{"to": "ceo@acme.com", "subject": "Weekly report"}}}},
		{"text": "Before I file it: which week is this?", "tool_calls": []map[string]any{
			{"name": "ask_human", "arguments": map[string]any{"question": "Which week does the report cover?", "choices": []string{"This week", "Last week"}}}}},
		{"tool_calls": []map[string]any{
			{"name": "finish", "arguments": map[string]any{"summary": "Weekly report written and mailed", "artifacts": []string{"report.md"}}}}},
	}
	raw, err := json.Marshal(script)
	require.NoError(t, err)
	return &lt.PutAgentRequest{Name: "reporter", Spec: lt.AgentSpec{
		// Prices, so that the report has costs to add up.
		Model: lt.ModelSpec{Provider: "scripted", Name: "demo", Script: raw,
			Pricing: json.RawMessage(`{"input_per_mtok": 3, "output_per_mtok": 15}`)},
		Tools: []lt.ToolSpec{
			{Name: "write_file"},
			{Name: "ask_human"},
			{Name: "finish"},
			{Name: "send_email", Type: "function", Description: "Send an email. The message leaves the company.",
				Affects: []string{"to"},
				Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"}},` +
					`"required":["to"],"additionalProperties":false}`)},
		},
		Policies: []lt.Policy{
			{Name: "review-writes", Tool: "write_file", Decision: lt.PolicyAsk, Reason: "a person reads what is written"},
			{Name: "outside-mail", Tool: "send_email", Decision: lt.PolicyAsk, Reason: "mail leaves the company"},
		},
		// The fourth model call reaches the soft limit: a budget action.
		Budget: &lt.Budget{MaxCostUSD: 5, MaxModelCalls: 20, SoftModelCalls: 3},
	}}
}

// pendingAction waits for the session's one pending action on tool.
func pendingAction(ctx context.Context, t *testing.T, srv *server, sessionID, typ, tool string) lt.Action {
	t.Helper()
	var found lt.Action
	waitFor(t, browserTimeout, fmt.Sprintf("a pending %s action on %s", typ, tool), func() (bool, error) {
		l, err := srv.api.ListActions(ctx, sessionID, lt.ActionPending)
		if err != nil {
			return false, err
		}
		for _, a := range l.Data {
			if string(a.Type) == typ && a.Tool == tool {
				found = a
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

func TestWebUIApproveEditAndReview(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	srv := startServer(t)

	_, err := srv.api.PutAgent(ctx, webuiAgent(t))
	require.NoError(t, err)
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		Agent: "reporter", Input: "Write this week's report and mail it to the CEO",
		Goal:        "A weekly report the CEO can read in two minutes",
		Constraints: []string{"No customer names"},
	})
	require.NoError(t, err)
	id := sess.ID

	// Tab A watches the session. A marker on its window tells, at the end,
	// that it was never reloaded: whatever it shows came over the stream.
	watcher := b.tab("session tab")
	b.do(watcher, "open the session page", navigate(srv.url+"/#/sessions/"+id))
	b.waitJS(watcher, "the timeline to show the first approval",
		`document.querySelector('#timeline li[data-type="action.required"]') !== null`)
	b.eval(watcher, `window.__notReloaded = true`, nil)
	require.Contains(t, b.text(watcher, "#stream-state"), "live")

	// Tab B is the inbox.
	inbox := b.root
	b.do(inbox, "open the inbox", navigate(srv.url+"/#/inbox"))
	write := pendingAction(ctx, t, srv, id, "approval", "write_file")
	card := fmt.Sprintf(`article[data-action-id=%q]`, write.ID)
	b.waitJS(inbox, "the write_file approval in the inbox", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(card)))
	require.Contains(t, b.text(inbox, card+" .sha-value"), write.ArgumentsSHA256, "the card shows the hash it approves")
	require.Contains(t, b.text(inbox, card), "workspace file report.md", "the card says what the call affects")
	b.waitJS(inbox, "the card to name the session's goal", fmt.Sprintf(
		`(document.querySelector(%s + ' .goal') || {}).innerText?.includes('weekly report the CEO')`, jsString(card)))
	b.screenshot(inbox, "inbox")

	// An edit the server refuses: its 400 names the field, next to the
	// editor, and nothing is decided.
	b.click(inbox, card+` button[data-act="edit"]`)
	b.setValue(inbox, card+" textarea.args-editor", `{"path": "report.md", "content": "x", "mode": "0644"}`)
	b.click(inbox, card+` button[data-act="approve-edited"]`)
	b.waitJS(inbox, "the server's field error on the card", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText?.includes('arguments.mode: is not an allowed field')`, jsString(card+" .result")))
	still, err := srv.api.ListActions(ctx, id, lt.ActionPending)
	require.NoError(t, err)
	require.Len(t, still.Data, 1, "a refused edit decides nothing")

	// The edit that runs.
	const edited = "# Weekly report\n\nShipped the importer; two incidents, both closed."
	editedArgs, err := json.Marshal(map[string]string{"path": "report.md", "content": edited})
	require.NoError(t, err)
	b.setValue(inbox, card+" textarea.args-editor", string(editedArgs))
	b.click(inbox, card+` button[data-act="approve-edited"]`)
	b.waitJS(inbox, "the approval to be recorded", fmt.Sprintf(`document.querySelector(%s + '.decided') !== null`, jsString(card)))

	// The e-mail approval: the page checks the edit against the function
	// tool's schema before anything is sent.
	mail := pendingAction(ctx, t, srv, id, "approval", "send_email")
	mcard := fmt.Sprintf(`article[data-action-id=%q]`, mail.ID)
	b.waitJS(inbox, "the send_email approval, live", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(mcard)))
	b.click(inbox, mcard+` button[data-act="edit"]`)
	b.waitJS(inbox, "the schema to be found", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText?.includes("tool's JSON schema")`, jsString(mcard)))
	b.setValue(inbox, mcard+" textarea.args-editor", `{"to": 42, "subject": "Weekly report", "bcc": "x@y.z"}`)
	b.waitJS(inbox, "the schema errors", fmt.Sprintf(`(() => { const t = document.querySelector(%s).innerText;
		return t.includes('arguments.to: must be string, got integer') && t.includes('arguments.bcc: is not an allowed field'); })()`,
		jsString(mcard+" .check")))
	var disabled bool
	b.eval(inbox, fmt.Sprintf(`document.querySelector(%s).disabled`, jsString(mcard+` button[data-act="approve-edited"]`)), &disabled)
	require.True(t, disabled, "arguments that do not fit the schema cannot be approved")
	b.phone(inbox)
	b.screenshot(inbox, "inbox-phone")
	b.desktop(inbox)
	b.setValue(inbox, mcard+" textarea.args-editor", `{"to": "lead@acme.com", "subject": "Weekly report"}`)
	b.waitJS(inbox, "the edit to fit the schema", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText?.includes("fits the tool's schema")`, jsString(mcard+" .check")))
	b.click(inbox, mcard+` button[data-act="approve-edited"]`)

	// The approved call of the application function comes back as a
	// function_call action, with the edited arguments, answered here.
	fn := pendingAction(ctx, t, srv, id, "function_call", "send_email")
	require.JSONEq(t, `{"to": "lead@acme.com", "subject": "Weekly report"}`, string(fn.Arguments))
	fcard := fmt.Sprintf(`article[data-action-id=%q]`, fn.ID)
	b.waitJS(inbox, "the function call in the inbox", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(fcard)))
	b.setValue(inbox, fcard+" textarea.output-editor", `{"message_id": "m-1"}`)
	b.click(inbox, fcard+` button[data-act="output"]`)
	b.waitJS(inbox, "the output to be recorded", fmt.Sprintf(`document.querySelector(%s + '.decided') !== null`, jsString(fcard)))

	// The agent's question: its choices are buttons.
	q := pendingAction(ctx, t, srv, id, "input", "ask_human")
	qcard := fmt.Sprintf(`article[data-action-id=%q]`, q.ID)
	b.waitJS(inbox, "the question in the inbox", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(qcard)))
	b.click(inbox, qcard+` button[data-choice="This week"]`)

	// The soft limit on model calls: approved with a new one.
	budget := pendingAction(ctx, t, srv, id, "budget", "")
	bcard := fmt.Sprintf(`article[data-action-id=%q]`, budget.ID)
	b.waitJS(inbox, "the budget action in the inbox", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(bcard)))
	b.screenshot(inbox, "inbox-budget")
	var stray bool
	b.eval(inbox, `[...document.querySelectorAll('article.action')].some(a => /(^|\n)(null|undefined)(\n|$)/.test(a.innerText))`, &stray)
	require.False(t, stray, "a card shows a stray null or undefined")
	b.setValue(inbox, bcard+" input.budget-soft", "10")
	b.click(inbox, bcard+` button[data-act="budget-approve"]`)
	b.waitJS(inbox, "the budget approval to be recorded", fmt.Sprintf(`document.querySelector(%s + '.decided') !== null`, jsString(bcard)))

	// Tab A followed all of it without a reload.
	b.waitJS(watcher, "the timeline to show the end of the turn",
		`document.querySelector('#timeline li[data-type="turn.completed"]') !== null`)
	var notReloaded bool
	b.eval(watcher, `window.__notReloaded === true`, &notReloaded)
	require.True(t, notReloaded, "the session page was reloaded")
	b.waitJS(watcher, "the status to become idle", `document.querySelector('.head-status [data-status="idle"]') !== null`)
	for _, typ := range []string{"action.resolved", "tool.completed", "artifact.created", "checkpoint.created"} {
		var n int
		b.eval(watcher, fmt.Sprintf(`document.querySelectorAll('#timeline li[data-type=%q]').length`, typ), &n)
		require.Positive(t, n, "the timeline has no %s", typ)
	}
	b.screenshot(watcher, "session")

	// The journal: the tool ran with the edited arguments; the question got
	// its answer; the budget its new soft limit.
	requireRanWithEdits(ctx, t, srv, id, write, edited)
	answered, err := srv.api.GetAction(ctx, q.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"answer": "This week"}`, string(answered.Resolution))
	final, err := srv.api.GetSession(ctx, id)
	require.NoError(t, err)
	require.Equal(t, int64(10), final.Budget.SoftModelCalls)

	// The artifact, previewed as Markdown; the trace as a waterfall; the
	// ledger.
	b.click(watcher, `button[data-tab="artifacts"]`)
	b.waitJS(watcher, "the artifact preview", `(document.querySelector('#artifact-preview h1') || {}).innerText === 'Weekly report'`)
	b.screenshot(watcher, "session-artifacts")
	b.click(watcher, `button[data-tab="trace"]`)
	b.waitJS(watcher, "the waterfall", `document.querySelectorAll('#waterfall .wf-row[data-kind="tool_call"]').length >= 3`)
	b.click(watcher, `#waterfall .wf-row[data-kind="turn"]`)
	b.screenshot(watcher, "session-trace")
	b.click(watcher, `button[data-tab="effects"]`)
	b.waitJS(watcher, "the effect ledger", `document.querySelectorAll('#effects-table tbody tr').length >= 2`)

	// The report before and after the review.
	b.goTo(inbox, "#/reports")
	row := fmt.Sprintf(`#report-table tr[data-task-id=%q]`, id)
	b.waitJS(inbox, "the task in the report", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(row)))
	require.Contains(t, b.text(inbox, row+" .accepted-cell"), "not reviewed")
	require.Equal(t, "0 / 0", b.text(inbox, `[data-total="accepted"] .value`))

	b.click(watcher, `button[data-tab="timeline"]`)
	b.setValue(watcher, "#review-note", "Clear and short.")
	b.click(watcher, "#review-accept")
	b.waitJS(watcher, "the review to show", `(document.querySelector('#review-state') || {}).innerText?.startsWith('Accepted')`)
	b.waitJS(watcher, "the review in the timeline", `document.querySelector('#timeline li[data-type="session.reviewed"]') !== null`)

	// Back to the reports (a new visit, as a person would come back).
	b.goTo(inbox, "#/sessions")
	b.waitJS(inbox, "the session in the list", fmt.Sprintf(`document.querySelector('#sessions-table tr[data-session-id=%q]') !== null`, id))
	b.screenshot(inbox, "sessions")
	b.goTo(inbox, "#/reports")
	b.waitJS(inbox, "the accepted task in the report", fmt.Sprintf(
		`(document.querySelector(%s) || {}).dataset?.accepted === 'true'`, jsString(row+" .accepted-cell")))
	require.Equal(t, "1 / 1", b.text(inbox, `[data-total="accepted"] .value`))
	require.Equal(t, "100%", b.text(inbox, `[data-total="acceptance_rate"] .value`))
	require.Regexp(t, `^\$0\.\d+$`, b.text(inbox, `[data-total="cost_per_accepted_task"] .value`))
	require.Equal(t, "4.00", b.text(inbox, `[data-total="asks_per_task"] .value`), "two approvals, a question and a budget limit")
	var complete string
	b.eval(inbox, fmt.Sprintf(`document.querySelector(%s).dataset.complete`, jsString(row+" .input-cell")), &complete)
	require.Equal(t, "false", complete, "the task asked a question: its input was not complete")
	b.waitJS(inbox, "the chart", `document.querySelectorAll('#report-chart svg rect.bar-accepted').length === 1`)
	b.screenshot(inbox, "reports")

	// Fork from the turn's checkpoint with a new turn, then send the fork a
	// follow-up, all from the page.
	b.click(watcher, `button[data-tab="checkpoints"]`)
	last := `ol.checkpoints li.checkpoint:last-child`
	b.waitJS(watcher, "the checkpoints", fmt.Sprintf(`(document.querySelector(%s) || {}).innerText?.includes('turn 1')`, jsString(last)))
	b.click(watcher, last+" button.fork")
	b.setValue(watcher, last+" textarea.fork-input", "Now draft next week's outline")
	b.click(watcher, last+` button[data-act="fork"]`)
	b.waitJS(watcher, "the fork's page", fmt.Sprintf(
		`location.hash.startsWith('#/sessions/ses_') && !location.hash.includes(%s) && document.querySelector('.overview')?.innerText.includes('Forked from')`, jsString(id)))
	var forkHash string
	b.eval(watcher, `location.hash`, &forkHash)
	forkID := strings.TrimPrefix(forkHash, "#/sessions/")
	b.waitJS(watcher, "the fork's new turn to end", `document.querySelectorAll('#timeline li[data-type="turn.completed"]').length >= 2`)
	b.setValue(watcher, "#follow-up", "Add the on-call rota too")
	b.click(watcher, "#send-turn")
	b.waitJS(watcher, "the follow-up turn in the timeline", `document.querySelectorAll('#timeline li[data-type="turn.created"]').length >= 3`)
	fork, err := srv.api.GetSession(ctx, forkID)
	require.NoError(t, err)
	require.NotNil(t, fork.ForkedFrom)
	require.Equal(t, id, fork.ForkedFrom.SessionID)
	turns, err := srv.api.ListTurns(ctx, forkID)
	require.NoError(t, err)
	require.Len(t, turns.Data, 3, "the copied turn, the fork's turn and the follow-up")
	require.Equal(t, "Add the on-call rota too", turns.Data[2].Input)

	b.phone(watcher)
	b.screenshot(watcher, "session-phone")
}

// requireRanWithEdits checks the journal of a session whose write_file
// approval was approved with the content edited: the decision carries the
// edited arguments and their hash, the ledger's effect is bound to that
// hash, the tool wrote the edited bytes, and the artifact holds them.
func requireRanWithEdits(ctx context.Context, t *testing.T, srv *server, id string, approval lt.Action, content string) {
	t.Helper()
	events := journal(ctx, t, srv.api, id)
	requireGapFree(t, id, events)
	var resolved struct {
		ActionID        string          `json:"action_id"`
		Arguments       json.RawMessage `json:"arguments"`
		ArgumentsSHA256 string          `json:"arguments_sha256"`
	}
	var output struct {
		SHA256 string `json:"sha256"`
	}
	for _, ev := range events {
		switch ev.Type {
		case lt.EventActionResolved:
			var r struct {
				ActionID string `json:"action_id"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &r))
			if r.ActionID == approval.ID {
				require.NoError(t, json.Unmarshal(ev.Data, &resolved))
			}
		case lt.EventToolCompleted:
			var c struct {
				CallID string          `json:"call_id"`
				Output json.RawMessage `json:"output"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &c))
			if c.CallID == approval.CallID {
				require.NoError(t, json.Unmarshal(c.Output, &output))
			}
		}
	}
	require.Equal(t, approval.ID, resolved.ActionID, "no action.resolved for the write_file approval")
	require.JSONEq(t, fmt.Sprintf(`{"path": "report.md", "content": %s}`, jsString(content)), string(resolved.Arguments))
	require.NotEqual(t, approval.ArgumentsSHA256, resolved.ArgumentsSHA256, "the approval is bound to the edited arguments")
	sum := sha256.Sum256([]byte(content))
	require.Equal(t, hex.EncodeToString(sum[:]), output.SHA256, "write_file wrote the edited content")

	effects, err := srv.api.ListEffects(ctx, id)
	require.NoError(t, err)
	var bound bool
	for _, e := range effects.Data {
		if e.CallID == approval.CallID {
			require.Equal(t, resolved.ArgumentsSHA256, e.ArgumentsSHA256, "the ledger's effect runs the approved arguments")
			require.Equal(t, lt.EffectSucceeded, e.Status)
			bound = true
		}
	}
	require.True(t, bound, "no effect for the write_file call")

	arts, err := srv.api.ListArtifacts(ctx, id)
	require.NoError(t, err)
	require.Len(t, arts.Data, 1)
	data, _, err := srv.api.ArtifactContent(ctx, arts.Data[0].ID)
	require.NoError(t, err)
	require.Equal(t, content, string(data))
}

func TestWebUISignInWithAPIKey(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	const key = "lh-test-key-9f1c2b7d"
	srv := startServer(t, "--api-key", key)

	// The page itself is open (it holds no data); the API is not.
	client := &http.Client{Timeout: 10 * time.Second}
	page := httpGet(t, client, srv.url+"/", nil)
	require.Equal(t, http.StatusOK, page.status)
	csp := page.header.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'none'")
	require.Contains(t, csp, "script-src 'self'")
	require.NotContains(t, csp, "unsafe-inline")
	require.Equal(t, "no-cache", page.header.Get("Cache-Control"))
	etag := page.header.Get("ETag")
	require.NotEmpty(t, etag)
	require.Equal(t, http.StatusNotModified, httpGet(t, client, srv.url+"/", map[string]string{"If-None-Match": etag}).status)
	asset := regexp.MustCompile(`src="(/ui/[0-9a-f]{16}/js/main\.js)"`).FindStringSubmatch(page.body)
	require.NotNil(t, asset, "the page names its versioned script:\n%s", page.body)
	js := httpGet(t, client, srv.url+asset[1], nil)
	require.Equal(t, http.StatusOK, js.status)
	require.Contains(t, js.header.Get("Content-Type"), "text/javascript")
	require.Contains(t, js.header.Get("Cache-Control"), "immutable")
	require.Equal(t, http.StatusUnauthorized, httpGet(t, client, srv.url+"/v1/sessions", nil).status)

	sess, err := keyedClient(t, srv, key).CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Name: "demo",
			Script: json.RawMessage(`[{"text": "Hello from a keyed server."}]`)}},
		Input: "Say hello",
	})
	require.NoError(t, err)

	tab := b.root
	b.do(tab, "open the UI", navigate(srv.url+"/#/sessions/"+sess.ID))
	b.waitJS(tab, "the sign-in form", `document.querySelector('#login-form') !== null`)
	b.screenshot(tab, "sign-in")

	b.setValue(tab, "#api-key", "not-the-key")
	b.click(tab, "#sign-in")
	b.waitJS(tab, "the refusal", `(document.querySelector('.login-status') || {}).innerText?.includes('refused')`)

	b.setValue(tab, "#api-key", key)
	b.click(tab, "#sign-in")
	// The deep link opens after sign-in, and its event stream (fetch with
	// the bearer token, not EventSource) delivers the journal.
	b.waitJS(tab, "the session's timeline", `document.querySelector('#timeline li[data-type="turn.completed"]') !== null`)
	require.Contains(t, b.text(tab, "#stream-state"), "live")
	var leaked []string
	b.eval(tab, fmt.Sprintf(`performance.getEntriesByType('resource').map(e => e.name).filter(u => u.includes(%s))`, jsString(key)), &leaked)
	require.Empty(t, leaked, "the API key must never be in a URL")

	b.click(tab, "#sign-out")
	b.waitJS(tab, "the sign-in form after signing out", `document.querySelector('#login-form') !== null`)
	var stored string
	b.eval(tab, `sessionStorage.getItem('longhaul.apiKey') || ''`, &stored)
	require.Empty(t, stored, "signing out forgets the key")
}

// TestWebUIModules runs the page's own modules in the browser on inputs
// that the end-to-end flows do not reach: the event-stream parser fed one
// byte at a time with every line ending, the schema check, and the Markdown
// renderer given markup and script.
func TestWebUIModules(t *testing.T) {
	b := startBrowser(t)
	srv := startServer(t)
	tab := b.root
	b.do(tab, "open the UI", navigate(srv.url+"/#/sessions"))
	b.waitJS(tab, "the sessions page", `document.querySelector('#sessions-table tr.empty') !== null`)
	b.screenshot(tab, "sessions-empty")
	base := `document.querySelector('script[type=module]').src.replace(/js\/main\.js$/, '')`

	var frames []map[string]string
	b.eval(tab, `(async () => {
		const { SSEParser } = await import(`+base+` + 'js/sse.js');
		const out = [];
		const p = new SSEParser((f) => out.push(f));
		const stream = ': ping\r\nid: 7\r\nevent: tool.completed\r\ndata: {"a":\r\ndata: 1}\r\n\r\n' +
			'data: no id given\n\nid: t1.abc\rdata: cr only\r\r: comment\n\nid\ndata: x\n\n';
		const bytes = new TextEncoder().encode(stream);
		for (let i = 0; i < bytes.length; i++) p.push(bytes.subarray(i, i + 1));
		return out;
	})()`, &frames)
	require.Equal(t, []map[string]string{
		{"id": "7", "event": "tool.completed", "data": "{\"a\":\n1}"},
		{"id": "7", "event": "message", "data": "no id given"},
		{"id": "t1.abc", "event": "message", "data": "cr only"},
		{"id": "", "event": "message", "data": "x"},
	}, frames)

	var errs []map[string]string
	b.eval(tab, `(async () => {
		const { validate } = await import(`+base+` + 'js/schema.js');
		const schema = {type: 'object', required: ['to', 'n'], additionalProperties: false,
			properties: {to: {type: 'string', pattern: '@'}, n: {type: 'integer', minimum: 1},
				tags: {type: 'array', items: {enum: ['a', 'b']}}}};
		return validate(schema, {to: 'nobody', n: 0, tags: ['a', 'c'], x: true});
	})()`, &errs)
	require.ElementsMatch(t, []map[string]string{
		{"path": "arguments.to", "message": "must match @"},
		{"path": "arguments.n", "message": "must be >= 1"},
		{"path": "arguments.tags[1]", "message": `must be one of "a", "b"`},
		{"path": "arguments.x", "message": "is not an allowed field"},
	}, errs)

	var md struct {
		Scripts, Links, Images int
		Text, Href             string
	}
	b.eval(tab, `(async () => {
		const { render } = await import(`+base+` + 'js/markdown.js');
		const el = render('# Title\n\n<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned=2">\n\n' +
			'[bad](javascript:alert(1)) and [good](https://example.org/a) **bold** `+"`code`"+`');
		document.body.append(el);
		const r = {Scripts: el.querySelectorAll('script').length, Links: el.querySelectorAll('a').length,
			Images: el.querySelectorAll('img').length, Text: el.innerText, Href: el.querySelector('a').getAttribute('href')};
		el.remove();
		return r;
	})()`, &md)
	require.Zero(t, md.Scripts, "markup in Markdown is shown as text")
	require.Zero(t, md.Images)
	require.Equal(t, 1, md.Links, "a javascript: link is not a link")
	require.Equal(t, "https://example.org/a", md.Href)
	require.Contains(t, md.Text, "<script>window.__pwned = 1</script>")
	var pwned bool
	b.eval(tab, `window.__pwned !== undefined`, &pwned)
	require.False(t, pwned)
}

type httpAnswer struct {
	status int
	header http.Header
	body   string
}

func httpGet(t *testing.T, c *http.Client, url string, header map[string]string) httpAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return httpAnswer{status: resp.StatusCode, header: resp.Header, body: strings.TrimSpace(string(body))}
}
