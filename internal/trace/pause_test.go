package trace_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/trace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestBuildPause: a pause is a wait span of its turn, from session.paused
// to session.resumed; one a cancel ends is cancelled with the turn.
func TestBuildPause(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		responded(ms(10), "turn_a", 1, 10, 5, 0.5).
		add(ms(1), lt.EventSessionPauseRequested, "", 0, lt.SessionPauseRequestedData{Reason: "lunch"}).
		add(ms(1), lt.EventSessionPaused, "", 0, lt.SessionPausedData{Reason: "lunch"}).
		add(time.Hour, lt.EventSessionResumed, "", 0, lt.SessionResumedData{PausedMS: 3600_000}).
		requested(ms(1), "turn_a", 2, 1, "").
		responded(ms(10), "turn_a", 2, 10, 5, 0.5).
		completed(0, "turn_a")
	tr := j.build(nil)
	require.Equal(t, `turn turn 1 ok
  step step 1 ok
    model_call model demo ok
  wait paused: lunch ok
  step step 2 ok
    model_call model demo ok
`, shape(tr.Spans))
	pause := tr.Spans[0].Children[1]
	require.Equal(t, trace.PauseWaitKind, pause.Attributes.WaitKind)
	require.Equal(t, time.Hour.Milliseconds(), pause.DurationMS)

	j = newJournal(t, "ses_2").turn(0, "turn_b", 1).
		requested(0, "turn_b", 1, 1, "").
		add(ms(5), lt.EventSessionPaused, "", 0, lt.SessionPausedData{}).
		add(time.Minute, lt.EventSessionCancelRequested, "", 0, lt.SessionCancelRequestedData{}).
		add(ms(2), lt.EventTurnCancelled, "turn_b", 0, lt.TurnCancelledData{TurnID: "turn_b"})
	tr = j.build(nil)
	pause = tr.Spans[0].Children[len(tr.Spans[0].Children)-1]
	require.Equal(t, "paused", pause.Name)
	require.Equal(t, lt.SpanCancelled, pause.Status, "the cancel ended the paused turn")
	require.Equal(t, *tr.Spans[0].End, *pause.End)
}
