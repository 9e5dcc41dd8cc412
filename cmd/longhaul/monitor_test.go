package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// monitorSpec runs a shell command the trajectory monitor reads as a
// sandbox-escape attempt (its action is ask by default).
const monitorSpec = `{
  "model": {"provider": "scripted", "script": [
    {"tool_calls": [{"name": "shell", "arguments": {"command": "unshare -r true; echo after"}}]},
    {"text": "Done."}
  ]},
  "tools": [{"name": "shell"}]
}`

// TestMonitorActionShownContinuedAndStopped: the CLI shows a monitor
// action's finding and how to decide it; continue lets the session go
// on, stop ends the turn; continue refuses an action of another type.
func TestMonitorActionShownContinuedAndStopped(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)

	sess := startSession(t, s, monitorSpec, "go")
	act := sess.RequiredActions[0]
	require.Equal(t, lt.ActionMonitor, act.Type)
	out := cliOK(t, "action", act.ID, "--server", s.url)
	require.Contains(t, out, "escape_signatures (high): a shell call runs unshare")
	require.Contains(t, out, "longhaul continue "+act.ID)
	require.Contains(t, out, "longhaul stop "+act.ID)
	out = cliOK(t, "events", sess.ID, "--server", s.url)
	require.Contains(t, out, "escape_signatures (high, ask): a shell call runs unshare; events ")
	out = cliOK(t, "inbox", "--type", "monitor", "--server", s.url)
	require.Contains(t, out, act.ID)
	out = cliOK(t, "continue", act.ID, "--server", s.url)
	require.Contains(t, out, "is resolved: continue")
	s.waitEvent(t, sess.ID, lt.EventTurnCompleted)

	sess = startSession(t, s, monitorSpec, "go")
	act = sess.RequiredActions[0]
	resolved := cliJSON[lt.Action](t, "stop", act.ID, "--reason", "no namespaces", "--json", "--server", s.url)
	require.Equal(t, lt.ActionResolved, resolved.Status)
	s.waitEvent(t, sess.ID, lt.EventTurnFailed)
	final := cliJSON[lt.Session](t, "show", sess.ID, "--server", s.url, "--json")
	require.Equal(t, lt.StopStopped, *final.StopReason)

	q := startSession(t, s, questionSpec, "which?")
	r := cliRun(t, "continue", q.RequiredActions[0].ID, "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "longhaul answer")
}
