package remote_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/environment/remote"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// TestNoRunnerIsUnavailable: without a connected runner of that name,
// Open fails with ErrUnavailable (nothing ran: the engine parks the
// session).
func TestNoRunnerIsUnavailable(t *testing.T) {
	rg := newRig(t, environmenttest.NewBlobs(t), rigOptions{})
	b, err := remote.New(&remote.Config{Hub: rg.hub, Project: project, Runner: "nobody"})
	require.NoError(t, err)
	require.False(t, b.ConfinesNetwork())
	_, err = b.Open(t.Context(), &environment.OpenParams{Workspace: "ses_a", Session: "ses_a"})
	require.ErrorIs(t, err, environment.ErrUnavailable)

	for want, cfg := range map[string]*remote.Config{
		"config is nil":  nil,
		"config.hub":     {Project: project, Runner: runnerName},
		"config.project": {Hub: rg.hub, Runner: runnerName},
		"config.runner":  {Hub: rg.hub, Project: project, Runner: "Not A Name"},
	} {
		_, err := remote.New(cfg)
		require.ErrorContains(t, err, want)
	}
}

// pidAlive says whether process pid runs (this test's runner runs on this
// machine, in this process's sandbox, which reaps its programs).
func pidAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// readPID waits for the pid a command wrote into the runner's copy of a
// workspace.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, 30*time.Second, 5*time.Millisecond)
	return pid
}

// TestConnectionEndEndsItsPrograms: a connection that ends mid-call fails
// the call with ErrLost, and the runner ends every program of that
// connection (a command and a long-lived program) before it connects
// again, so that a call run again after ErrLost never overlaps the lost
// one. The environment is then unavailable; opening it again attaches the
// workspace the runner kept.
func TestConnectionEndEndsItsPrograms(t *testing.T) {
	rg := newRig(t, environmenttest.NewBlobs(t), rigOptions{})
	b := rg.backend(t)
	ctx := t.Context()
	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_lost", Session: "ses_lost"})
	require.NoError(t, err)
	defer env.Close()
	proc, err := env.Start(ctx, &sandbox.StartRequest{Command: "echo $$ > server.pid; exec sleep 600"})
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() {
		_, err := env.Run(ctx, &tool.ExecRequest{Command: "echo $$ > run.pid; exec sleep 600", Timeout: time.Hour})
		ran <- err
	}()
	ws := filepath.Join(rg.data, "workspaces", "ses_lost")
	serverPID, runPID := readPID(t, filepath.Join(ws, "server.pid")), readPID(t, filepath.Join(ws, "run.pid"))
	require.True(t, pidAlive(serverPID) && pidAlive(runPID))

	first := rg.connected(t)
	first.Conn.CloseWith(websocket.StatusGoingAway, "node restarting")
	select {
	case err := <-ran:
		require.ErrorIs(t, err, environment.ErrLost, "a call in flight when the connection ended")
	case <-time.After(30 * time.Second):
		t.Fatal("the call outlived its connection")
	}
	select {
	case <-proc.Done():
		require.Contains(t, proc.Exit(), "lost")
	case <-time.After(30 * time.Second):
		t.Fatal("the program's relay outlived its connection")
	}
	var again bool
	require.Eventually(t, func() bool {
		r, ok := rg.hub.Get(project, runnerName)
		again = ok && r.Row.ConnID != first.Row.ConnID
		return again
	}, 30*time.Second, time.Millisecond)
	// Connected again: the programs of the old connection ended before.
	require.False(t, pidAlive(serverPID), "the long-lived program ended with its connection")
	require.False(t, pidAlive(runPID), "the command ended with its connection")

	_, err = env.Run(ctx, &tool.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, environment.ErrUnavailable, "the environment went with its connection: open it again")
	reopened, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_lost", Session: "ses_lost"})
	require.NoError(t, err)
	defer reopened.Close()
	require.False(t, reopened.Info().Provisioned, "the runner kept the workspace")
	r, err := reopened.ReadFile(ctx, "run.pid", 0, 100)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(runPID), strings.TrimSpace(string(r.Data)))
}

// TestRestoreAfterStopUsesTheRunnersCache: a workspace stopped and
// recreated on the same runner is restored from the runner's blob cache
// (under its data directory): the server is asked for no blob.
func TestRestoreAfterStopUsesTheRunnersCache(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{})
	b := rg.backend(t)
	ctx := t.Context()
	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_idle", Session: "ses_idle"})
	require.NoError(t, err)
	big := strings.Repeat("a large file's content ", 100_000) // over a frame: put in parts
	require.NoError(t, env.WriteFile(ctx, "big.txt", []byte(big)))
	id, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, env.Stop(ctx, id))

	again, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_idle", Session: "ses_idle"})
	require.NoError(t, err)
	defer again.Close()
	require.True(t, again.Info().Provisioned)
	_, err = again.Restore(ctx, id)
	require.NoError(t, err)
	r, err := again.ReadFile(ctx, "big.txt", 0, int64(len(big)))
	require.NoError(t, err, "a read larger than a frame")
	require.Equal(t, big, string(r.Data))
	require.Zero(t, blobs.Gets(environmenttest.Digest([]byte(big))), "restored from the runner's cache")
	require.Zero(t, blobs.Gets(id), "the root tree too")

	// A wiped cache: the runner fetches what it lacks from the server.
	require.NoError(t, os.RemoveAll(filepath.Join(rg.data, "blobs")))
	require.NoError(t, again.Stop(ctx, id))
	third, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_idle", Session: "ses_idle"})
	require.NoError(t, err)
	defer third.Close()
	_, err = third.Restore(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, blobs.Gets(id))
	require.Equal(t, 1, blobs.Gets(environmenttest.Digest([]byte(big))))
}

// TestRunnerCapsTheLimits: the runner's operator's maxima are what a
// session gets when it asks for nothing, and a session that asks for more
// disk than the runner grants is refused, saying so.
func TestRunnerCapsTheLimits(t *testing.T) {
	rg := newRig(t, environmenttest.NewBlobs(t), rigOptions{limits: sandbox.Limits{DiskBytes: 1 << 20}})
	b := rg.backend(t)
	env, err := b.Open(t.Context(), &environment.OpenParams{Workspace: "ses_cap", Session: "ses_cap"})
	require.NoError(t, err)
	err = env.WriteFile(t.Context(), "big.bin", make([]byte, 2<<20))
	require.ErrorIs(t, err, environment.ErrDiskQuota)
	require.NoError(t, env.Close())

	_, err = b.Open(t.Context(), &environment.OpenParams{Workspace: "ses_cap", Session: "ses_cap", Limits: sandbox.Limits{DiskBytes: 64 << 20}})
	require.ErrorContains(t, err, "grants at most 1048576 bytes of disk")
	require.ErrorContains(t, err, "environment.disk_mb")
	env, err = b.Open(t.Context(), &environment.OpenParams{Workspace: "ses_cap", Session: "ses_cap", Limits: sandbox.Limits{DiskBytes: 1 << 20}})
	require.NoError(t, err, "what the runner grants")
	require.NoError(t, env.Close())
}

// TestRunnerErrorsNameNoHostPath: what the runner answers names
// workspace-relative paths only, never a directory of its machine.
func TestRunnerErrorsNameNoHostPath(t *testing.T) {
	rg := newRig(t, environmenttest.NewBlobs(t), rigOptions{})
	ctx := t.Context()
	env, err := rg.backend(t).Open(ctx, &environment.OpenParams{Workspace: "ses_paths", Session: "ses_paths"})
	require.NoError(t, err)
	defer env.Close()
	require.NoError(t, env.WriteFile(ctx, "dir/file.txt", []byte("x")))
	var errs []error
	_, err = env.ReadFile(ctx, "missing.txt", 0, 10)
	errs = append(errs, err)
	_, err = env.List(ctx, "dir/file.txt/below", 0)
	errs = append(errs, err)
	errs = append(errs, env.WriteFile(ctx, "dir", []byte("x")))
	errs = append(errs, env.Remove(ctx, "dir"))
	_, err = env.Restore(ctx, strings.Repeat("0", 64))
	errs = append(errs, err)
	_, err = env.ReadFile(ctx, "../../../etc/passwd", 0, 10)
	errs = append(errs, err)
	for i, err := range errs {
		require.Error(t, err, i)
		require.NotContains(t, err.Error(), rg.data, "%d: %v", i, err)
		require.NotContains(t, err.Error(), os.TempDir()+string(filepath.Separator), "%d: %v", i, err)
	}
}
