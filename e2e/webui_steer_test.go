package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestWebUISteer: on the page of a session whose model call would take
// 20 s, a person types a message, ticks "interrupt" and steers: the call is
// abandoned, the timeline shows the message (turn.steered) and the call
// made again, and once the turn is done the control is gone.
func TestWebUISteer(t *testing.T) {
	ctx := t.Context()
	b := startBrowser(t)
	srv := startServer(t)
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t,
			map[string]any{"delay_ms": 20000, "text": "too late"}, finalText("the short answer"))}},
		Input: "Think hard.",
	})
	require.NoError(t, err)

	tab := b.root
	b.do(tab, "open the session page", navigate(srv.url+"/#/sessions/"+s.ID))
	b.waitJS(tab, "the model call in the timeline", `document.querySelector('#timeline li[data-type="model.requested"]') !== null`)
	b.waitJS(tab, "the steer control", `(() => { const c = document.querySelector('#steer-control'); return c !== null && !c.hidden; })()`)
	const msg = "Answer in one line, now."
	start := time.Now()
	b.setValue(tab, "#steer-input", msg)
	b.click(tab, "#steer-interrupt")
	b.screenshot(tab, "steer-control")
	b.click(tab, "#steer")
	b.waitJS(tab, "the confirmation", `document.querySelector('#steer-sent') !== null`)
	b.waitJS(tab, "the message in the timeline", `Array.from(document.querySelectorAll('#timeline li[data-type="turn.steered"]')).some((li) => li.innerText.includes(`+jsString(msg)+`) && li.innerText.includes('interrupt'))`)
	b.waitJS(tab, "the abandoned call in the timeline", `document.querySelector('#timeline li[data-type="model.failed"]') !== null`)
	require.Less(t, time.Since(start), 15*time.Second, "far sooner than the 20 s call")
	b.waitJS(tab, "the turn's answer in the timeline", `document.querySelector('#timeline li[data-type="turn.completed"]') !== null`)
	b.waitJS(tab, "the steer control to go with the turn", `document.querySelector('#steer-control').hidden`)
	b.screenshot(tab, "steered")

	steered := eventData[steeredData](ctx, t, srv.api, s.ID, lt.EventTurnSteered)
	require.Equal(t, []steeredData{{TurnID: s.CurrentTurnID, Input: msg, Interrupt: true}}, steered)
	failed := eventData[modelFailedData](ctx, t, srv.api, s.ID, lt.EventModelFailed)
	require.Len(t, failed, 1)
	require.Equal(t, "steered", failed[0].Interrupted)
}
