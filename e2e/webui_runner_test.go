package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestWebUIStoppedRunnerWorkspace, in headless Chromium against the real
// binary and a `longhaul runner`: a session on the runner parks on a
// function call, a person writes a file into its workspace, and its
// environment is then stopped for idleness. The session page's timeline
// says which of the people's changes the stop's snapshot holds
// (environment.stopping's person_changes_through), and the file browser
// says its live listing was read from that snapshot, naming it, not from
// the runner.
func TestWebUIStoppedRunnerWorkspace(t *testing.T) {
	const boot = "lh-webui-runner-bootstrap"
	b := startBrowser(t)
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	startRunner(t, k.srv.url, runnerKey.Key, "box1")

	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: keptFileAgent(t,
		&lt.Environment{Runner: &lt.RunnerSelector{Name: "box1"}, IdleStopSeconds: 5})})
	require.NoError(t, err)
	parkedOnLookup(t, admin, s.ID)
	// A write that meets the idle stop under way (409) is sent again.
	var change *lt.WorkspaceChange
	require.Eventually(t, func() bool {
		change, err = admin.PutFile(ctx, s.ID, "by-a-person.txt", []byte("hello\n"), "")
		return err == nil
	}, time.Minute, 20*time.Millisecond)

	// The stop after the person's change: its snapshot holds it.
	var stopped lt.EnvironmentStoppedData
	var through int64
	require.Eventually(t, func() bool {
		l, err := admin.ListEvents(ctx, s.ID, change.Seq, 500)
		if err != nil {
			return false
		}
		for _, ev := range l.Data {
			switch ev.Type {
			case lt.EventEnvironmentStopping:
				var d lt.EnvironmentStoppingData
				if json.Unmarshal(ev.Data, &d) == nil {
					through = d.PersonChangesThrough
				}
			case lt.EventEnvironmentStopped:
				return json.Unmarshal(ev.Data, &stopped) == nil
			}
		}
		return false
	}, time.Minute, 20*time.Millisecond, "the environment stopped after the person's change")
	require.Equal(t, change.Seq, through, "the stop's snapshot holds the person's change")
	require.NotEmpty(t, stopped.Snapshot)

	page := b.tab("admin")
	b.do(page, "open the session", navigate(k.srv.url+"/#/sessions/"+s.ID))
	b.waitJS(page, "the sign-in form", `document.querySelector('#login-form') !== null`)
	b.setValue(page, "#api-key", boot)
	b.click(page, "#sign-in")
	b.waitJS(page, "the timeline to say what the stop's snapshot holds", fmt.Sprintf(
		`[...document.querySelectorAll('#timeline li[data-type="environment.stopping"]')].some((li) => li.innerText.includes(%s))`,
		jsString(fmt.Sprintf("holding the people's changes through event #%d", change.Seq))))

	b.goTo(page, "#/sessions/"+s.ID+"?tab=files")
	b.waitJS(page, "the listing with the person's file", `document.querySelector('#files-table tr[data-path="by-a-person.txt"]') !== null`)
	b.waitJS(page, "the listing to say it was read from the stop's snapshot", fmt.Sprintf(
		`(() => { const o = document.querySelector('#files-origin'); return !!o && !o.hidden && o.dataset.source === 'snapshot' && o.dataset.snapshot === %s && o.innerText.includes('Read from snapshot'); })()`,
		jsString(stopped.Snapshot)))
	b.screenshot(page, "stopped-runner-files")
}

// TestWebUIUnpinAReplacedRunner, in headless Chromium against the real
// binary and two `longhaul runner` processes in turn: a session's
// environment lives on box1; box1's key is revoked and a new key runs
// box1 on the same data directory. The next turn waits on an
// environment_connection action that says the name is held by another
// key; a person unpins it from the inbox, and the turn runs on the new
// box1, in the session's workspace.
func TestWebUIUnpinAReplacedRunner(t *testing.T) {
	const boot = "lh-webui-runner-unpin-bootstrap"
	b := startBrowser(t)
	rk := replacedRunnerKey(t, boot)
	ctx, a, s := t.Context(), rk.action, rk.s

	inbox := b.tab("admin")
	b.do(inbox, "open the inbox", navigate(rk.k.srv.url+"/#/inbox"))
	b.waitJS(inbox, "the sign-in form", `document.querySelector('#login-form') !== null`)
	b.setValue(inbox, "#api-key", boot)
	b.click(inbox, "#sign-in")
	card := fmt.Sprintf(`article[data-action-id=%q]`, a.ID)
	b.waitJS(inbox, "the environment_connection action in the inbox", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(card)))
	require.Contains(t, b.text(inbox, card), "held by another key")
	b.setValue(inbox, card+" input.unpin-reason", "box1's key was replaced")
	b.screenshot(inbox, "inbox-unpin")
	b.click(inbox, card+` button[data-act="environment-unpin"]`)
	b.waitJS(inbox, "the decision to be recorded", fmt.Sprintf(`document.querySelector(%s + '.decided') !== null`, jsString(card)))
	rk.ranOnTheNewKey()
	l, err := rk.admin.ListEvents(ctx, s.ID, 0, 500)
	require.NoError(t, err)
	unpinned := false
	for _, ev := range l.Data {
		if ev.Type == lt.EventActionResolved && strings.Contains(string(ev.Data), `"decision":"unpin"`) {
			unpinned = strings.Contains(string(ev.Data), "box1's key was replaced")
		}
	}
	require.True(t, unpinned, "the journal has the person's unpin, with the reason typed")
}
