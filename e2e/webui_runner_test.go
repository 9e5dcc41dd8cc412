package e2e

import (
	"encoding/json"
	"fmt"
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
