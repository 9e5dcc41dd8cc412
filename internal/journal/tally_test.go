package journal

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestTally(t *testing.T) {
	t.Run("asks, retries, checkpoint and end", func(t *testing.T) {
		b := started(t, lt.EffectIdempotent)
		require.Equal(t, Tally{}, b.st.Tally)

		// A transient tool failure that is retried, then one that is not.
		b.must(lt.EventToolFailed, "t1", lt.ToolFailedData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1", Error: "503", Retry: true, Attempt: 1})
		b.must(lt.EventToolStarted, "t1", lt.ToolStartedData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1", IdempotencyKey: "k1", Class: lt.EffectIdempotent, Attempt: 2})
		b.must(lt.EventToolFailed, "t1", lt.ToolFailedData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1", Error: "bad request"})
		// A model call retried once, and one that gave up.
		b.must(lt.EventModelFailed, "t1", lt.ModelFailedData{Step: 2, Kind: "server_error", Retry: true})
		b.must(lt.EventModelFailed, "t1", lt.ModelFailedData{Step: 2, Kind: "server_error", Retry: false})
		b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 2, ToolCalls: []lt.ToolCall{{ID: "c2", Name: "ask_human"}, {ID: "c3", Name: "lookup"}}})
		b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 2, Index: 0, CallID: "c2", Tool: "ask_human", Kind: lt.CallHuman, Class: lt.EffectRead})
		b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 2, Index: 1, CallID: "c3", Tool: "lookup", Kind: lt.CallFunction, Class: lt.EffectRead})
		b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: lt.Action{ID: "a1", Type: lt.ActionInput, TurnID: "t1", Step: 2, CallID: "c2"}})
		b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: lt.Action{ID: "a2", Type: lt.ActionFunctionCall, TurnID: "t1", Step: 2, CallID: "c3"}})
		b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: lt.Action{ID: "a3", Type: lt.ActionBudget, TurnID: "t1"}})
		require.Equal(t, map[lt.ActionType]int{lt.ActionInput: 1, lt.ActionFunctionCall: 1, lt.ActionBudget: 1}, b.st.Tally.Asks)
		require.Equal(t, 2, b.st.Tally.AsksOf(lt.ActionInput, lt.ActionBudget, lt.ActionApproval))
		require.Equal(t, 2, b.st.Tally.Retries)

		at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		b.must(lt.EventCheckpointCreated, "t1", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "ck1", TurnID: "t1", Step: 2, Kind: lt.CheckpointNamed, Name: "draft", CreatedAt: at}})
		require.Equal(t, &CheckpointBrief{ID: "ck1", Name: "draft", Kind: lt.CheckpointNamed, TurnID: "t1", Step: 2, At: at}, b.st.Tally.Checkpoint)

		require.Nil(t, b.st.Tally.EndedAt)
		b.must(lt.EventSessionStatusChanged, "", lt.SessionStatusChangedData{From: lt.SessionRunning, To: lt.SessionFailed, StopReason: lt.StopProviderError})
		require.NotNil(t, b.st.Tally.EndedAt)
		require.Equal(t, time.Unix(b.seq, 0).UTC(), *b.st.Tally.EndedAt)
		b.must(lt.EventSessionStatusChanged, "", lt.SessionStatusChangedData{From: lt.SessionFailed, To: lt.SessionQueued})
		require.Nil(t, b.st.Tally.EndedAt, "a follow-up turn makes the session work again")

		// The tally survives the projection's JSON round trip.
		raw, err := json.Marshal(b.st)
		require.NoError(t, err)
		var back State
		require.NoError(t, json.Unmarshal(raw, &back))
		require.Equal(t, b.st.Tally, back.Tally)
	})

	t.Run("a fork starts afresh and remembers its inherited usage", func(t *testing.T) {
		b := started(t, lt.EffectRead)
		b.must(lt.EventModelFailed, "t1", lt.ModelFailedData{Step: 2, Retry: true})
		b.must(lt.EventCheckpointCreated, "t1", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "ck1", Kind: lt.CheckpointStep, Name: "step 1", Step: 1}})
		b.must(lt.EventSessionForked, "", lt.SessionForkedData{From: lt.ForkRef{SessionID: "ses_0", CheckpointID: "ck0", EventSeq: 8}})
		require.Zero(t, b.st.Tally.Retries)
		require.Nil(t, b.st.Tally.Asks)
		require.Equal(t, &lt.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.5, ModelCalls: 2, ToolCalls: 1}, b.st.Tally.Inherited)
		require.Equal(t, "ck1", b.st.Tally.Checkpoint.ID, "the fork stands where its checkpoint stood")
		require.Equal(t, time.Unix(8, 0).UTC(), b.st.Tally.Checkpoint.At, "a checkpoint without a time takes its event's")
	})

	t.Run("an empty tally is left out of the stored state", func(t *testing.T) {
		raw, err := json.Marshal(State{})
		require.NoError(t, err)
		require.NotContains(t, string(raw), `"tally"`)
	})
}

// TestTallyApprovals: each rule's approvals are counted as they are asked
// for and decided, with how long each waited (the builder's events are a
// second apart); an approval without a rule, and other actions, are not.
func TestTallyApprovals(t *testing.T) {
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 1, ToolCalls: []lt.ToolCall{{ID: "c1", Name: "deploy"}, {ID: "c2", Name: "email"}, {ID: "c3", Name: "email"}}})
	for i, call := range []string{"c1", "c2", "c3"} {
		b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: i, CallID: call, Tool: "t", Kind: lt.CallBuiltin, Class: lt.EffectIrreversible, ArgumentsSHA256: "h"})
	}
	approval := func(id, call, rule string) lt.ActionRequiredData {
		return lt.ActionRequiredData{Action: lt.Action{ID: id, Type: lt.ActionApproval, Status: lt.ActionPending, TurnID: "t1", Step: 1, CallID: call, Policy: rule}}
	}
	decide := func(id, call, decision string) lt.ActionResolvedData {
		d := lt.ActionResolvedData{ActionID: id, Type: string(lt.ActionApproval), CallID: call, Decision: lt.Decision{Decision: decision}}
		if decision == lt.DecisionApprove {
			d.Arguments, d.ArgumentsSHA256 = json.RawMessage(`{}`), "h"
		}
		return d
	}
	b.must(lt.EventActionRequired, "t1", approval("a1", "c1", "deploys"))        // seq 8
	b.must(lt.EventActionRequired, "t1", approval("a2", "c2", "emails"))         // seq 9
	b.must(lt.EventActionRequired, "t1", approval("a3", "c3", ""))               // no rule: not counted
	b.must(lt.EventActionResolved, "t1", decide("a2", "c2", lt.DecisionReject))  // seq 11: 2 s
	b.must(lt.EventActionResolved, "t1", decide("a3", "c3", lt.DecisionApprove)) // seq 12
	require.Equal(t, map[string]OpenApproval{"a1": {Rule: "deploys", At: time.Unix(8, 0).UTC()}}, b.st.Tally.OpenApprovals)
	b.must(lt.EventActionResolved, "t1", decide("a1", "c1", lt.DecisionApprove)) // seq 13: 5 s
	require.Equal(t, map[string]*RuleApprovals{
		"deploys": {Asks: 1, Decided: 1, Approved: 1, DecideMS: []int64{5000}},
		"emails":  {Asks: 1, Decided: 1, DecideMS: []int64{2000}},
	}, b.st.Tally.Approvals)
	require.Nil(t, b.st.Tally.OpenApprovals)
	require.Equal(t, 3, b.st.Tally.Asks[lt.ActionApproval], "every approval is an ask")

	raw, err := json.Marshal(b.st)
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Equal(t, b.st.Tally.Approvals, back.Tally.Approvals, "stored with the session's state")
}
