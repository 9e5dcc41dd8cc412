package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRunnerParkedSessionHoldsNoSlot runs the real binary as a server and
// a `longhaul runner --capacity 1` process on loopback. Session A writes a
// file on the runner and parks on a function call; its environment may be
// stopped (environment.idle_stop_seconds) but not for an hour. Session B
// then needs the same runner: it runs at once, with no
// environment_connection wait and without A's environment being stopped,
// because a parked session holds no slot of its runner (its claim closed
// its environment; only its workspace stays on the runner's disk). A's
// workspace is left as it was, and A goes on in it afterwards. This is why
// the server never stops a parked session's environment early to make
// room on a full runner: a full runner is full of running calls, never of
// parked sessions.
func TestRunnerParkedSessionHoldsNoSlot(t *testing.T) {
	t.Parallel()
	const boot = "lh-runner-capacity-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	runnerKey := k.create("runners", lt.RoleRunner)
	box := startRunner(t, k.srv.url, runnerKey.Key, "box1", "--capacity", "1")
	env := &lt.Environment{Runner: &lt.RunnerSelector{Name: "box1"}, IdleStopSeconds: 3600}

	a, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: keptFileAgent(t, env)})
	require.NoError(t, err)
	actionA := parkedOnLookup(t, admin, a.ID)
	keptA := filepath.Join(box.data, "workspaces", a.ID, "kept.txt")
	got, err := os.ReadFile(keptA)
	require.NoError(t, err, "A's workspace is on the runner")
	require.Equal(t, "kept\n", string(got))

	b, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: keptFileAgent(t, env)})
	require.NoError(t, err)
	actionB := parkedOnLookup(t, admin, b.ID)

	events := func(id string) []lt.Event {
		l, err := admin.ListEvents(ctx, id, 0, 500)
		require.NoError(t, err)
		return l.Data
	}
	for _, ev := range events(b.ID) {
		if ev.Type == lt.EventActionRequired {
			require.NotContains(t, string(ev.Data), string(lt.ActionEnvironmentConnection), "B never waited for a slot")
		}
	}
	for _, ev := range events(a.ID) {
		require.NotContains(t, []string{lt.EventEnvironmentStopping, lt.EventEnvironmentStopped, lt.EventEnvironmentStopFailed}, ev.Type,
			"A's environment was not stopped to make room: it held no slot")
	}
	got, err = os.ReadFile(keptA)
	require.NoError(t, err, "A's workspace is still on the runner")
	require.Equal(t, "kept\n", string(got))

	// Both go on, each in its own workspace, one after the other or at
	// once as the one slot allows.
	answerLookupAndCheckKept(t, admin, a.ID, actionA)
	answerLookupAndCheckKept(t, admin, b.ID, actionB)
	runners, err := admin.ListRunners(ctx, "")
	require.NoError(t, err)
	require.Len(t, runners.Data, 1)
	require.Equal(t, 1, runners.Data[0].Capacity)
	require.Eventually(t, func() bool {
		runners, err := admin.ListRunners(ctx, "")
		return err == nil && len(runners.Data) == 1 && len(runners.Data[0].Sessions) == 0
	}, time.Minute, 20*time.Millisecond, "no environment stays open once both sessions are idle")
}
