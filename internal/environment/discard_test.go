package environment_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// TestDiscardCopyLeavesAnOpenOrCurrentCopy: a copy is removed only while
// nothing has it open and the caller's check, asked under the backend's
// lock, says it is stale; a copy an Environment holds (a claim recreating
// it) is kept without asking.
func TestDiscardCopyLeavesAnOpenOrCurrentCopy(t *testing.T) {
	spaces, err := workspace.New(t.TempDir())
	require.NoError(t, err)
	b, err := environment.NewLocal(&environment.LocalConfig{Sandbox: sandbox.NewLocal(), Workspaces: spaces,
		Blobs: environmenttest.NewBlobs(t), SocketDir: t.TempDir()})
	require.NoError(t, err)
	d, ok := b.(environment.Discarder)
	require.True(t, ok, "the local backend discards its copies")
	ctx := t.Context()
	asked := 0
	stale := func(context.Context) (bool, error) { asked++; return true, nil }
	current := func(context.Context) (bool, error) { asked++; return false, nil }

	removed, err := d.DiscardCopy(ctx, "ses_none", stale)
	require.NoError(t, err)
	require.False(t, removed, "no copy: nothing to remove")
	require.Zero(t, asked, "no copy: the journal is not read")

	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_a", Session: "ses_a"})
	require.NoError(t, err)
	require.NoError(t, env.WriteFile(ctx, "kept.txt", []byte("kept\n")))
	removed, err = d.DiscardCopy(ctx, "ses_a", stale)
	require.NoError(t, err)
	require.False(t, removed, "an open copy is kept")
	require.Zero(t, asked, "an open copy: the journal is not read")
	require.NoError(t, env.Close())

	removed, err = d.DiscardCopy(ctx, "ses_a", current)
	require.NoError(t, err)
	require.False(t, removed, "a copy the journal still counts on is kept")
	require.Equal(t, 1, asked)
	_, err = os.Stat(filepath.Join(spaces.Path("ses_a"), "kept.txt"))
	require.NoError(t, err)

	removed, err = d.DiscardCopy(ctx, "ses_a", stale)
	require.NoError(t, err)
	require.True(t, removed)
	_, err = os.Stat(spaces.Path("ses_a"))
	require.ErrorIs(t, err, os.ErrNotExist)

	_, err = d.DiscardCopy(ctx, "../x", stale)
	require.ErrorContains(t, err, "discard the copy of workspace")
}
