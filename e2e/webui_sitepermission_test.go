package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestWebUISitePermission, in headless Chromium against the real binary: a
// browser_permission action is a card of the inbox showing the site, the
// agent's purpose and the request id, with allow once, allow for the
// session and deny; a deny without a reason is refused on the card; a deny
// with one is posted with the card's request id, and the agent reads the
// reason. (Nothing is allowed: no browser runs for the agent.)
func TestWebUISitePermission(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	srv := startServer(t)
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "browser", "arguments": map[string]any{
			"action": "open", "url": "http://127.0.0.1:8181/docs", "purpose": "read the API docs"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:       lt.ModelSpec{Provider: "scripted", Script: script},
			Tools:       []lt.ToolSpec{{Name: "browser"}},
			Environment: &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{8181}}},
		},
		Input: "read the docs",
	})
	require.NoError(t, err)
	a := pendingAction(ctx, t, srv, sess.ID, "browser_permission", "browser")

	page := b.root
	b.do(page, "open the inbox", navigate(srv.url+"/#/inbox"))
	card := fmt.Sprintf(`article[data-action-id=%q]`, a.ID)
	b.waitJS(page, "the site permission in the inbox", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(card)))
	require.Equal(t, "http://127.0.0.1:8181", b.text(page, card+" .origin"))
	require.Equal(t, "read the API docs", b.text(page, card+" .purpose"))
	require.Equal(t, a.RequestID, b.text(page, card+" .request-id"))
	for _, act := range []string{"allow-once", "allow-session", "deny"} {
		b.waitJS(page, "the "+act+" button", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(card+` button[data-act="`+act+`"]`)))
	}
	b.screenshot(page, "site-permission")

	b.click(page, card+` button[data-act="deny"]`)
	b.waitJS(page, "the card to ask for a reason", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText?.includes('reason')`, jsString(card+" .result")))
	b.setValue(page, card+" input.reason", "not that site")
	b.click(page, card+` button[data-act="deny"]`)
	b.waitJS(page, "the card to say it is denied", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText?.includes('Denied')`, jsString(card+" .result")))

	s := waitTerminal(ctx, t, srv, sess.ID, browserTimeout)
	require.Equal(t, lt.SessionIdle, s.Status)
	got, err := srv.api.GetAction(ctx, a.ID)
	require.NoError(t, err)
	var d lt.Decision
	require.NoError(t, json.Unmarshal(got.Resolution, &d))
	require.Equal(t, lt.Decision{Decision: lt.DecisionDeny, Reason: "not that site", RequestID: a.RequestID}, d)
	var told bool
	for _, ev := range journal(ctx, t, srv.api, sess.ID) {
		told = told || (ev.Type == lt.EventToolFailed && strings.Contains(string(ev.Data), "not that site"))
	}
	require.True(t, told, "the agent reads the reason")
}
