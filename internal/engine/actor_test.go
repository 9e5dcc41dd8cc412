package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/engine"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// People of the actor tests: alice holds an operator key to start work and
// an approver key to decide; bob and carol are approvers; root is an admin.
var (
	aliceOperator = lt.Actor{KeyID: "key_alice1", Name: "alice", Role: lt.RoleOperator}
	aliceApprover = lt.Actor{KeyID: "key_alice2", Name: "alice", Role: lt.RoleApprover}
	bobApprover   = lt.Actor{KeyID: "key_bob", Name: "bob", Role: lt.RoleApprover}
	carolApprover = lt.Actor{KeyID: "key_carol", Name: "carol", Role: lt.RoleApprover}
	rootAdmin     = lt.Actor{Name: "root", Role: lt.RoleAdmin}
)

func as(a lt.Actor) context.Context { return engine.WithActor(context.Background(), a) }

// actorOfEvent decodes the actor an event's payload carries.
func actorOfEvent(t *testing.T, ev lt.Event) *lt.Actor {
	t.Helper()
	var d struct {
		Actor *lt.Actor `json:"actor"`
	}
	require.NoError(t, json.Unmarshal(ev.Data, &d), "event %d %s", ev.Seq, ev.Type)
	return d.Actor
}

// onlyEvent returns the one event of type typ in the session's journal.
func onlyEvent(t *testing.T, h *harness, id, typ string) lt.Event {
	t.Helper()
	evs := events(t, h, id, typ)
	require.Len(t, evs, 1, typ)
	return evs[0]
}

// TestDecisionsCarryTheirActor: every decision a person makes through the
// engine journals who made it, from the request's context: the session's
// creation (Session.CreatedBy), a steer, a pinned constraint, a budget
// change, a workspace change, a pause and its resume, an approval
// (Action.ResolvedBy, in the session's actions and the inbox), a review
// and a cancel. What the engine does by itself carries no actor.
func TestDecisionsCarryTheirActor(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"x"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "write_file"})
	sp.Policies = []lt.Policy{{Name: "writes", Tool: "write_file", Decision: lt.PolicyAsk}}
	s, err := h.eng.CreateSession(as(aliceOperator), &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"})
	require.NoError(t, err)
	require.Equal(t, &aliceOperator, s.CreatedBy)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	require.Nil(t, act.ResolvedBy)

	_, err = h.eng.SteerSession(as(aliceOperator), s.ID, &lt.SteerRequest{Input: "mind the tests"})
	require.NoError(t, err)
	_, err = h.eng.AddConstraint(as(aliceOperator), s.ID, &lt.AddConstraintRequest{Constraint: "no network"})
	require.NoError(t, err)
	_, err = h.eng.UpdateBudget(as(rootAdmin), s.ID, &lt.BudgetPatch{MaxCostUSD: ptr(5.0)})
	require.NoError(t, err)
	_, err = h.eng.WriteFile(as(carolApprover), s.ID, "notes.txt", []byte("hello"), "")
	require.NoError(t, err)
	_, err = h.eng.PauseSession(as(bobApprover), s.ID, &lt.PauseRequest{Reason: "lunch"})
	require.NoError(t, err)
	_, err = h.eng.ResumeSession(as(carolApprover), s.ID, &lt.ResumeRequest{})
	require.NoError(t, err)
	decided, err := h.eng.DecideAction(as(bobApprover), s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	require.NoError(t, err)
	require.Equal(t, &bobApprover, decided.ResolvedBy)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	_, err = h.eng.ReviewSession(as(carolApprover), s.ID, &lt.ReviewRequest{Accepted: ptr(true)})
	require.NoError(t, err)

	want := map[string]*lt.Actor{
		lt.EventSessionCreated:       &aliceOperator,
		lt.EventTurnSteered:          &aliceOperator,
		lt.EventConstraintAdded:      &aliceOperator,
		lt.EventBudgetUpdated:        &rootAdmin,
		lt.EventWorkspaceChanged:     &carolApprover,
		lt.EventSessionPaused:        &bobApprover,
		lt.EventSessionResumed:       &carolApprover,
		lt.EventActionResolved:       &bobApprover,
		lt.EventSessionReviewed:      &carolApprover,
		lt.EventActionRequired:       nil, // the engine's own
		lt.EventSessionStatusChanged: nil,
	}
	for typ, actor := range want {
		for _, ev := range events(t, h, s.ID, typ) {
			require.Equal(t, actor, actorOfEvent(t, ev), "%s at seq %d", typ, ev.Seq)
		}
	}
	got, err := h.eng.GetSession(context.Background(), s.ID)
	require.NoError(t, err)
	require.Equal(t, &aliceOperator, got.CreatedBy)
	acts, err := h.eng.ListActions(context.Background(), s.ID, "")
	require.NoError(t, err)
	require.Len(t, acts, 1)
	require.Equal(t, &bobApprover, acts[0].ResolvedBy)
	inbox, err := h.eng.GetAction(context.Background(), act.ID)
	require.NoError(t, err)
	require.Equal(t, &bobApprover, inbox.ResolvedBy)

	// A cancel, on a session still at work.
	s2, err := h.eng.CreateSession(as(aliceOperator), &lt.CreateSessionRequest{AgentSpec: sp, Input: "again"})
	require.NoError(t, err)
	h.waitStatus(s2.ID, lt.SessionRequiresAction)
	_, err = h.eng.CancelSession(as(bobApprover), s2.ID, &lt.CancelRequest{Reason: "not today"})
	require.NoError(t, err)
	require.Equal(t, &bobApprover, actorOfEvent(t, onlyEvent(t, h, s2.ID, lt.EventSessionCancelRequested)))
	h.waitStatus(s2.ID, lt.SessionCancelled)
	checkJournal(t, h.store, s.ID)
}

// deploySpec is an agent whose deploy (write_file) needs an approval from
// the approvers given.
func deploySpec(t *testing.T, approvers *lt.Approvers) *lt.AgentSpec {
	t.Helper()
	sp := spec(t, `[{"tool_calls":[{"name":"write_file","arguments":{"path":"deployed.txt","content":"v2"}}]},{"text":"deployed"}]`,
		lt.ToolSpec{Name: "write_file"})
	sp.Policies = []lt.Policy{{Name: "deploy", Tool: "write_file", Decision: lt.PolicyAsk, Approvers: approvers}}
	return sp
}

// requireRefusedDecision: the decision is a 403 saying what the policy
// requires, nothing is journaled, and the approval is still pending.
func requireRefusedDecision(t *testing.T, h *harness, ctx context.Context, s *lt.Session, act lt.Action, contains ...string) {
	t.Helper()
	before := events(t, h, s.ID)
	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	for _, c := range contains {
		requireAPIError(t, err, lt.CodeForbidden, c)
	}
	require.Equal(t, before, events(t, h, s.ID), "a refused decision journals nothing")
	got, err := h.eng.GetAction(context.Background(), act.ID)
	require.NoError(t, err)
	require.Equal(t, lt.ActionPending, got.Status)
	require.Nil(t, got.ResolvedBy)
}

// TestApproversSeparationOfDuties: the key that started a session cannot
// approve its deploy under not_creator, nor can its holder with another
// key (the same name is the same person); another approver can, and the
// journal says who. The approval itself says who may decide it.
func TestApproversSeparationOfDuties(t *testing.T) {
	h := newHarness(t)
	approvers := &lt.Approvers{Roles: []lt.Role{lt.RoleApprover, lt.RoleAdmin}, NotCreator: true}
	s, err := h.eng.CreateSession(as(aliceOperator), &lt.CreateSessionRequest{AgentSpec: deploySpec(t, approvers), Input: "ship it"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	require.Equal(t, "deploy", act.Policy)
	require.Equal(t, approvers, act.Approvers, "the inbox can show who may approve")

	const needs = `the policy "deploy" needs an approver with role approver or admin who did not create the session`
	requireRefusedDecision(t, h, as(aliceOperator), s, act, needs, "alice (operator) may not decide")
	requireRefusedDecision(t, h, as(aliceApprover), s, act, needs, "alice (approver) may not decide")
	// No actor at all (a caller that forgot to say who it is) is nobody
	// the policy accepts.
	requireRefusedDecision(t, h, context.Background(), s, act, needs, "an unknown caller")
	// A reject is a decision too.
	_, err = h.eng.DecideAction(as(aliceApprover), s.ID, act.ID, &lt.Decision{Decision: lt.DecisionReject, Reason: "no"})
	requireAPIError(t, err, lt.CodeForbidden, needs)

	decided, err := h.eng.DecideAction(as(bobApprover), s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	require.NoError(t, err)
	require.Equal(t, lt.ActionResolved, decided.Status)
	require.Equal(t, &bobApprover, decided.ResolvedBy)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "deployed", mustTurnOutput(t, h, s))
	require.Equal(t, &bobApprover, actorOfEvent(t, onlyEvent(t, h, s.ID, lt.EventActionResolved)))
	// The same decision again is answered as decided to whom the policy
	// lets decide; a refused decider still gets the 403, never a 200.
	again, err := h.eng.DecideAction(as(bobApprover), s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	require.NoError(t, err)
	require.Equal(t, decided.ResolvedAt, again.ResolvedAt)
	_, err = h.eng.DecideAction(as(aliceApprover), s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	requireAPIError(t, err, lt.CodeForbidden, needs)
	checkJournal(t, h.store, s.ID)
}

// TestApproversRolesAndNames: an admin-only rule refuses an approver; a
// rule naming people refuses anyone else; not_creator alone accepts an
// admin who did not create the session, and refuses one who did.
func TestApproversRolesAndNames(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name      string
		approvers *lt.Approvers
		creator   lt.Actor
		refused   lt.Actor
		refusal   string
		accepted  lt.Actor
	}{
		{"admin only", &lt.Approvers{Roles: []lt.Role{lt.RoleAdmin}}, aliceOperator, bobApprover,
			`the policy "deploy" needs an approver with role admin: bob (approver) may not decide`, rootAdmin},
		{"named", &lt.Approvers{Names: []string{"carol", "dave"}}, aliceOperator, bobApprover,
			`the policy "deploy" needs an approver named carol or dave: bob (approver)`, carolApprover},
		{"role and name", &lt.Approvers{Roles: []lt.Role{lt.RoleAdmin}, Names: []string{"carol"}}, aliceOperator, carolApprover,
			`needs an approver with role admin, named carol:`, lt.Actor{KeyID: "key_carol_admin", Name: "carol", Role: lt.RoleAdmin}},
		{"an admin who created it", &lt.Approvers{NotCreator: true}, rootAdmin, rootAdmin,
			`needs an approver who did not create the session: root (admin)`, bobApprover},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := h.eng.CreateSession(as(c.creator), &lt.CreateSessionRequest{AgentSpec: deploySpec(t, c.approvers), Input: "ship it"})
			require.NoError(t, err)
			s = h.waitStatus(s.ID, lt.SessionRequiresAction)
			requireRefusedDecision(t, h, as(c.refused), s, s.RequiredActions[0], c.refusal)
			decided, err := h.eng.DecideAction(as(c.accepted), s.ID, s.RequiredActions[0].ID, &lt.Decision{Decision: lt.DecisionApprove})
			require.NoError(t, err)
			require.Equal(t, &c.accepted, decided.ResolvedBy)
			h.waitStatus(s.ID, lt.SessionIdle)
		})
	}
}

// TestApproversOfASubagent: a sub-agent's session was created by its
// root's creator, so not_creator refuses that person on the sub-agent's
// approvals too; the model that spawned it has no say in who that is.
func TestApproversOfASubagent(t *testing.T) {
	h := newHarness(t)
	child := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("write_file", map[string]any{"path": "c.txt", "content": "child"})}},
		map[string]any{"text": "child done"},
	), "write_file")
	child["policies"] = []any{map[string]any{"name": "deploy", "tool": "write_file", "decision": "ask", "approvers": map[string]any{"not_creator": true}}}
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "deploy"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "all done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "write_file"})
	s, err := h.eng.CreateSession(as(rootAdmin), &lt.CreateSessionRequest{AgentSpec: parent, Input: "go"})
	require.NoError(t, err)

	kid := waitChildApproval(t, h, s.ID)
	require.Equal(t, &rootAdmin, kid.CreatedBy, "a sub-agent is created by its root's creator")
	act := kid.RequiredActions[0]
	requireRefusedDecision(t, h, as(rootAdmin), &kid, act, `needs an approver who did not create the session: root (admin)`)
	_, err = h.eng.DecideAction(as(bobApprover), kid.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "all done", mustTurnOutput(t, h, s))
}

// waitChildApproval waits for the one sub-agent of parent to ask for an
// approval, and returns it.
func waitChildApproval(t *testing.T, h *harness, parent string) lt.Session {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if kids := children(t, h, parent); len(kids) == 1 && kids[0].Status == lt.SessionRequiresAction {
			return kids[0]
		}
		require.True(t, time.Now().Before(deadline), "the sub-agent never asked for its approval")
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

// TestSubagentCannotShadowTheParentsApprovers: a model spawning a child
// whose own policy is a plain ask on the tool the parent guards with
// approvers (even naming it as the inherited rule) does not lift the
// separation of duties: the child's approval carries the parent's
// approvers, and the session's creator is refused.
func TestSubagentCannotShadowTheParentsApprovers(t *testing.T) {
	for _, ownName := range []string{"mine", "parent.deploy"} {
		t.Run(ownName, func(t *testing.T) {
			h := newHarness(t)
			child := childSpec(script(t,
				map[string]any{"tool_calls": []any{toolCall("write_file", map[string]any{"path": "c.txt", "content": "child"})}},
				map[string]any{"text": "child done"},
			), "write_file")
			child["policies"] = []any{map[string]any{"name": ownName, "tool": "write_file", "decision": "ask"}}
			parent := spec(t, script(t,
				map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "deploy"})}},
				map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
				map[string]any{"text": "all done"},
			), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "write_file"})
			approvers := &lt.Approvers{Roles: []lt.Role{lt.RoleAdmin, lt.RoleApprover}, NotCreator: true}
			parent.Policies = []lt.Policy{{Name: "deploy", Tool: "write_file", Decision: lt.PolicyAsk, Approvers: approvers}}
			s, err := h.eng.CreateSession(as(rootAdmin), &lt.CreateSessionRequest{AgentSpec: parent, Input: "go"})
			require.NoError(t, err)

			kid := waitChildApproval(t, h, s.ID)
			act := kid.RequiredActions[0]
			require.Equal(t, "parent.deploy", act.Policy, "the parent's rule decides a tie")
			require.Equal(t, approvers, act.Approvers)
			requireRefusedDecision(t, h, as(rootAdmin), &kid, act, `who did not create the session: root (admin)`)
			_, err = h.eng.DecideAction(as(bobApprover), kid.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
			require.NoError(t, err)
			h.waitStatus(s.ID, lt.SessionIdle)
		})
	}
}

// TestApproversAreValidated: an agent's approvers are checked when it is
// defined, each error naming the field.
func TestApproversAreValidated(t *testing.T) {
	h := newHarness(t)
	cases := map[string]struct {
		policy lt.Policy
		field  string
		msg    string
	}{
		"operator role": {lt.Policy{Tool: "write_file", Decision: lt.PolicyAsk, Approvers: &lt.Approvers{Roles: []lt.Role{lt.RoleAdmin, lt.RoleOperator}}},
			"spec.policies[0].approvers.roles[1]", "the operator role may not decide actions"},
		"unknown role": {lt.Policy{Tool: "write_file", Decision: lt.PolicyAsk, Approvers: &lt.Approvers{Roles: []lt.Role{"boss"}}},
			"spec.policies[0].approvers.roles[0]", `unknown role "boss"`},
		"empty name": {lt.Policy{Tool: "write_file", Decision: lt.PolicyAsk, Approvers: &lt.Approvers{Names: []string{"bob", " "}}},
			"spec.policies[0].approvers.names[1]", "must be a key's name"},
		"empty": {lt.Policy{Tool: "write_file", Decision: lt.PolicyAsk, Approvers: &lt.Approvers{}},
			"spec.policies[0].approvers", "give roles, names or not_creator"},
		"deny": {lt.Policy{Tool: "write_file", Decision: lt.PolicyDeny, Approvers: &lt.Approvers{NotCreator: true}},
			"spec.policies[0].approvers", "applies only to ask policies"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			sp := spec(t, `[{"text":"hi"}]`, lt.ToolSpec{Name: "write_file"})
			sp.Policies = []lt.Policy{c.policy}
			_, err := h.eng.PutAgent(as(rootAdmin), &lt.PutAgentRequest{Name: "deployer", Spec: *sp})
			requireAPIError(t, err, lt.CodeInvalidRequest, c.msg)
			var ae *apierror.Error
			require.ErrorAs(t, err, &ae)
			require.Equal(t, c.field, ae.Body().Error.Field)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestAgentVersionsRecordTheirCreator: each agent version says who defined
// it, read back from the store; a version defined without a caller says
// nothing.
func TestAgentVersionsRecordTheirCreator(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"text":"hi"}]`)
	v1, err := h.eng.PutAgent(as(aliceOperator), &lt.PutAgentRequest{Name: "writer", Spec: *sp})
	require.NoError(t, err)
	require.Equal(t, &aliceOperator, v1.CreatedBy)
	_, err = h.eng.PutAgent(context.Background(), &lt.PutAgentRequest{Name: "writer", Spec: *sp})
	require.NoError(t, err)

	got, err := h.eng.GetAgent(context.Background(), lt.DefaultProject, "writer", 1)
	require.NoError(t, err)
	require.Equal(t, &aliceOperator, got.CreatedBy)
	latest, err := h.eng.GetAgent(context.Background(), lt.DefaultProject, "writer", 0)
	require.NoError(t, err)
	require.Equal(t, 2, latest.Version)
	require.Nil(t, latest.CreatedBy)
	list, err := h.eng.ListAgents(context.Background(), "")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Nil(t, list[0].CreatedBy)
}

// TestPauseCarriedOutLaterKeepsItsActor: a pause asked for while a model
// call runs is journaled by the worker at its next safe point, with the
// actor of the person who asked for it, not the worker's.
func TestPauseCarriedOutLaterKeepsItsActor(t *testing.T) {
	g := newGate()
	h := newGatedHarness(t, g)
	s := create(t, h, spec(t, `[{"delay_ms":1000,"text":"thinking"},{"text":"done"}]`), nil)
	g.await(t)
	p, err := h.eng.PauseSession(as(bobApprover), s.ID, &lt.PauseRequest{Reason: "look first"})
	require.NoError(t, err)
	require.True(t, p.PauseRequested)
	g.open(t)
	h.waitStatus(s.ID, lt.SessionPaused)
	require.Equal(t, &bobApprover, actorOfEvent(t, onlyEvent(t, h, s.ID, lt.EventSessionPauseRequested)))
	require.Equal(t, &bobApprover, actorOfEvent(t, onlyEvent(t, h, s.ID, lt.EventSessionPaused)), "the worker journals the asker")
	_, err = h.eng.ResumeSession(as(carolApprover), s.ID, &lt.ResumeRequest{})
	require.NoError(t, err)
	require.Equal(t, &carolApprover, actorOfEvent(t, onlyEvent(t, h, s.ID, lt.EventSessionResumed)))
	h.waitStatus(s.ID, lt.SessionIdle)
}
