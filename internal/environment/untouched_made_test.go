package environment_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// TestUntouchedDirMadeByTwoCallsAtOnce: two calls of one Untouched
// Environment that need its directory at once (a read and a change): the
// empty snapshot is noted before either goes on, so a change written first
// cannot leave the copy without it (it would look lost). Found by a review.
func TestUntouchedDirMadeByTwoCallsAtOnce(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, _ := localAt(t, root, environmenttest.NewBlobs(t))
	empty, err := snapshot.EmptyID(snapshot.Options{})
	require.NoError(t, err)
	bad := 0
	const n = 400
	for i := 0; i < n; i++ {
		ws := fmt.Sprintf("ses_r%d", i)
		env, err := b.Open(ctx, &environment.OpenParams{Workspace: ws, Session: ws, Unshared: true, Untouched: true})
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; _, _ = env.ReadFile(ctx, "none.txt", 0, 10) }()
		go func() {
			defer wg.Done()
			<-start
			require.NoError(t, env.WriteFileIf(ctx, "p.txt", []byte("p"), environment.Condition{Basis: workspace.BasisAbsent, Marker: "change-1"}))
		}()
		close(start)
		wg.Wait()
		held, err := env.Holds(ctx, empty)
		require.NoError(t, err)
		if !held {
			bad++
		}
		require.NoError(t, env.Close())
	}
	t.Logf("%d of %d copies lost the empty snapshot", bad, n)
	require.Zero(t, bad)
}

// TestUntouchedCopyTheEngineMadeIsLostWhenGone: the engine may make an
// Untouched copy itself (makeUntouchedCopy, syncWorkspace for a person's
// write, readView), not through the Environment. Once the Environment has
// seen it, a copy deleted while open is a copy lost, not one never made:
// it does not hold the empty snapshot, and its snapshot fails. Found by a
// review.
func TestUntouchedCopyTheEngineMadeIsLostWhenGone(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, spaces := localAt(t, root, environmenttest.NewBlobs(t))
	empty, err := snapshot.EmptyID(snapshot.Options{})
	require.NoError(t, err)
	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_e", Session: "ses_e", Unshared: true, Untouched: true})
	require.NoError(t, err)
	defer env.Close()

	// The engine's makeUntouchedCopy and a person's change, beside the Environment.
	dir, _, err := spaces.Create("ses_e")
	require.NoError(t, err)
	require.NoError(t, spaces.RecordEmptySnapshot("ses_e", "ses_e", empty))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.txt"), []byte("person"), 0o600))
	require.NoError(t, spaces.RecordSnapshot("ses_e", "ses_e", "change-3"))

	full, _, err := env.Snapshot(ctx) // the Environment sees the directory
	require.NoError(t, err)
	require.NotEqual(t, empty, full)

	require.NoError(t, os.RemoveAll(dir)) // gone while open
	_, _, err = env.Snapshot(ctx)
	require.Error(t, err, "a snapshot of a copy gone is no snapshot of an empty one")
}

// TestUntouchedCopyGoneIsNotMadeAgainByACall: a copy deleted while open
// is not made again, empty, by the next call that needs it (whose snapshot
// would then pass for the empty one): the call fails, as in any copy.
// Found by a review.
func TestUntouchedCopyGoneIsNotMadeAgainByACall(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, _ := localAt(t, root, environmenttest.NewBlobs(t))
	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_g", Session: "ses_g", Unshared: true, Untouched: true})
	require.NoError(t, err)
	defer env.Close()
	require.NoError(t, env.WriteFile(ctx, "a.txt", []byte("a")))
	require.NoError(t, os.RemoveAll(filepath.Join(root, "ses_g"))) // gone while open
	_, _ = env.ReadFile(ctx, "a.txt", 0, 10)                       // any call
	_, _, err = env.Snapshot(ctx)
	require.Error(t, err, "a snapshot of a copy gone is no snapshot of an empty one")
}

// TestUntouchedCopyMissingSeenMadeLater: an Untouched copy found missing
// (its snapshot the empty one) is looked at again once a workspace's
// directory is made in the process, by any Manager: the engine's, or one
// of its own over the same root. Its next snapshot holds the person's
// file rather than passing for the empty one.
func TestUntouchedCopyMissingSeenMadeLater(t *testing.T) {
	ctx := context.Background()
	for _, ownManager := range []bool{false, true} {
		t.Run(fmt.Sprintf("ownManager=%v", ownManager), func(t *testing.T) {
			root := t.TempDir()
			b, spaces := localAt(t, root, environmenttest.NewBlobs(t))
			if ownManager {
				var err error
				spaces, err = workspace.New(root)
				require.NoError(t, err)
			}
			empty, err := snapshot.EmptyID(snapshot.Options{})
			require.NoError(t, err)
			env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_m", Session: "ses_m", Unshared: true, Untouched: true})
			require.NoError(t, err)
			defer env.Close()
			for range 3 { // found missing, then known missing
				id, _, err := env.Snapshot(ctx)
				require.NoError(t, err)
				require.Equal(t, empty, id)
			}

			dir, made, err := spaces.Create("ses_m")
			require.NoError(t, err)
			require.True(t, made)
			require.NoError(t, spaces.RecordEmptySnapshot("ses_m", "ses_m", empty))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "p.txt"), []byte("person"), 0o600))
			require.NoError(t, spaces.RecordSnapshot("ses_m", "ses_m", "change-1"))

			full, _, err := env.Snapshot(ctx)
			require.NoError(t, err)
			require.NotEqual(t, empty, full, "the copy made since was taken for the missing one")
		})
	}
}
