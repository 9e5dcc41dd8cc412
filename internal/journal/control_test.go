package journal

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// requested builds a session whose turn t1 has one step with one call that
// has not started.
func requested(t *testing.T, args string) *builder {
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 1, ToolCalls: []lt.ToolCall{{ID: "c1", Name: "send"}}})
	b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 0, CallID: "c1", Tool: "send", Kind: lt.CallFunction,
		Class: lt.EffectIrreversible, Arguments: json.RawMessage(args), ArgumentsSHA256: "sha-a"})
	return b
}

func approval(id string) lt.Action {
	return lt.Action{ID: id, Type: lt.ActionApproval, TurnID: "t1", Step: 1, CallID: "c1", Tool: "send", ArgumentsSHA256: "sha-a"}
}

func TestApplyHumanControl(t *testing.T) {
	t.Run("policy verdict is kept on the call", func(t *testing.T) {
		b := requested(t, `{"to":"a"}`)
		b.must(lt.EventPolicyDecided, "t1", lt.PolicyDecidedData{Step: 1, Index: 0, CallID: "c1", Tool: "send", Decision: lt.PolicyAsk, Rule: "r"})
		require.Equal(t, lt.PolicyAsk, b.st.Step.Calls[0].Policy)
		require.Error(t, b.ev(lt.EventPolicyDecided, "t1", lt.PolicyDecidedData{Step: 1, Index: 0, CallID: "c9"}), "unknown call")
	})
	t.Run("an approval binds the call to the approved arguments", func(t *testing.T) {
		b := requested(t, `{"to":"a"}`)
		b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: approval("act_1")})
		require.Equal(t, CallAwaitingAction, b.st.Step.Calls[0].Status)
		require.False(t, b.st.Runnable())
		b.must(lt.EventActionResolved, "t1", lt.ActionResolvedData{ActionID: "act_1", Type: "approval", CallID: "c1",
			Decision: lt.Decision{Decision: lt.DecisionApprove}, ArgumentsSHA256: "sha-a"})
		c := b.st.Step.Calls[0]
		require.Equal(t, CallRequested, c.Status)
		require.Equal(t, "sha-a", c.ApprovedSHA256)
		require.True(t, b.st.Runnable())
	})
	t.Run("an edited approval re-binds to the edited arguments", func(t *testing.T) {
		b := requested(t, `{"to":"a"}`)
		b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: approval("act_1")})
		b.must(lt.EventActionResolved, "t1", lt.ActionResolvedData{ActionID: "act_1", Type: "approval", CallID: "c1",
			Decision:  lt.Decision{Decision: lt.DecisionApprove, Arguments: json.RawMessage(`{"to":"b"}`)},
			Arguments: json.RawMessage(`{"to":"b"}`), ArgumentsSHA256: "sha-b"})
		c := b.st.Step.Calls[0]
		require.JSONEq(t, `{"to":"b"}`, string(c.Arguments))
		require.Equal(t, "sha-b", c.ArgumentsSHA256)
		require.Equal(t, "sha-b", c.ApprovedSHA256)
	})
	t.Run("an approval without a binding is refused", func(t *testing.T) {
		b := requested(t, `{}`)
		b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: approval("act_1")})
		require.Error(t, b.ev(lt.EventActionResolved, "t1", lt.ActionResolvedData{ActionID: "act_1", Type: "approval", Decision: lt.Decision{Decision: lt.DecisionApprove}}))
	})
	t.Run("a failed turn voids its pending actions", func(t *testing.T) {
		b := requested(t, `{}`)
		b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: approval("act_1")})
		b.must(lt.EventTurnFailed, "t1", lt.TurnFailedData{TurnID: "t1", StopReason: lt.StopStopped})
		require.Empty(t, b.st.Pending)
		require.Nil(t, b.st.Step)
		doc, ok := b.ch.doc(DocAction, "act_1")
		require.True(t, ok, "the action's row is written")
		require.Equal(t, string(lt.ActionCancelled), doc.Status)
	})
	t.Run("a transient failure returns the call to requested", func(t *testing.T) {
		b := started(t, lt.EffectIdempotent)
		b.must(lt.EventToolFailed, "t1", lt.ToolFailedData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1", Error: "503", Retry: true, Attempt: 1})
		c := b.st.Step.Calls[0]
		require.Equal(t, CallRequested, c.Status)
		require.Len(t, b.st.OpenEffects, 1)
		require.Equal(t, lt.EffectFailed, b.st.OpenEffects[0].Status)
		require.Zero(t, b.st.ToolErrorStreak, "a retried attempt is not a tool error")
		b.must(lt.EventToolStarted, "t1", lt.ToolStartedData{Step: 1, Index: 0, CallID: "c1", Tool: "shell", EffectID: "e1", IdempotencyKey: "k1", Class: lt.EffectIdempotent, Attempt: 2})
		require.Equal(t, 2, b.st.OpenEffects[0].Attempts)
		require.Equal(t, int64(2), b.st.Session.Usage.ToolCalls)
		b.must(lt.EventToolFailed, "t1", lt.ToolFailedData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1", Error: "400"})
		require.Equal(t, 1, b.st.ToolErrorStreak)
	})
	t.Run("repeats and budget events", func(t *testing.T) {
		b := requested(t, `{}`)
		require.Equal(t, 1, b.st.Step.Calls[0].Repeat)
		b.must(lt.EventToolFailed, "t1", lt.ToolFailedData{Step: 1, Index: 0, CallID: "c1", Error: "x"})
		b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 2, ToolCalls: []lt.ToolCall{{ID: "c2", Name: "send"}}})
		b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 2, Index: 0, CallID: "c2", Tool: "send", Kind: lt.CallFunction, ArgumentsSHA256: "sha-a"})
		require.Equal(t, 2, b.st.Step.Calls[0].Repeat)
		b.must(lt.EventBudgetUpdated, "", lt.BudgetUpdatedData{Budget: lt.Budget{MaxCostUSD: 3}})
		require.Equal(t, 3.0, b.st.Session.Budget.MaxCostUSD)
		b.must(lt.EventBudgetWarning, "t1", lt.BudgetWarningData{Limit: lt.BudgetLimit{Name: "cost_usd", Max: 3, Used: 2.5}})
		require.Equal(t, 3.0, b.st.BudgetWarned["cost_usd"])
	})
}
