package journal

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestActorsInTheProjection: the session's creator comes from
// session.created and a fork's from session.forked; an action's decider
// from its action.resolved; a pause requested by one person and carried
// out later by a worker is that person's, and counts once in the tally,
// which counts each actor's decisions.
func TestActorsInTheProjection(t *testing.T) {
	alice := &lt.Actor{KeyID: "key_a", Name: "alice", Role: lt.RoleOperator}
	bob := &lt.Actor{KeyID: "key_b", Name: "bob", Role: lt.RoleApprover}
	b := started(t, lt.EffectIrreversible)
	require.Nil(t, b.st.Session.CreatedBy, "a journal older than actors")

	b = &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go", Actor: alice})
	require.Equal(t, alice, b.st.Session.CreatedBy)
	require.Equal(t, alice, b.st.View().CreatedBy)
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	b.must(lt.EventSessionPauseRequested, "", lt.SessionPauseRequestedData{Actor: bob})
	b.must(lt.EventSessionPaused, "", lt.SessionPausedData{Actor: b.st.Pause.Actor}) // the worker's, at its safe point
	require.Equal(t, bob, b.st.Pause.Actor)
	b.must(lt.EventSessionResumed, "", lt.SessionResumedData{Actor: alice})
	b.must(lt.EventSessionPaused, "", lt.SessionPausedData{Actor: alice}) // parked: paused at once
	b.must(lt.EventSessionResumed, "", lt.SessionResumedData{Actor: alice})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 1, ToolCalls: []lt.ToolCall{{ID: "c1", Name: "send"}}})
	b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 0, CallID: "c1", Tool: "send", Kind: lt.CallFunction, Class: lt.EffectIrreversible, ArgumentsSHA256: "h"})
	b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: lt.Action{ID: "a1", Type: lt.ActionApproval, Status: lt.ActionPending, TurnID: "t1", Step: 1, CallID: "c1",
		Approvers: &lt.Approvers{NotCreator: true}}})
	b.must(lt.EventActionResolved, "t1", lt.ActionResolvedData{ActionID: "a1", Type: string(lt.ActionApproval), CallID: "c1",
		Decision: lt.Decision{Decision: lt.DecisionReject, Reason: "no"}, Actor: bob})
	var resolved *lt.Action
	for _, d := range b.ch.Docs() {
		if a, ok := d.Value.(lt.Action); ok && a.ID == "a1" {
			resolved = &a
		}
	}
	require.NotNil(t, resolved)
	require.Equal(t, bob, resolved.ResolvedBy)
	require.Equal(t, &lt.Approvers{NotCreator: true}, resolved.Approvers)
	require.Equal(t, []lt.ActorCount{{Actor: *bob, Count: 2}, {Actor: *alice, Count: 3}}, b.st.Tally.Decisions,
		"bob's pause once, and his decision; alice's resume, pause and resume; not alice's creation")

	b.must(lt.EventSessionForked, "", lt.SessionForkedData{From: lt.ForkRef{SessionID: "ses_x"}, Actor: bob})
	require.Equal(t, bob, b.st.Session.CreatedBy, "who forked it created the fork")
	require.Empty(t, b.st.Tally.Decisions, "a fork counts only its own decisions")
}
