package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deploySpec is approvalSpec whose approvals only an admin who did not
// create the session may decide.
var deploySpec = strings.Replace(approvalSpec, `"reason": "a person reads every write"`,
	`"reason": "a person reads every write", "approvers": {"roles": ["admin"], "not_creator": true}`, 1)

// TestCLIShowsWhoDecided: the action, the session's actions, the events
// and the session say who decided and who created, and a pending approval
// says who may decide it. The test server's loopback caller is the admin
// "local", which both created the session and decides: not_creator
// refuses it with what the policy needs.
func TestCLIShowsWhoDecided(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	sess := startSession(t, s, deploySpec, "Write the notes")
	act := sess.RequiredActions[0]

	out := cliOK(t, "action", act.ID, "--server", s.url)
	require.Contains(t, out, "Approvers:    role admin, not the session's creator")
	r := cliRun(t, "approve", act.ID, "--server", s.url)
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, `the policy "review-writes" needs an approver with role admin who did not create the session: local (admin) may not decide`)
	require.Contains(t, r.stderr, "Hint: the policy says who may decide this action")
	require.NotContains(t, r.stderr, "--api-key", "the key is not the problem")

	sess = startSession(t, s, approvalSpec, "Write the notes")
	act = sess.RequiredActions[0]
	cliOK(t, "approve", act.ID, "--server", s.url)
	s.waitEvent(t, sess.ID, "turn.completed")

	out = cliOK(t, "action", act.ID, "--server", s.url)
	require.Contains(t, out, "Decided by:   local (admin)")
	out = cliOK(t, "actions", sess.ID, "--server", s.url)
	require.Contains(t, out, "local (admin)")
	out = cliOK(t, "events", sess.ID, "--server", s.url)
	require.Contains(t, out, "approval "+act.ID+": approve · by local (admin)")
	require.Contains(t, out, "· created by local (admin)")
	out = cliOK(t, "show", sess.ID, "--server", s.url)
	require.Contains(t, out, "by local (admin)")
}
