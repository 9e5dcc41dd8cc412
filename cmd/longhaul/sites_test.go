package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// browserSiteSpec opens a site of its allowlist no person allowed yet.
const browserSiteSpec = `{
  "model": {"provider": "scripted", "script": [
    {"tool_calls": [{"name": "browser", "arguments": {"action": "open", "url": "http://127.0.0.1:8181/docs", "purpose": "read the API docs"}}]},
    {"text": "Could not read them."}
  ]},
  "tools": [{"name": "browser"}],
  "environment": {"network": {"allow": ["127.0.0.1"], "ports": [8181]}}
}`

// TestAllowAndDenyBrowserSites: the inbox shows a browser_permission
// action's site, purpose and request id with the commands that decide it;
// allow checks its scope; a decision naming another request id is refused
// (409); deny sends the reason to the agent and the turn goes on.
func TestAllowAndDenyBrowserSites(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	sess := startSession(t, s, browserSiteSpec, "read the docs")
	act := sess.RequiredActions[0]
	require.Equal(t, lt.ActionBrowserPermission, act.Type)

	out := cliOK(t, "inbox", "--server", s.url)
	require.Contains(t, out, "Site:         http://127.0.0.1:8181\n")
	require.Contains(t, out, "Purpose:      read the API docs\n")
	require.Contains(t, out, "Request:      "+act.RequestID+"\n")
	require.Contains(t, out, "longhaul allow "+act.ID+" --scope once|session --request-id "+act.RequestID)
	require.Contains(t, out, "longhaul deny "+act.ID+" --reason TEXT --request-id "+act.RequestID)

	r := cliRun(t, "allow", act.ID, "--scope", "forever", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--scope must be once")
	r = cliRun(t, "allow", act.ID, "--scope", "once", "--request-id", "brq_someoneelses", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "code:    conflict (HTTP 409)")
	r = cliRun(t, "deny", act.ID, "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	r = cliRun(t, "reject", act.ID, "--reason", "no", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "longhaul allow "+act.ID)
	require.Equal(t, lt.ActionPending, cliJSON[lt.Action](t, "action", act.ID, "--server", s.url, "--json").Status)

	out = cliOK(t, "deny", act.ID, "--reason", "not that site", "--request-id", act.RequestID, "--server", s.url)
	require.Contains(t, out, "is resolved: deny: not that site.")
	s.waitEvent(t, sess.ID, lt.EventTurnCompleted)
}
