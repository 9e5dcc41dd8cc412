package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestWebUIMonitorAction: a monitor action in the inbox shows its finding
// and the events that show it; "Let it continue" resolves it and the
// session goes on; the session's timeline shows the finding.
func TestWebUIMonitorAction(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	srv := startServer(t)

	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
				shellStep("unshare -r true; echo after"), finalText("done"))},
			Tools: []lt.ToolSpec{{Name: "shell"}},
		},
		Input: "go",
	})
	require.NoError(t, err)
	s := waitStatus(ctx, t, srv, sess.ID, time.Minute, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionMonitor, act.Type)

	inbox := b.root
	b.do(inbox, "open the inbox", navigate(srv.url+"/#/inbox"))
	card := fmt.Sprintf(`article[data-action-id=%q]`, act.ID)
	b.waitJS(inbox, "the monitor action in the inbox", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(card)))
	text := b.text(inbox, card)
	require.Contains(t, text, "Monitor finding")
	require.Contains(t, text, "escape_signatures")
	require.Contains(t, text, "runs unshare")
	b.screenshot(inbox, "inbox-monitor")
	b.click(inbox, card+` button[data-act="monitor-continue"]`)
	b.waitJS(inbox, "the decision to be recorded", fmt.Sprintf(`document.querySelector(%s + '.decided') !== null`, jsString(card)))
	s = waitStatus(ctx, t, srv, sess.ID, time.Minute, lt.SessionIdle)
	require.Empty(t, s.RequiredActions)

	page := b.tab("session tab")
	b.do(page, "open the session page", navigate(srv.url+"/#/sessions/"+sess.ID))
	b.waitJS(page, "the finding in the timeline",
		`(document.querySelector('#timeline li[data-type="monitor.finding"]') || {}).innerText?.includes('escape_signatures')`)
}

// TestWebUIModelMonitorReview: a pause of the model monitor in the inbox
// shows the review's reasons; "Let it continue" runs the call; the
// session's timeline shows the verdict and its reasons.
func TestWebUIModelMonitorReview(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	srv := startServer(t)

	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, shellStep("echo shipped"), finalText("done"))},
			Tools: []lt.ToolSpec{{Name: "shell", Effect: lt.EffectIrreversible}},
			Monitor: &lt.MonitorSpec{Before: []lt.EffectClass{lt.EffectIrreversible}, Model: &lt.ModelSpec{Provider: "scripted",
				Script: attackScript(t, finalText(`{"verdict": "pause", "reasons": ["ships something nobody asked for"]}`))}},
		},
		Input: "go",
	})
	require.NoError(t, err)
	s := waitStatus(ctx, t, srv, sess.ID, time.Minute, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.NotNil(t, act.Review)

	inbox := b.root
	b.do(inbox, "open the inbox", navigate(srv.url+"/#/inbox"))
	card := fmt.Sprintf(`article[data-action-id=%q]`, act.ID)
	b.waitJS(inbox, "the monitor action in the inbox", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(card)))
	text := b.text(inbox, card)
	require.Contains(t, text, "Model monitor pause", "its kind, not a detector's finding")
	require.NotContains(t, text, "Monitor finding")
	require.Contains(t, text, "ships something nobody asked for")
	b.screenshot(inbox, "inbox-model-monitor")
	b.click(inbox, card+` button[data-act="monitor-continue"]`)
	b.waitJS(inbox, "the decision to be recorded", fmt.Sprintf(`document.querySelector(%s + '.decided') !== null`, jsString(card)))
	s = waitStatus(ctx, t, srv, sess.ID, time.Minute, lt.SessionIdle)
	require.Empty(t, s.RequiredActions)

	page := b.tab("session tab")
	b.do(page, "open the session page", navigate(srv.url+"/#/sessions/"+sess.ID))
	b.waitJS(page, "the review in the timeline",
		`(document.querySelector('#timeline li[data-type="monitor.reviewed"]') || {}).innerText?.includes('ships something nobody asked for')`)
}
