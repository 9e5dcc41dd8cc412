package journal

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestNextModelAttempt: a model call made again numbers its attempt after
// every attempt of it already requested — after a failure, and after a
// crash that left a request (and its deltas) with no outcome — per step
// and purpose; a new step or turn starts at 1.
func TestNextModelAttempt(t *testing.T) {
	b := &builder{t: t}
	startTurn(b, "t1", 1)
	require.Equal(t, 1, b.st.NextModelAttempt(1, ""))

	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 1, Attempt: 1})
	b.must(lt.EventModelDelta, "t1", lt.ModelDeltaData{Step: 1, Attempt: 1, Text: "cut short"})
	require.Equal(t, 2, b.st.NextModelAttempt(1, ""), "a crash here: the call again is attempt 2")

	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 1, Attempt: 2})
	b.must(lt.EventModelFailed, "t1", lt.ModelFailedData{Step: 1, Attempt: 2, Kind: "server", Retry: true})
	require.Equal(t, 3, b.st.NextModelAttempt(1, ""), "past the failed attempt and the cut one")

	// A crash cuts attempt 3; a compaction call of the same step is made
	// first after the restart: the step call's numbering stays past 3.
	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 1, Attempt: 3})
	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 1, Attempt: 3, Purpose: lt.PurposeCompaction})
	require.Equal(t, 4, b.st.NextModelAttempt(1, lt.PurposeCompaction))
	b.must(lt.EventContextCompacted, "t1", lt.ContextCompactedData{Step: 1, Items: 1, Summary: "s"})
	require.Equal(t, 4, b.st.NextModelAttempt(1, ""))

	// Made again for a steering message: a fresh start, not a retry.
	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 1, Attempt: 4})
	b.must(lt.EventModelFailed, "t1", lt.ModelFailedData{Step: 1, Attempt: 4, Kind: "timeout", Consumed: true, Interrupted: lt.InterruptedSteered})
	require.Equal(t, 1, b.st.NextModelAttempt(1, ""))

	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 1, Attempt: 1})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 1, Text: "done"})
	require.Equal(t, 1, b.st.NextModelAttempt(2, ""), "a new step starts at 1")
	b.must(lt.EventTurnCompleted, "t1", lt.TurnCompletedData{TurnID: "t1", Output: "done"})

	startTurn(b, "t2", 2)
	require.Empty(t, b.st.OpenModelCalls)
	require.Equal(t, 1, b.st.NextModelAttempt(1, ""))
}

// startTurn creates turn id (the index-th; the first creates the session
// too) and starts it.
func startTurn(b *builder, id string, index int) {
	if index == 1 {
		b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	}
	b.must(lt.EventTurnCreated, id, lt.TurnCreatedData{TurnID: id, Index: index, Input: "go"})
	b.must(lt.EventTurnStarted, id, lt.TurnStartedData{TurnID: id})
}
