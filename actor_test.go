package longhaul_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestLibraryDecisionsCarryItsActor: the embedding program decides as the
// admin "library": the journal says so on the session it created and on
// the approval it decided. Being one actor, it cannot be its own second
// pair of eyes: an approval under not_creator is refused to it.
func TestLibraryDecisionsCarryItsActor(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	ctx := t.Context()
	library := &lt.Actor{Name: "library", Role: lt.RoleAdmin}
	run := func(approvers *lt.Approvers) (*lt.Session, lt.Action) {
		sp := scripted(`[{"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt","content":"x"}}]},{"text":"done"}]`, lt.ToolSpec{Name: "write_file"})
		sp.Policies = []lt.Policy{{Name: "writes", Tool: "write_file", Decision: lt.PolicyAsk, Approvers: approvers}}
		s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &sp, Input: "go"})
		require.NoError(t, err)
		require.Equal(t, library, s.CreatedBy)
		s = waitStatus(t, rt, s.ID, lt.SessionRequiresAction)
		return s, s.RequiredActions[0]
	}

	s, act := run(&lt.Approvers{Roles: []lt.Role{lt.RoleAdmin}})
	decided, err := rt.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	require.NoError(t, err)
	require.Equal(t, library, decided.ResolvedBy)
	waitStatus(t, rt, s.ID, lt.SessionIdle)

	s, act = run(&lt.Approvers{NotCreator: true})
	_, err = rt.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionApprove})
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, lt.CodeForbidden, ae.Code)
	require.Contains(t, ae.Message, `the policy "writes" needs an approver who did not create the session: library (admin) may not decide`)
}
