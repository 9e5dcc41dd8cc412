package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestSleepIsADurableTimer: a sleeping session waits holding nothing, its
// timer survives a restart of the engine, fires once when its time has
// come (also after downtime), and the turn goes on.
func TestSleepIsADurableTimer(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"sleep","arguments":{"seconds":3600}}]},{"text":"awake"}]`,
		lt.ToolSpec{Name: "sleep"}), nil)
	s = h.waitStatus(s.ID, lt.SessionWaiting)
	require.Len(t, events(t, h, s.ID, lt.EventWaitStarted), 1)

	// Downtime: the engine stops, the time passes, it starts again.
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()
	h.clock.Advance(2 * time.Hour)
	h.start("node-a")
	s = h.waitStatus(s.ID, lt.SessionIdle)
	completed := events(t, h, s.ID, lt.EventToolCompleted)
	require.Len(t, completed, 1, "the timer fired once")
	require.Contains(t, string(data[lt.ToolCompletedData](t, completed[0]).Output), "slept_until")
	require.Equal(t, "awake", mustTurnOutput(t, h, s))
	checkJournal(t, h.store, s.ID)
}

// TestWaitForSignal: a signal wakes the wait of its name with its payload;
// one sent before the wait is kept for it; a wait with no signal times out.
func TestWaitForSignal(t *testing.T) {
	ctx := context.Background()
	script := `[{"tool_calls":[{"name":"wait_for_signal","arguments":{"name":"deploy.finished","timeout_seconds":600}}]},{"text":"deployed"}]`
	t.Run("signal after the wait", func(t *testing.T) {
		h := newHarness(t)
		s := create(t, h, spec(t, script, lt.ToolSpec{Name: "wait_for_signal"}), nil)
		s = h.waitStatus(s.ID, lt.SessionWaiting)
		other, err := h.eng.SendSignal(ctx, s.ID, &lt.SignalRequest{Name: "other"})
		require.NoError(t, err)
		require.False(t, other.Delivered)
		sig, err := h.eng.SendSignal(ctx, s.ID, &lt.SignalRequest{Name: "deploy.finished", Payload: json.RawMessage(`{"version":"1.4.2"}`)})
		require.NoError(t, err)
		require.True(t, sig.Delivered)
		s = h.waitStatus(s.ID, lt.SessionIdle)
		out := string(data[lt.ToolCompletedData](t, events(t, h, s.ID, lt.EventToolCompleted)[0]).Output)
		require.Contains(t, out, `"version":"1.4.2"`)
		checkJournal(t, h.store, s.ID)
	})
	t.Run("signal before the wait", func(t *testing.T) {
		h := newHarness(t)
		stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		require.NoError(t, h.eng.Stop(stopCtx))
		cancel()
		s := create(t, h, spec(t, script, lt.ToolSpec{Name: "wait_for_signal"}), nil)
		sig, err := h.eng.SendSignal(ctx, s.ID, &lt.SignalRequest{Name: "deploy.finished", Payload: json.RawMessage(`"early"`)})
		require.NoError(t, err)
		require.False(t, sig.Delivered, "nothing waits yet: kept")
		h.start("node-a")
		s = h.waitStatus(s.ID, lt.SessionIdle)
		out := string(data[lt.ToolCompletedData](t, events(t, h, s.ID, lt.EventToolCompleted)[0]).Output)
		require.Contains(t, out, `"payload":"early"`)
	})
	t.Run("timeout", func(t *testing.T) {
		h := newHarness(t)
		s := create(t, h, spec(t, script, lt.ToolSpec{Name: "wait_for_signal"}), nil)
		s = h.waitStatus(s.ID, lt.SessionWaiting)
		h.clock.Advance(11 * time.Minute)
		s = h.waitStatus(s.ID, lt.SessionIdle)
		out := string(data[lt.ToolCompletedData](t, events(t, h, s.ID, lt.EventToolCompleted)[0]).Output)
		require.Contains(t, out, `"timed_out":true`)
	})
	t.Run("bad signals", func(t *testing.T) {
		h := newHarness(t)
		s := create(t, h, spec(t, script, lt.ToolSpec{Name: "wait_for_signal"}), nil)
		_, err := h.eng.SendSignal(ctx, s.ID, &lt.SignalRequest{Name: " "})
		requireAPIError(t, err, lt.CodeInvalidRequest, "name")
		_, err = h.eng.SendSignal(ctx, "ses_nope", &lt.SignalRequest{Name: "x"})
		requireAPIError(t, err, lt.CodeNotFound, "ses_nope")
	})
}
