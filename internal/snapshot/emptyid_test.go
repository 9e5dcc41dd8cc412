package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEmptyIDIsTakesOfAnEmptyWorkspace: EmptyID is the id Take gives an
// empty directory under the same options, excludes (in any order) included,
// and no other directory's.
func TestEmptyIDIsTakesOfAnEmptyWorkspace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	for _, opts := range []Options{{}, {Exclude: []string{"tmp", "node_modules"}}, {Exclude: []string{"node_modules", "tmp"}, MaxFileBytes: 10}} {
		ws := t.TempDir()
		want, _, err := Take(ctx, b, ws, opts)
		require.NoError(t, err)
		got, err := EmptyID(opts)
		require.NoError(t, err)
		require.Equal(t, want, got, "options %+v", opts)

		// Only excluded paths in it: still the empty snapshot.
		if len(opts.Exclude) > 0 {
			writeFile(t, ws, "tmp/x", []byte("x"), 0o600)
			id, _, err := Take(ctx, b, ws, opts)
			require.NoError(t, err)
			require.Equal(t, got, id)
		}
		require.NoError(t, os.WriteFile(filepath.Join(ws, "a"), nil, 0o600))
		id, _, err := Take(ctx, b, ws, opts)
		require.NoError(t, err)
		require.NotEqual(t, got, id, "an empty file is not an empty workspace")
	}
	plain, _ := EmptyID(Options{})
	excl, _ := EmptyID(Options{Exclude: []string{"tmp"}})
	require.NotEqual(t, plain, excl, "the excludes are part of the root tree")

	_, err := EmptyID(Options{Exclude: []string{"../up"}})
	require.ErrorContains(t, err, `exclude[0] "../up"`)
}
