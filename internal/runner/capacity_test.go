package runner_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
)

// TestRunnerKeepsItsOwnBounds: a server node that keeps no count (this test
// calls the runner's methods itself, as a hostile or buggy node would)
// cannot make a runner hold more environments than its capacity, nor more
// than environment.MaxStopOpens opened to be stopped, nor run anything in
// one opened to be stopped. A closed environment frees its place.
func TestRunnerKeepsItsOwnBounds(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	start(t, s, "box1", "good") // capacity 2
	r := connected(t, s, "box1")
	ctx := t.Context()
	open := func(id string, forStop bool) error {
		return r.Conn.Call(ctx, link.MethodEnvOpen, link.EnvOpenParams{EnvID: id, Workspace: "ses_" + id, Session: "ses_" + id, ForStop: forStop}, nil, nil)
	}
	full := func(err error) {
		t.Helper()
		var re *link.RemoteError
		require.ErrorAs(t, err, &re)
		require.Equal(t, link.CodeFull, re.Code, "%v", err)
	}

	require.NoError(t, open("e1", false))
	require.NoError(t, open("e2", false))
	full(open("e3", false))
	for i := range environment.MaxStopOpens {
		require.NoError(t, open(fmt.Sprintf("s%d", i), true), "opened to be stopped: not counted against the capacity")
	}
	full(open("sx", true))

	// Opened to be stopped: it tells what it holds, nothing else.
	var holds bool
	require.NoError(t, r.Conn.Call(ctx, link.MethodSnapshotHolds, link.SnapshotParams{EnvID: "s0", Snapshot: "sha256:" + fmt.Sprintf("%064d", 0)}, &holds, nil))
	refused := map[string]any{
		link.MethodFSWrite:        link.FSWriteParams{EnvID: "s0", Path: "x.txt", Data: []byte("x"), Last: true},
		link.MethodFSRead:         link.FSReadParams{EnvID: "s0", Path: "x.txt", Limit: 10},
		link.MethodFSList:         link.FSPathParams{EnvID: "s0", Path: "."},
		link.MethodFSRemove:       link.FSPathParams{EnvID: "s0", Path: "x.txt"},
		link.MethodProcessStart:   link.ProcessStartParams{EnvID: "s0", Process: "p1", Command: "true"},
		link.MethodSQLiteQuery:    link.SQLiteParams{EnvID: "s0", Request: []byte(`{}`)},
		link.MethodSnapshotRecord: link.SnapshotParams{EnvID: "s0", Snapshot: "sha256:" + fmt.Sprintf("%064d", 0)},
	}
	for method, params := range refused {
		var re *link.RemoteError
		require.ErrorAs(t, r.Conn.Call(ctx, method, params, nil, nil), &re, method)
		require.Equal(t, link.CodeWorkspaceBusy, re.Code, method)
		require.Contains(t, re.Message, "opened only to be stopped", method)
	}
	_, err := hub.Exec(ctx, r, &link.ExecParams{Session: "ses_s0", EnvID: "s0", Command: "touch ran"})
	var re *link.RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, link.CodeWorkspaceBusy, re.Code)

	// Closing frees a place of its kind.
	require.NoError(t, r.Conn.Call(ctx, link.MethodEnvClose, link.EnvRef{EnvID: "s0"}, nil, nil))
	require.NoError(t, open("sx", true))
	require.NoError(t, r.Conn.Call(ctx, link.MethodEnvClose, link.EnvRef{EnvID: "e1"}, nil, nil))
	require.NoError(t, open("e3", false))
	full(open("e4", false))
}

// TestPlainExecHoldsASlot: a command run with no environment (a session's
// plain workspace) used to skip the runner's count: a server could run
// any number of them beside a full runner's environments. It holds a slot
// while it runs, refused (full) when there is none, and gives it back.
func TestPlainExecHoldsASlot(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	start(t, s, "box1", "good") // capacity 2
	r := connected(t, s, "box1")
	ctx := t.Context()
	open := func(id string) error {
		return r.Conn.Call(ctx, link.MethodEnvOpen, link.EnvOpenParams{EnvID: id, Workspace: "ses_" + id, Session: "ses_" + id}, nil, nil)
	}

	res, err := hub.Exec(ctx, r, &link.ExecParams{Session: "ses_plain", Command: "echo ran"})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.NoError(t, open("e1"))
	require.NoError(t, open("e2"))
	_, err = hub.Exec(ctx, r, &link.ExecParams{Session: "ses_plain", Command: "touch ran"})
	var re *link.RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, link.CodeFull, re.Code, "%v", err)

	require.NoError(t, r.Conn.Call(ctx, link.MethodEnvClose, link.EnvRef{EnvID: "e1"}, nil, nil))
	res, err = hub.Exec(ctx, r, &link.ExecParams{Session: "ses_plain", Command: "echo ran"})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.NoError(t, open("e3"), "the command gave its slot back")
}
