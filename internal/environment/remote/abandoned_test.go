package remote_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/store"
)

// TestAbandonedOpenIsReported: an environment the server opened and never
// claimed (the open's answer lost, the close that followed lost too) is
// closed by the runner once its bound passed, and the runner says so
// (env.abandoned): the hub tells OnAbandoned, which wakes a session
// waiting for that slot. A report of a handle the hub did not leave
// unclaimed (a claimed one, or one made up by a hostile runner) is not
// taken.
func TestAbandonedOpenIsReported(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	var now atomic.Pointer[time.Time]
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	now.Store(&start)
	reported := make(chan store.RunnerRow, 4)
	rg := newRig(t, blobs, rigOptions{
		now:         func() time.Time { return *now.Load() },
		onAbandoned: func(row store.RunnerRow) { reported <- row },
	})
	r := rg.connected(t)
	ctx := t.Context()
	open := func(id string) {
		t.Helper()
		r.NoteOpening(id)
		require.NoError(t, r.Conn.Call(ctx, link.MethodEnvOpen, link.EnvOpenParams{EnvID: id, Workspace: "ses_" + id, Session: "ses_" + id}, nil, nil))
	}
	open("eab_lost")    // never claimed: its answer "lost"
	open("eab_claimed") // claimed, as the remote backend does at once
	require.NoError(t, r.Conn.Call(ctx, link.MethodEnvClaim, link.EnvRef{EnvID: "eab_claimed"}, nil, nil))
	r.Claimed("eab_claimed")

	later := start.Add(3 * time.Minute)
	now.Store(&later)
	open("eab_next") // the runner sweeps the abandoned open as this one comes, and reports it first
	select {
	case row := <-reported:
		require.Equal(t, runnerName, row.Name)
		require.Equal(t, "key_1", row.KeyID)
	case <-time.After(10 * time.Second):
		t.Fatal("the runner closed an abandoned open and the hub was not told")
	}
	require.NoError(t, r.Conn.Call(ctx, link.MethodEnvClaim, link.EnvRef{EnvID: "eab_next"}, nil, nil))
	var re *link.RemoteError
	require.ErrorAs(t, r.Conn.Call(ctx, link.MethodEnvClaim, link.EnvRef{EnvID: "eab_lost"}, nil, nil), &re,
		"the abandoned open is closed on the runner")
	require.Equal(t, link.CodeClosed, re.Code)

	require.Empty(t, reported, "one report, for the abandoned open only")
}
