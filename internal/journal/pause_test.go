package journal

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestPauseProjection: a pause's time is measured from its events' own
// times: it moves the wall-clock deadline and the turn's deadline by as
// much, and nothing wakes the session while it is in effect.
func TestPauseProjection(t *testing.T) {
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go", Budget: lt.Budget{MaxWallSeconds: 100}})
	created := b.st.Session.CreatedAt // time.Unix(1)
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	deadline := created.Add(50 * time.Second)
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1", Deadline: &deadline})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 1, ToolCalls: []lt.ToolCall{{ID: "c1", Name: "sleep"}}})
	b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 0, CallID: "c1", Tool: "sleep", Kind: lt.CallWait, Class: lt.EffectRead})
	until := created.Add(30 * time.Second)
	b.must(lt.EventWaitStarted, "t1", lt.WaitStartedData{Kind: lt.WaitTimer, Step: 1, Index: 0, CallID: "c1", Until: &until})
	require.NotNil(t, b.st.WakeAt())
	require.False(t, b.st.Runnable())

	b.must(lt.EventSessionPauseRequested, "", lt.SessionPauseRequestedData{Reason: "lunch"})
	require.True(t, b.st.PauseRequested())
	require.True(t, b.st.Runnable(), "a requested pause is carried out by a worker")
	require.True(t, b.st.View().PauseRequested)

	b.must(lt.EventSessionPaused, "", lt.SessionPausedData{}) // at time.Unix(8)
	pausedAt := time.Unix(b.seq, 0).UTC()
	require.True(t, b.st.Paused())
	require.False(t, b.st.Runnable())
	require.Nil(t, b.st.WakeAt(), "nothing fires while paused")
	v := b.st.View()
	require.False(t, v.PauseRequested)
	require.Equal(t, "lunch", v.PauseReason, "the request's reason is kept")
	require.Equal(t, &pausedAt, v.PausedAt)
	later := pausedAt.Add(time.Hour)
	require.Equal(t, pausedAt.Sub(created), b.st.WallElapsed(later), "the wall clock stands still while paused")

	// Resumed an hour on: both deadlines move by the hour; the timer keeps
	// its time.
	b.seq += 3600 - 1 // the next event is an hour after the pause
	b.must(lt.EventSessionResumed, "", lt.SessionResumedData{PausedMS: 3600_000})
	require.Nil(t, b.st.Pause)
	require.Equal(t, time.Hour, b.st.PausedFor)
	require.Equal(t, created.Add(100*time.Second+time.Hour), *b.st.WallDeadline())
	require.Equal(t, deadline.Add(time.Hour), *b.st.TurnDeadline)
	require.Equal(t, until, *b.st.Wait.Until)
	require.Equal(t, until, *b.st.WakeAt(), "the timer came due while paused: it wakes the session at once")
	require.Equal(t, 3600.0, b.st.View().PausedSeconds)

	require.Error(t, b.ev(lt.EventSessionResumed, "", lt.SessionResumedData{}), "a resume without a pause contradicts the journal")
}
