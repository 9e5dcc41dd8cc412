package journal

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestApplySteer: steering messages are numbered in journal order against
// the step calls that carry them; an interrupting one is remembered; a
// turn may not complete with one unread; a steer is for the current turn
// only; a call abandoned for one is no failed attempt.
func TestApplySteer(t *testing.T) {
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	b.must(lt.EventTurnSteered, "t1", lt.TurnSteeredData{TurnID: "t1", Input: "early"})
	require.Equal(t, Steer{Count: 1}, b.st.Steer, "a queued turn can be steered")
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 1, Attempt: 1, Steers: 1})
	b.must(lt.EventTurnSteered, "t1", lt.TurnSteeredData{TurnID: "t1", Input: "now", Interrupt: true})
	require.Equal(t, Steer{Count: 2, Sent: 1, Interrupt: 2}, b.st.Steer)
	require.True(t, b.st.Steer.Undelivered())

	// A compaction or verification call carries nothing to the model's
	// next step.
	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 1, Attempt: 1, Purpose: lt.PurposeCompaction, Steers: 2})
	require.Equal(t, 1, b.st.Steer.Sent)

	b.must(lt.EventModelFailed, "t1", lt.ModelFailedData{Step: 1, Attempt: 1, Kind: "timeout", Consumed: true, Interrupted: lt.InterruptedSteered, Usage: &lt.Usage{InputTokens: 7}})
	require.Zero(t, b.st.ModelAttempt, "made again with the message: not a retry")
	require.Equal(t, int64(7), b.st.Session.Usage.InputTokens, "the abandoned call is counted")
	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 1, Attempt: 1, Steers: 2})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 1, Text: "done"})
	require.False(t, b.st.Steer.Undelivered())

	b.must(lt.EventTurnSteered, "t1", lt.TurnSteeredData{TurnID: "t1", Input: "one more"})
	require.ErrorContains(t, b.ev(lt.EventTurnCompleted, "t1", lt.TurnCompletedData{TurnID: "t1", Output: "done"}), "steering message")
	b.seq-- // the refused event is not in the journal
	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 2, Attempt: 1, Steers: 3})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 2, Text: "done, in one line"})
	b.must(lt.EventTurnCompleted, "t1", lt.TurnCompletedData{TurnID: "t1", Output: "done, in one line"})

	require.ErrorContains(t, b.ev(lt.EventTurnSteered, "t1", lt.TurnSteeredData{TurnID: "t1", Input: "late"}), "not the current turn")
}
