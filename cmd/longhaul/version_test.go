package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestVersionText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "v1.4.0 (revision 6d047d8e, 2026-12-01T10:00:00Z, modified; go1.26.0)",
		versionText(&lt.BuildInfo{Version: "v1.4.0", Revision: "6d047d8e", RevisionTime: "2026-12-01T10:00:00Z", Modified: true, GoVersion: "go1.26.0"}))
	require.Equal(t, "(devel) (go1.26.0)", versionText(&lt.BuildInfo{Version: "(devel)", GoVersion: "go1.26.0"}))
}

// TestVersionCommand: --version and `version --client` print this build;
// `version` adds the server's (GET /v1/version), and notes a server it
// cannot reach without failing.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)

	flag := cliOK(t, "--version")
	require.True(t, strings.HasPrefix(flag, "longhaul "), flag)
	require.Contains(t, flag, runtime.Version())
	require.Equal(t, "client: "+flag, cliOK(t, "version", "--client"))

	out := cliOK(t, "version", "--server", s.url)
	require.Contains(t, out, "client: longhaul ")
	require.Contains(t, out, "server: longhaul ")
	rep := cliJSON[versionReport](t, "version", "--json", "--server", s.url)
	require.NotNil(t, rep.Server)
	require.Equal(t, runtime.Version(), rep.Server.GoVersion)
	require.Equal(t, rep.Client, *rep.Server, "the same build in this process")

	r := cliRun(t, "version", "--server", "http://127.0.0.1:1")
	require.NoError(t, r.err)
	require.Contains(t, r.stdout, "client: longhaul ")
	require.Contains(t, r.stderr, "server: not reached")
}

// TestCompletionScripts: a script for each shell, naming the program; an
// unknown shell is a usage error.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for shell, marker := range map[string]string{
		"bash":       "complete -o default -F __start_longhaul longhaul",
		"zsh":        "#compdef longhaul",
		"fish":       "complete -c longhaul",
		"powershell": "Register-ArgumentCompleter -CommandName 'longhaul'",
	} {
		out := cliOK(t, "completion", shell)
		require.Contains(t, out, marker, shell)
	}
	r := cliRun(t, "completion", "tcsh")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `invalid argument "tcsh"`)

	// The scripts ask the program itself: its hidden __complete command
	// answers with the commands that match.
	out := cliOK(t, "__complete", "ag")
	require.Contains(t, out, "agents\t")
}
