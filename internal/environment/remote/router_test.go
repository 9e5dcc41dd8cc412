package remote_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/environment/remote"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
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

	spaces, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	local, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces, Blobs: blobs, SocketDir: t.TempDir()})
	require.NoError(t, err)
	router, err := remote.NewRouter(&remote.RouterConfig{Local: local, Hub: rg.hub})
	require.NoError(t, err)
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
