package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestWebUIPauseAndResume: on the session page, Pause while a model call
// is in flight shows "pause requested", then the paused status once the
// call has finished, with the pause in the live timeline; Resume and the
// turn runs to its end, on the same page without a reload.
func TestWebUIPauseAndResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := startBrowser(t)
	srv := startServer(t)
	s := slowStepSession(ctx, t, srv, 8*time.Second)

	tab := b.root
	b.do(tab, "open the session page", navigate(srv.url+"/#/sessions/"+s.ID))
	b.waitJS(tab, "the model call in the timeline", `document.querySelector('#timeline li[data-type="model.requested"]') !== null`)
	b.eval(tab, `window.__notReloaded = true`, nil)
	b.setValue(tab, "#pause-reason", "lunch")
	b.click(tab, "#pause")
	b.waitJS(tab, "the pause-requested chip", `(document.querySelector('.head-status') || {}).innerText?.includes('pause requested')`)
	b.waitJS(tab, "the paused status", `document.querySelector('.head-status [data-status="paused"]') !== null`)
	b.waitJS(tab, "the pause in the timeline", `document.querySelector('#timeline li[data-type="session.paused"]') !== null`)
	b.waitJS(tab, "the Resume button", `(() => { const r = document.querySelector('#resume'); return r && !r.hidden && document.querySelector('#pause').hidden; })()`)
	require.Contains(t, b.text(tab, "#pause-control"), "lunch")
	b.screenshot(tab, "session-paused")
	require.Empty(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventToolStarted), "nothing starts once paused")

	b.click(tab, "#resume")
	b.waitJS(tab, "the status to become idle", `document.querySelector('.head-status [data-status="idle"]') !== null`)
	b.waitJS(tab, "the resume in the timeline", `document.querySelector('#timeline li[data-type="session.resumed"]') !== null`)
	var notReloaded bool
	b.eval(tab, `window.__notReloaded === true`, &notReloaded)
	require.True(t, notReloaded, "the session page was reloaded")
	got, err := srv.api.GetSession(ctx, s.ID)
	require.NoError(t, err)
	requireStatus(ctx, t, srv, got, lt.SessionIdle)
	require.Len(t, eventsOf(ctx, t, srv.api, s.ID, lt.EventToolCompleted), 1)
}

// TestWebUIPausedWithItsParent: a sub-agent paused with its root says so
// on its page and links to the parent; its own Resume is refused with the
// server's answer, which names the root; Resume on the root's page
// resumes the sub-agent too.
func TestWebUIPausedWithItsParent(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := startBrowser(t)
	srv := startServer(t, "--sandbox", "local")
	root, kids := startBusyTree(ctx, t, srv)
	_, err := srv.api.Pause(ctx, root, &lt.PauseRequest{Reason: "lunch"})
	require.NoError(t, err)
	kid := kids[0].ID
	waitStatus(ctx, t, srv, kid, pauseWithin, lt.SessionPaused)

	tab := b.root
	b.do(tab, "open the sub-agent's page", navigate(srv.url+"/#/sessions/"+kid))
	b.waitJS(tab, "the link to the parent", `(document.querySelector('#pause-parent') || {}).textContent === `+jsString(root))
	require.Contains(t, b.text(tab, "#pause-control"), "it goes on when its parent does")
	b.screenshot(tab, "subagent-paused-with-parent")
	b.click(tab, "#resume")
	b.waitJS(tab, "the refusal naming the root", `(document.querySelector('#pause-control') || {}).innerText?.includes('resume `+root+`')`)
	require.Equal(t, lt.SessionPaused, waitStatus(ctx, t, srv, kid, pauseWithin, lt.SessionPaused).Status, "a sub-agent does not go on alone")

	b.click(tab, "#pause-parent")
	// The sub-agent's page has a Resume button too: wait for the parent's
	// page (no link to a parent of its own) before clicking.
	b.waitJS(tab, "the parent's page", `location.hash === `+jsString("#/sessions/"+root)+` && document.querySelector('#pause-parent') === null`)
	b.waitJS(tab, "the parent's Resume button", `(() => { const r = document.querySelector('#resume'); return r && !r.hidden; })()`)
	b.click(tab, "#resume")
	b.waitJS(tab, "the parent at work again", `document.querySelector('.head-status [data-status="paused"]') === null`)
	got := waitStatus(ctx, t, srv, kid, pauseWithin, lt.SessionRunning, lt.SessionIdle)
	require.Empty(t, got.PauseParentID)
	_, err = srv.api.Cancel(ctx, root, &lt.CancelRequest{Reason: "done looking"})
	require.NoError(t, err)
}
