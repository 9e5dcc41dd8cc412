package report_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/report"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestDecisionsByActor: a task's record counts the decisions each person
// made on it (an approval, a function call's answer, a steer, a pause and
// its resume, a review), and the totals add them up over the tasks, most
// first; what nobody decided is not counted.
func TestDecisionsByActor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	eng, err := engine.New(st, &engine.Config{
		WorkspaceRoot: filepath.Join(dir, "workspaces"),
		Providers:     map[string]model.Provider{"scripted": scripted.New(nil)},
		Logger:        slog.New(slog.DiscardHandler),
		PollInterval:  10 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, eng.Stop(stopCtx))
	})
	alice := lt.Actor{KeyID: "key_alice", Name: "alice", Role: lt.RoleOperator}
	bob := lt.Actor{KeyID: "key_bob", Name: "bob", Role: lt.RoleApprover}
	as := func(a lt.Actor) context.Context { return engine.WithActor(ctx, a) }
	waitAction := func(id string) lt.Action {
		t.Helper()
		var s *lt.Session
		require.Eventually(t, func() bool {
			s, err = eng.GetSession(ctx, id)
			require.NoError(t, err)
			return s.Status == lt.SessionRequiresAction
		}, 10*time.Second, 2*time.Millisecond)
		return s.RequiredActions[0]
	}
	waitIdle := func(id string) {
		t.Helper()
		require.Eventually(t, func() bool {
			s, err := eng.GetSession(ctx, id)
			require.NoError(t, err)
			return s.Status == lt.SessionIdle
		}, 10*time.Second, 2*time.Millisecond)
	}

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
