package report_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/report"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestDecisionsByActor: a task's record counts the decisions each person
// made on it (an approval, a function call's answer, a steer, a pause and
// its resume, a review), and the totals add them up over the tasks, most
// first; what nobody decided is not counted.
func TestDecisionsByActor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, eng := apptest.Engine(t, nil)
	alice := lt.Actor{KeyID: "key_alice", Name: "alice", Role: lt.RoleOperator}
	bob := lt.Actor{KeyID: "key_bob", Name: "bob", Role: lt.RoleApprover}
	as := func(a lt.Actor) context.Context { return engine.WithActor(ctx, a) }
	waitStatus := func(id string, want lt.SessionStatus) *lt.Session {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s, err := eng.GetSession(ctx, id)
			require.NoError(t, err)
			if s.Status == want {
				return s
			}
			require.True(t, time.Now().Before(deadline), "session %s still %s, want %s", id, s.Status, want)
			time.Sleep(2 * time.Millisecond) // polling interval, not a wait for an event
		}
	}
	waitAction := func(id string) lt.Action { return waitStatus(id, lt.SessionRequiresAction).RequiredActions[0] }
	waitIdle := func(id string) { waitStatus(id, lt.SessionIdle) }

	emailer := spec(t, []lt.ToolSpec{sendEmail}, []lt.Policy{{Tool: "send_email", Decision: lt.PolicyAsk}},
		step(0.25, "send_email", `{"to": "a@example.com"}`),
		step(0.125, "", "sent"),
	)
	one, err := eng.CreateSession(as(alice), &lt.CreateSessionRequest{AgentSpec: &emailer, Input: "mail"})
	require.NoError(t, err)
	approval := waitAction(one.ID)
	_, err = eng.SteerSession(as(alice), one.ID, &lt.SteerRequest{Input: "be polite"})
	require.NoError(t, err)
	_, err = eng.PauseSession(as(bob), one.ID, &lt.PauseRequest{})
	require.NoError(t, err)
	_, err = eng.ResumeSession(as(bob), one.ID, nil)
	require.NoError(t, err)
	_, err = eng.DecideAction(as(bob), one.ID, approval.ID, &lt.Decision{Decision: lt.DecisionApprove})
	require.NoError(t, err)
	fn := waitAction(one.ID)
	_, err = eng.DecideAction(as(alice), one.ID, fn.ID, &lt.Decision{Output: []byte(`{"sent": true}`)})
	require.NoError(t, err)
	waitIdle(one.ID)
	_, err = eng.ReviewSession(as(bob), one.ID, &lt.ReviewRequest{Accepted: ptr(true)})
	require.NoError(t, err)

	quiet := spec(t, nil, nil, step(0.25, "", "nothing to decide"))
	two, err := eng.CreateSession(as(alice), &lt.CreateSessionRequest{AgentSpec: &quiet, Input: "think"})
	require.NoError(t, err)
	waitIdle(two.ID)
	_, err = eng.ReviewSession(as(alice), two.ID, &lt.ReviewRequest{Accepted: ptr(false), Note: "meh"})
	require.NoError(t, err)

	rep, err := report.New(st, nil).TaskReport(ctx, lt.TaskReportParams{Since: "1h"})
	require.NoError(t, err)
	byID := map[string]lt.TaskRecord{}
	for _, r := range rep.Data {
		byID[r.ID] = r
	}
	require.Equal(t, []lt.ActorCount{{Actor: bob, Count: 4}, {Actor: alice, Count: 2}}, byID[one.ID].DecisionsByActor,
		"bob paused, resumed, approved and reviewed; alice steered and answered the function call")
	require.Equal(t, []lt.ActorCount{{Actor: alice, Count: 1}}, byID[two.ID].DecisionsByActor, "creating a session is no decision")
	require.Equal(t, []lt.ActorCount{{Actor: bob, Count: 4}, {Actor: alice, Count: 3}}, rep.Totals.DecisionsByActor)
}
