package remote_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/environment/remote"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// TestRouterPicksTheMatchingRunner: a session that asks for no runner
// opens on this node; one that asks by name or by labels opens on the
// runner that matches (its files land in that runner's data), a pinned
// one on its runner whatever else matches, and nothing matching is
// ErrUnavailable.
func TestRouterPicksTheMatchingRunner(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{labels: []string{"linux"}})
	gpuData := t.TempDir()
	stopGPU := startRunner(t, rg.url, gpuData, sandbox.NewLocal(), sandbox.Limits{},
		link.Hello{Name: "box2", Labels: []string{"gpu", "linux"}, Capacity: 4, Version: "test"})
	t.Cleanup(stopGPU)
	require.Eventually(t, func() bool { _, ok := rg.hub.Get(project, "box2"); return ok }, 10*time.Second, time.Millisecond)

	router, local := newRouter(t, rg, blobs, nil)
	ctx := t.Context()

	open := func(session string, sel *environment.RunnerSelector, pinned string) (environment.Environment, error) {
		return router.Open(ctx, &environment.OpenParams{Workspace: session, Session: session, Project: project, Runner: sel, Pinned: pinned})
	}
	// writes a file named after the session and says where it landed.
	placed := func(session string, sel *environment.RunnerSelector, pinned string) string {
		t.Helper()
		env, err := open(session, sel, pinned)
		require.NoError(t, err)
		defer env.Close()
		_, err = env.Run(ctx, &tool.ExecRequest{Command: "echo here > mark.txt", Timeout: time.Minute})
		require.NoError(t, err)
		for where, dir := range map[string]string{"box1": rg.data, "box2": gpuData} {
			if _, err := os.Stat(filepath.Join(dir, "workspaces", session, "mark.txt")); err == nil {
				require.Equal(t, where, env.Info().Runner)
				return where
			}
		}
		require.Empty(t, env.Info().Runner)
		return "local"
	}

	require.Equal(t, "local", placed("ses_here", nil, ""))
	require.Equal(t, "box1", placed("ses_byname", &environment.RunnerSelector{Name: "box1"}, ""))
	require.Equal(t, "box2", placed("ses_gpu", &environment.RunnerSelector{Labels: []string{"gpu"}}, ""))
	require.Equal(t, "box2", placed("ses_both", &environment.RunnerSelector{Labels: []string{"linux", "gpu"}}, ""))
	require.Equal(t, "box1", placed("ses_pinned", &environment.RunnerSelector{Labels: []string{"linux"}}, "box1"))
	// Cases that fail with the pin ignored: both runners match and the
	// choice without a pin is box1 (ses_pinned above), or the pinned
	// runner does not match the selector any more.
	require.Equal(t, "box1", placed("ses_tie", &environment.RunnerSelector{Labels: []string{"linux"}}, ""), "without a pin")
	require.Equal(t, "box2", placed("ses_pin2", &environment.RunnerSelector{Labels: []string{"linux"}}, "box2"))
	require.Equal(t, "box1", placed("ses_pin1", &environment.RunnerSelector{Labels: []string{"gpu"}}, "box1"))

	// A pin holds the key the runner connected with: the name held by
	// another key is not the session's runner.
	env, err := open("ses_keyed", &environment.RunnerSelector{Labels: []string{"linux"}}, "box1")
	require.NoError(t, err)
	require.Equal(t, "key_1", env.Info().RunnerKey)
	require.NoError(t, env.Close())
	env, err = router.Open(ctx, &environment.OpenParams{Workspace: "ses_keyed", Session: "ses_keyed", Project: project,
		Runner: &environment.RunnerSelector{Labels: []string{"linux"}}, Pinned: "box1", PinnedKey: "key_1"})
	require.NoError(t, err)
	require.NoError(t, env.Close())
	_, err = router.Open(ctx, &environment.OpenParams{Workspace: "ses_keyed", Session: "ses_keyed", Project: project,
		Runner: &environment.RunnerSelector{Labels: []string{"linux"}}, Pinned: "box1", PinnedKey: "key_other"})
	require.ErrorIs(t, err, environment.ErrUnavailable)
	require.ErrorContains(t, err, "held by another key")

	_, err = open("ses_none", &environment.RunnerSelector{Labels: []string{"tpu"}}, "")
	require.ErrorIs(t, err, environment.ErrUnavailable)
	require.ErrorContains(t, err, "no matching runner is connected")
	_, err = open("ses_none", &environment.RunnerSelector{Name: "box3"}, "")
	require.ErrorIs(t, err, environment.ErrUnavailable)

	stopGPU()
	require.Eventually(t, func() bool { _, ok := rg.hub.Get(project, "box2"); return !ok }, 10*time.Second, time.Millisecond)
	_, err = open("ses_gpu", &environment.RunnerSelector{Labels: []string{"linux"}}, "box2")
	require.ErrorIs(t, err, environment.ErrUnavailable, "pinned to a runner gone: not moved to another match")
	require.ErrorContains(t, err, "runner box2, where its environment lives")

	_, err = local.Open(ctx, &environment.OpenParams{Workspace: "ses_x", Session: "ses_x", Runner: &environment.RunnerSelector{Name: "box1"}})
	require.ErrorContains(t, err, "params.runner", "the local backend never runs a runner's session")
}

// TestRouterCapacityIsALimit: a runner at its capacity gets no other
// environment, pinned or not: the open is ErrUnavailable saying the
// matching runners are full, and closing one of its environments frees a
// slot, told to OnFreed with how many it takes now.
func TestRouterCapacityIsALimit(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{labels: []string{"linux"}})
	stopSolo := startRunner(t, rg.url, t.TempDir(), sandbox.NewLocal(), sandbox.Limits{},
		link.Hello{Name: "solo", Labels: []string{"small"}, Capacity: 1, Version: "test"})
	t.Cleanup(stopSolo)
	require.Eventually(t, func() bool { _, ok := rg.hub.Get(project, "solo"); return ok }, 10*time.Second, time.Millisecond)

	freed := make(chan string, 4)
	router, _ := newRouter(t, rg, blobs, func(project, name, keyID string, labels []string, free int) {
		freed <- fmt.Sprintf("%s/%s %s %v free=%d", project, name, keyID, labels, free)
	})
	ctx := t.Context()
	small := &environment.RunnerSelector{Labels: []string{"small"}}
	open := func(session, pinned string) (environment.Environment, error) {
		return router.Open(ctx, &environment.OpenParams{Workspace: session, Session: session, Project: project, Runner: small, Pinned: pinned})
	}

	first, err := open("ses_one", "")
	require.NoError(t, err)
	require.Equal(t, "solo", first.Info().Runner)
	_, err = open("ses_two", "")
	require.ErrorIs(t, err, environment.ErrUnavailable, "the only match is full")
	require.ErrorIs(t, err, environment.ErrFull)
	require.ErrorContains(t, err, "the matching runners are full")
	_, err = open("ses_two", "solo")
	require.ErrorIs(t, err, environment.ErrUnavailable, "pinned to a full runner: no more either")
	require.ErrorContains(t, err, "at its capacity")
	require.Empty(t, freed)

	require.NoError(t, first.Close())
	select {
	case got := <-freed:
		require.Equal(t, project+"/solo key_1 [small] free=1", got)
	case <-time.After(10 * time.Second):
		t.Fatal("closing an environment of a full runner freed no slot")
	}
	second, err := open("ses_two", "")
	require.NoError(t, err, "a slot is free again")
	require.NoError(t, second.Close())
}

// TestRouterSkipsARunnerThatSaysItIsFull: the runner keeps its own count
// (an open this node gave up on still holds its slot there), so a runner
// this node counts room on may answer full: the open goes to the next
// matching runner with room, and with none it is ErrFull (the session
// waits for a slot).
func TestRouterSkipsARunnerThatSaysItIsFull(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{labels: []string{"linux"}})
	for _, name := range []string{"tiny_a", "tiny_b"} {
		stop := startRunner(t, rg.url, t.TempDir(), sandbox.NewLocal(), sandbox.Limits{},
			link.Hello{Name: name, Labels: []string{"tiny"}, Capacity: 1, Version: "test"})
		t.Cleanup(stop)
		require.Eventually(t, func() bool { _, ok := rg.hub.Get(project, name); return ok }, 10*time.Second, time.Millisecond)
	}
	ctx := t.Context()
	// tiny_a's slot is held by an environment the router does not count.
	direct, err := remote.New(&remote.Config{Hub: rg.hub, Project: project, Runner: "tiny_a"})
	require.NoError(t, err)
	held, err := direct.Open(ctx, &environment.OpenParams{Workspace: "ses_held", Session: "ses_held", Project: project})
	require.NoError(t, err)
	defer held.Close()

	router, _ := newRouter(t, rg, blobs, nil)
	tiny := &environment.RunnerSelector{Labels: []string{"tiny"}}
	env, err := router.Open(ctx, &environment.OpenParams{Workspace: "ses_one", Session: "ses_one", Project: project, Runner: tiny})
	require.NoError(t, err, "tiny_a is full by its own count: tiny_b has room")
	require.Equal(t, "tiny_b", env.Info().Runner)
	defer env.Close()
	_, err = router.Open(ctx, &environment.OpenParams{Workspace: "ses_two", Session: "ses_two", Project: project, Runner: tiny})
	require.ErrorIs(t, err, environment.ErrFull, "no matching runner has room")
}

// TestRouterFindsARunnerOnAnotherNode: a runner that the session may use
// but that is connected to another node (the store lists it there) is an
// ElsewhereError naming that node, which the engine hands the session to;
// a pin to a name now held there by another key is not.
func TestRouterFindsARunnerOnAnotherNode(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{labels: []string{"linux"}})
	far := &store.RunnerRow{Project: project, Name: "far", ConnID: "rc_far", KeyID: "key_far", Node: "node-b",
		Labels: []string{"remote"}, Capacity: 2, Version: "test"}
	require.NoError(t, rg.st.RunnerConnect(t.Context(), far, time.Minute))

	router, _ := newRouter(t, rg, blobs, nil)
	open := func(sel *environment.RunnerSelector, pinned, key string) error {
		_, err := router.Open(t.Context(), &environment.OpenParams{Workspace: "ses_far", Session: "ses_far", Project: project,
			Runner: sel, Pinned: pinned, PinnedKey: key})
		return err
	}
	var elsewhere *environment.ElsewhereError
	err := open(&environment.RunnerSelector{Labels: []string{"remote"}}, "", "")
	require.ErrorAs(t, err, &elsewhere)
	require.Equal(t, "node-b", elsewhere.Node)
	require.ErrorIs(t, err, environment.ErrUnavailable, "nothing ran")
	err = open(&environment.RunnerSelector{Labels: []string{"linux"}}, "far", "key_far")
	require.ErrorAs(t, err, &elsewhere, "pinned to a runner of another node")
	require.Equal(t, "far", elsewhere.Runner)

	err = open(&environment.RunnerSelector{Labels: []string{"linux"}}, "far", "key_other")
	require.ErrorIs(t, err, environment.ErrUnavailable)
	require.NotErrorAs(t, err, &elsewhere, "the name is held there by another key: not the session's runner")
	err = open(&environment.RunnerSelector{Labels: []string{"tpu"}}, "", "")
	require.NotErrorAs(t, err, &elsewhere)
	require.ErrorContains(t, err, "no matching runner is connected")
}

// TestRouterListsTheSessionsOnARunner: the sessions whose environments
// are open on a runner are recorded with its row (GET /v1/runners) at its
// node's next check of the connection, and leave it when they close.
func TestRouterListsTheSessionsOnARunner(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{labels: []string{"linux"}})
	router, _ := newRouter(t, rg, blobs, nil)
	listed := func(want ...string) {
		t.Helper()
		require.Eventually(t, func() bool {
			rows, err := rg.st.RunnerList(t.Context(), project, 0)
			return err == nil && len(rows) == 1 && slices.Equal(rows[0].Sessions, want)
		}, 10*time.Second, 5*time.Millisecond, "sessions listed: %v", want)
	}
	listed()
	var envs []environment.Environment
	for _, id := range []string{"ses_b", "ses_a"} {
		env, err := router.Open(t.Context(), &environment.OpenParams{Workspace: id, Session: id, Project: project,
			Runner: &environment.RunnerSelector{Labels: []string{"linux"}}})
		require.NoError(t, err)
		envs = append(envs, env)
	}
	listed("ses_a", "ses_b")
	require.NoError(t, envs[0].Close())
	listed("ses_a")
	require.NoError(t, envs[1].Close())
	listed()
}

// newRouter returns a router over rg's hub and a local backend of its own
// (returned too), with onFreed as its OnFreed.
func newRouter(t *testing.T, rg *rig, blobs *environmenttest.Blobs, onFreed func(project, name, keyID string, labels []string, free int)) (environment.Backend, environment.Backend) {
	t.Helper()
	spaces, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	local, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces, Blobs: blobs, SocketDir: t.TempDir()})
	require.NoError(t, err)
	router, err := remote.NewRouter(&remote.RouterConfig{Local: local, Hub: rg.hub, OnFreed: onFreed})
	require.NoError(t, err)
	return router, local
}

// TestRouterStopNeedsNoSlot: a runner at its capacity still opens the
// environment of a parked session (which holds no slot) to stop it
// (OpenParams.ForStop, pinned): that open runs nothing and changes
// nothing, stops the workspace at its snapshot, and frees no slot it did
// not take; at most environment.MaxStopOpens such opens at once.
func TestRouterStopNeedsNoSlot(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{labels: []string{"linux"}})
	data := t.TempDir()
	stopSolo := startRunner(t, rg.url, data, sandbox.NewLocal(), sandbox.Limits{},
		link.Hello{Name: "solo", Labels: []string{"small"}, Capacity: 1, Version: "test"})
	t.Cleanup(stopSolo)
	require.Eventually(t, func() bool { _, ok := rg.hub.Get(project, "solo"); return ok }, 10*time.Second, time.Millisecond)
	freed := make(chan string, 4)
	router, _ := newRouter(t, rg, blobs, func(project, name, keyID string, labels []string, free int) {
		freed <- name
	})
	ctx := t.Context()
	small := &environment.RunnerSelector{Labels: []string{"small"}}
	open := func(session, pinned string, forStop bool) (environment.Environment, error) {
		return router.Open(ctx, &environment.OpenParams{Workspace: session, Session: session, Project: project, Runner: small, Pinned: pinned, ForStop: forStop})
	}

	parked, err := open("ses_parked", "", false)
	require.NoError(t, err)
	require.NoError(t, parked.WriteFile(ctx, "kept.txt", []byte("kept")))
	require.NoError(t, parked.Close())
	<-freed
	busy, err := open("ses_busy", "", false)
	require.NoError(t, err, "the runner's one slot")
	t.Cleanup(func() { _ = busy.Close() })
	_, err = open("ses_parked", "solo", false)
	require.ErrorIs(t, err, environment.ErrFull, "a parked session's work needs a slot")

	stopping, err := open("ses_parked", "solo", true)
	require.NoError(t, err, "a stop needs no slot")
	require.False(t, stopping.Info().Provisioned, "the parked session's workspace")
	_, err = stopping.Run(ctx, &tool.ExecRequest{Command: "echo no > ran.txt"})
	require.ErrorIs(t, err, environment.ErrBusy, "an environment opened to stop runs nothing")
	require.ErrorIs(t, stopping.WriteFile(ctx, "x.txt", []byte("x")), environment.ErrBusy)
	// Everything but Holds, Snapshot, Stop and Close is refused
	// (OpenParams.ForStop).
	_, err = stopping.Start(ctx, &sandbox.StartRequest{Command: "cat"})
	require.ErrorIs(t, err, environment.ErrBusy, "Start")
	require.ErrorIs(t, stopping.Remove(ctx, "kept.txt"), environment.ErrBusy, "Remove")
	require.ErrorIs(t, stopping.WriteFileDirect(ctx, "x.txt", []byte("x")), environment.ErrBusy, "WriteFileDirect")
	_, err = stopping.StatDirect(ctx, "kept.txt")
	require.ErrorIs(t, err, environment.ErrBusy, "StatDirect")
	_, err = stopping.ReadFile(ctx, "kept.txt", 0, 10)
	require.ErrorIs(t, err, environment.ErrBusy, "ReadFile")
	_, err = stopping.List(ctx, ".", 10)
	require.ErrorIs(t, err, environment.ErrBusy, "List")
	_, err = stopping.SQLiteQuery(ctx, &tool.SQLiteRequest{Database: "kept.db", SQL: "select 1"})
	require.ErrorIs(t, err, environment.ErrBusy, "SQLiteQuery")
	require.ErrorIs(t, stopping.Record(ctx, "change-1"), environment.ErrBusy, "Record")
	_, err = stopping.Restore(ctx, "snp_none")
	require.ErrorIs(t, err, environment.ErrBusy, "Restore")
	held0, err := stopping.Holds(ctx, "change-1")
	require.NoError(t, err)
	require.False(t, held0, "the refused Record noted nothing")
	id, _, err := stopping.Snapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, stopping.Stop(ctx, id))
	require.NoDirExists(t, filepath.Join(data, "workspaces", "ses_parked"), "the workspace is freed")
	require.Empty(t, freed, "it took no slot, so it frees none")

	var held []environment.Environment
	for i := range environment.MaxStopOpens {
		env, err := open(fmt.Sprintf("ses_stop%d", i), "solo", true)
		require.NoError(t, err)
		held = append(held, env)
	}
	_, err = open("ses_stopmore", "solo", true)
	require.ErrorIs(t, err, environment.ErrFull, "the exemption is bounded")
	require.NoError(t, held[0].Close())
	again, err := open("ses_stopmore", "solo", true)
	require.NoError(t, err, "one stop done, room for the next")
	require.NoError(t, again.Close())
	for _, env := range held[1:] {
		require.NoError(t, env.Close())
	}
	require.Empty(t, freed)
}

// TestRouterConfinesNetworkOfTheSessionsBackend: the router answers
// ConfinesNetwork for the backend a session's programs run in, not for this
// node's: a session on a plain runner is not confined though this node
// runs bwrap, one on a bwrap runner is, and one whose runner is not known
// yet gets the strictest answer (not confined unless every runner that may
// take it confines).
func TestRouterConfinesNetworkOfTheSessionsBackend(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{labels: []string{"linux"}}) // box1: plain
	stopBwrap := startRunner(t, rg.url, t.TempDir(), environmenttest.Bwrap(t), sandbox.Limits{},
		link.Hello{Name: "box2", Labels: []string{"gpu", "linux"}, Capacity: 4, Version: "test"})
	t.Cleanup(stopBwrap)
	require.Eventually(t, func() bool { _, ok := rg.hub.Get(project, "box2"); return ok }, 10*time.Second, time.Millisecond)

	spaces, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	local, err := environment.NewLocal(&environment.LocalConfig{Sandbox: environmenttest.Bwrap(t), Workspaces: spaces, Blobs: blobs, SocketDir: t.TempDir()})
	require.NoError(t, err)
	router, err := remote.NewRouter(&remote.RouterConfig{Local: local, Hub: rg.hub})
	require.NoError(t, err)
	require.True(t, local.ConfinesNetwork())

	of := func(sel *environment.RunnerSelector, pinned string) bool {
		return environment.ConfinesNetworkOf(router, &environment.OpenParams{Workspace: "ses_1", Session: "ses_1", Project: project, Runner: sel, Pinned: pinned})
	}
	require.True(t, of(nil, ""), "this node's bwrap")
	require.False(t, of(&environment.RunnerSelector{Name: "box1"}, ""), "a plain runner")
	require.True(t, of(&environment.RunnerSelector{Name: "box2"}, ""), "a bwrap runner")
	require.True(t, of(&environment.RunnerSelector{Labels: []string{"gpu"}}, ""), "only the bwrap runner matches")
	require.False(t, of(&environment.RunnerSelector{Labels: []string{"linux"}}, ""), "either may take it")
	require.False(t, of(&environment.RunnerSelector{Labels: []string{"linux"}}, "box1"), "pinned to the plain one")
	require.True(t, of(&environment.RunnerSelector{Labels: []string{"linux"}}, "box2"), "pinned to the bwrap one")
	require.False(t, of(&environment.RunnerSelector{Name: "box9"}, ""), "no such runner connected: not known")
	require.False(t, of(&environment.RunnerSelector{Name: "box2"}, "box9"), "pinned to a runner not connected")
	require.False(t, environment.ConfinesNetworkOf(router, nil))
	// Without the session: any of them may run its programs.
	require.False(t, router.ConfinesNetwork())
	stopPlain := rg.stopRunner
	stopPlain()
	require.Eventually(t, func() bool { _, ok := rg.hub.Get(project, runnerName); return !ok }, 10*time.Second, time.Millisecond)
	require.True(t, router.ConfinesNetwork(), "every runner left confines, and so does this node")
}
