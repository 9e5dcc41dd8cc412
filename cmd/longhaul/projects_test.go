package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestProjectFlags: `run --project` creates the session in that project
// (the local caller of a server without keys is an admin), and `ls`,
// `inbox` and `report` keep one project with --project.
func TestProjectFlags(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	support := startSession(t, s, functionSpec, "Look up c-7", "--project", "support")
	require.Equal(t, "support", support.Project)
	other := startSession(t, s, strings.Replace(functionSpec, `"c-7"`, `"c-8"`, 1), "Look up c-8")
	require.Equal(t, lt.DefaultProject, other.Project)

	sessions := cliJSON[[]lt.Session](t, "ls", "--server", s.url, "--json", "--project", "support")
	require.Len(t, sessions, 1)
	require.Equal(t, support.ID, sessions[0].ID)
	require.Len(t, cliJSON[[]lt.Session](t, "ls", "--server", s.url, "--json"), 2, "every project without --project")

	actions := cliJSON[[]lt.Action](t, "inbox", "--server", s.url, "--json", "--project", lt.DefaultProject)
	require.Len(t, actions, 1)
	require.Equal(t, other.RequiredActions[0].ID, actions[0].ID)

	rep := cliJSON[lt.TaskReport](t, "report", "--server", s.url, "--json", "--project", "support")
	require.Equal(t, "support", rep.Project)
	require.Equal(t, 1, rep.Totals.Tasks)
	require.Equal(t, support.ID, rep.Data[0].ID)

	r := cliRun(t, "ls", "--server", s.url, "--project", "Not A Project")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "project")
}
