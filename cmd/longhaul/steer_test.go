package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestSteerCommand: `longhaul steer` journals the message (with its
// interrupt flag) on a session waiting for an action, which keeps waiting;
// events shows it; a session with no turn to steer is a conflict, and a
// missing message a usage error.
func TestSteerCommand(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	id, act := startFunctionSession(t, s)

	out := cliOK(t, "steer", id, "Use the 2025 figures.", "--interrupt", "--server", s.url)
	require.Contains(t, out, "Steered "+id+" (status: requires_action)")
	ev := s.waitEvent(t, id, lt.EventTurnSteered)
	var d lt.TurnSteeredData
	require.NoError(t, json.Unmarshal(ev.Data, &d))
	// The CLI's client sends an Idempotency-Key: the event carries its
	// claim's seed.
	require.Regexp(t, `^[0-9a-z]{26}$`, d.Request)
	d.Request = ""
	require.Equal(t, lt.TurnSteeredData{TurnID: ev.TurnID, Input: "Use the 2025 figures.", Interrupt: true,
		Actor: &lt.Actor{Name: "local", Role: lt.RoleAdmin}}, d, "the loopback caller steered")
	sess := cliJSON[lt.Session](t, "steer", id, "And be brief.", "--server", s.url, "--json")
	require.Equal(t, lt.SessionRequiresAction, sess.Status)
	require.Len(t, sess.RequiredActions, 1)
	require.Equal(t, act.ID, sess.RequiredActions[0].ID, "the action stays pending")
	require.Regexp(t, `turn\.steered +"Use the 2025 figures\." \(interrupt\)`, cliOK(t, "events", id, "--server", s.url))

	r := cliRun(t, "steer", id, "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	r = cliRun(t, "steer", id, " ", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "input")

	cliOK(t, "cancel", id, "--server", s.url)
	s.waitEvent(t, id, lt.EventTurnCancelled)
	r = cliRun(t, "steer", id, "too late", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "conflict")
	require.Contains(t, r.stderr, "send a follow-up turn instead")

	require.Contains(t, cliOK(t, "steer", "--help"), "--interrupt")
}
