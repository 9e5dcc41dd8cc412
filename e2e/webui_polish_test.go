package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// oneDateFormat is the one way the UI writes a point in time (dom.js
// fmtTime): every <time> element's text matches it.
const oneDateFormat = `^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$`

// requireOneDateFormat checks every <time> on the page: at least one is
// there, and all read alike.
func requireOneDateFormat(t *testing.T, b *browser, page context.Context, where string) {
	t.Helper()
	var texts []string
	b.eval(page, `[...document.querySelectorAll('#app time')].map((el) => el.innerText.trim())`, &texts)
	require.NotEmpty(t, texts, "no <time> on %s", where)
	for _, s := range texts {
		require.Regexp(t, oneDateFormat, s, "a date on %s in another format", where)
	}
}

// requireNoSidewaysScroll checks that nothing makes the whole page wider
// than the viewport.
func requireNoSidewaysScroll(t *testing.T, b *browser, page context.Context, where string) {
	t.Helper()
	var w struct {
		Scroll, Client int
		Wide           []string // the elements that stick out, to say what to fix
	}
	b.eval(page, `(() => {
		const se = document.scrollingElement;
		const wide = [...document.querySelectorAll('body *')].filter((el) => el.getBoundingClientRect().right > se.clientWidth + 0.5)
			.slice(0, 8).map((el) => el.tagName + '.' + el.className + ' ' + Math.round(el.getBoundingClientRect().right));
		return {Scroll: se.scrollWidth, Client: se.clientWidth, Wide: wide};
	})()`, &w)
	require.LessOrEqual(t, w.Scroll, w.Client, "%s scrolls sideways at this width: %v", where, w.Wide)
}

// TestWebUIUnknownSession: a session id that names nothing shows the
// server's error and the way back, and no empty cards or tabs under it.
func TestWebUIUnknownSession(t *testing.T) {
	b := startBrowser(t)
	srv := startServer(t)
	page := b.root
	b.do(page, "open an unknown session", navigate(srv.url+"/#/sessions/ses_doesnotexist"))
	b.waitJS(page, "the error", `(document.querySelector('#app p.error') || {}).innerText?.includes('ses_doesnotexist not found')`)
	require.Equal(t, "#/sessions", attr(t, b, page, "#back-to-sessions", "href"))
	var shown []string
	b.eval(page, `[...document.querySelectorAll('#app .card, #app .tabs, #app .tab-panel, #app .meter, #app h1')]
		.filter((el) => el.offsetParent !== null).map((el) => el.className || el.tagName)`, &shown)
	require.Empty(t, shown, "an unknown session shows skeleton cards")
	b.screenshot(page, "unknown-session")

	b.click(page, "#back-to-sessions")
	b.waitJS(page, "the sessions list", `document.querySelector('#sessions-table') !== null`)
}

// TestWebUIPolish: the inbox's count follows its filter; the Effects tab
// keeps long summaries, results and paths inside its card; the session
// page does not scroll sideways on a phone; every date reads alike; the
// reports say "Needed no extra input" in the column, the cells and the
// totals.
func TestWebUIPolish(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	srv := startServer(t)

	// A write under a path too long to break anywhere but inside a word,
	// behind an approval; and a question, in another session.
	longName := strings.Repeat("quarterly_revenue_breakdown_", 7) + "final.md"
	longContent := strings.Repeat("Revenue grew in every region that reported this quarter. ", 12)
	writeScript, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "write_file", "arguments": map[string]any{"path": longName, "content": longContent}}}},
		{"tool_calls": []map[string]any{{"name": "read_file", "arguments": map[string]any{"path": longName}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	writer, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "write the breakdown", AgentSpec: &lt.AgentSpec{
		Model:    lt.ModelSpec{Provider: "scripted", Name: "demo", Script: writeScript},
		Tools:    []lt.ToolSpec{{Name: "write_file"}, {Name: "read_file"}},
		Policies: []lt.Policy{{Name: "review-writes", Tool: "write_file", Decision: lt.PolicyAsk}},
	}})
	require.NoError(t, err)
	askScript, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "ask_human", "arguments": map[string]any{"question": "Which quarter?"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	asker, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "ask first", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Name: "demo", Script: askScript},
		Tools: []lt.ToolSpec{{Name: "ask_human"}},
	}})
	require.NoError(t, err)
	approval := pendingAction(ctx, t, srv, writer.ID, "approval", "write_file")
	question := pendingAction(ctx, t, srv, asker.ID, "input", "ask_human")

	// The inbox counts what its filter shows, and each filter says what
	// it would show.
	page := b.root
	b.do(page, "open the inbox", navigate(srv.url+"/#/inbox"))
	b.waitJS(page, "both actions", `document.querySelectorAll('#inbox-list article.action').length === 2`)
	b.waitJS(page, "the count of all", `(document.querySelector('#inbox-status') || {}).innerText?.startsWith('2 pending')`)
	require.Equal(t, "Approvals 1", b.text(page, `.chip-btn[data-type="approval"]`))
	require.Equal(t, "Questions 1", b.text(page, `.chip-btn[data-type="input"]`))
	require.Equal(t, "Budgets 0", b.text(page, `.chip-btn[data-type="budget"]`))
	requireOneDateFormat(t, b, page, "the inbox")
	require.NotRegexp(t, `(^|\n)null(\n|$)`, b.text(page, "#app"), "a stray null on the page")
	b.click(page, `.chip-btn[data-type="approval"]`)
	b.waitJS(page, "the filtered count", `(document.querySelector('#inbox-status') || {}).innerText?.startsWith('Approvals: 1 of 2 pending')`)
	b.click(page, `.chip-btn[data-type="budget"]`)
	b.waitJS(page, "the empty filter", `(document.querySelector('#inbox-status') || {}).innerText?.startsWith('Budgets: 0 of 2 pending')`)
	require.Contains(t, b.text(page, "#inbox-empty"), "2 pending under All")
	b.screenshot(page, "inbox-filtered")

	_, err = srv.api.DecideAction(ctx, writer.ID, approval.ID, &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: approval.ArgumentsSHA256})
	require.NoError(t, err)
	_, err = srv.api.DecideAction(ctx, asker.ID, question.ID, &lt.Decision{Answer: "The third"})
	require.NoError(t, err)
	require.Equal(t, lt.SessionIdle, waitTerminal(ctx, t, srv, writer.ID, browserTimeout).Status)
	require.Equal(t, lt.SessionIdle, waitTerminal(ctx, t, srv, asker.ID, browserTimeout).Status)

	// The Effects tab: long content wraps inside the card, whose edge is
	// inside the page's.
	b.do(page, "open the session's effects", navigate(srv.url+"/#/sessions/"+writer.ID+"?tab=effects"))
	b.waitJS(page, "the effect rows", `document.querySelectorAll('#effects-table tr.effect-row').length === 2`)
	requireEffectsInCard(t, b, page, "a laptop")
	b.click(page, `#effects-table tr.effect-row:first-of-type`)
	b.waitJS(page, "the effect whole", `(document.querySelector('#effects-table tr.effect-detail:not([hidden]) .effect-arguments') || {}).innerText?.includes('Revenue grew')`)
	requireEffectsInCard(t, b, page, "a laptop, the row open")
	var summary struct{ Title, Text string }
	b.eval(page, `(() => { const el = document.querySelector('#effects-table .effect-summary'); return {Title: el.title, Text: el.textContent}; })()`, &summary)
	require.True(t, strings.HasPrefix(summary.Title, "Write quarterly_revenue"), "the summary is on hover: %q", summary.Title)
	require.Equal(t, summary.Text, summary.Title)
	require.Contains(t, b.text(page, "#effects-table tr.effect-detail:not([hidden]) .effect-arguments"), longName, "the open row has the whole path")
	requireOneDateFormat(t, b, page, "the session page")
	b.screenshot(page, "effects-long")

	// A phone: the tabs stay on the screen, and so does everything else.
	b.do(page, "emulate a small phone", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	requireNoSidewaysScroll(t, b, page, "the Effects tab")
	var tabsRight, viewport float64
	b.eval(page, `Math.max(...[...document.querySelectorAll('.tabs .tab')].map((el) => el.getBoundingClientRect().right))`, &tabsRight)
	b.eval(page, `document.documentElement.clientWidth`, &viewport)
	require.LessOrEqual(t, tabsRight, viewport, "a tab is off the screen")
	b.click(page, `button[data-tab="timeline"]`)
	b.waitJS(page, "the timeline", `document.querySelector('#timeline li[data-type="turn.completed"]') !== null`)
	requireNoSidewaysScroll(t, b, page, "the session page")
	b.screenshot(page, "session-375")
	b.desktop(page)

	// The reports, in a manager's words.
	b.do(page, "open the reports", navigate(srv.url+"/#/reports"))
	askRow := fmt.Sprintf(`#report-table tr[data-task-id=%q]`, asker.ID)
	writeRow := fmt.Sprintf(`#report-table tr[data-task-id=%q]`, writer.ID)
	b.waitJS(page, "both tasks", fmt.Sprintf(`document.querySelector(%s) && document.querySelector(%s)`, jsString(askRow), jsString(writeRow)))
	require.Equal(t, "NEEDED NO EXTRA INPUT", strings.ToUpper(b.text(page, "#report-table th:nth-child(3)")))
	require.NotEmpty(t, attr(t, b, page, "#report-table th:nth-child(3)", "title"), "the column explains itself")
	require.Equal(t, "no: asked a person", b.text(page, askRow+" .input-cell"))
	require.Equal(t, "yes", b.text(page, writeRow+" .input-cell"))
	require.Equal(t, "Needed no extra input", b.text(page, `[data-total="input_complete"] .name`))
	require.Equal(t, "50.0%", b.text(page, `[data-total="input_complete"] .value`))
	require.NotContains(t, b.text(page, "#app"), "Input complete")
	requireOneDateFormat(t, b, page, "the reports")
	b.screenshot(page, "reports-wording")

	// The other pages on the small phone too.
	b.do(page, "emulate a small phone", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	requireNoSidewaysScroll(t, b, page, "the reports")
	b.goTo(page, "#/sessions")
	b.waitJS(page, "the sessions list", `document.querySelectorAll('#sessions-table tr[data-session-id]').length === 2`)
	requireNoSidewaysScroll(t, b, page, "the sessions list")
	requireOneDateFormat(t, b, page, "the sessions list")
	b.goTo(page, "#/inbox")
	b.waitJS(page, "the decided actions", `document.querySelectorAll('#inbox-decided li.decided-row').length === 2`)
	requireNoSidewaysScroll(t, b, page, "the inbox")
	b.desktop(page)
}

// requireEffectsInCard checks that the Effects table stays within its
// card and the card within the page.
func requireEffectsInCard(t *testing.T, b *browser, page context.Context, where string) {
	t.Helper()
	var box struct{ Table, Card, Main float64 }
	b.eval(page, `(() => {
		const r = (sel) => document.querySelector(sel).getBoundingClientRect().right;
		return {Table: r('#effects-table'), Card: r('#effects-card'), Main: r('main')};
	})()`, &box)
	require.LessOrEqual(t, box.Table, box.Card+0.5, "the Effects table overflows its card on %s", where)
	require.LessOrEqual(t, box.Card, box.Main+0.5, "the Effects card overflows the page on %s", where)
	var scrolls bool
	b.eval(page, `(() => { const c = document.querySelector('#effects-card'); return c.scrollWidth > c.clientWidth; })()`, &scrolls)
	require.False(t, scrolls, "the Effects card needs a sideways scroll on %s", where)
}

// attr reads an attribute of the first element matching sel.
func attr(t *testing.T, b *browser, page context.Context, sel, name string) string {
	t.Helper()
	var v string
	b.eval(page, fmt.Sprintf(`(document.querySelector(%s) || {getAttribute: () => ''}).getAttribute(%s) || ''`, jsString(sel), jsString(name)), &v)
	return v
}
