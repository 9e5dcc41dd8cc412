//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnmeasurableWorkspaceBeforeACommand: a workspace nested past the
// walk's depth cannot be measured, but what the walk counted is a lower
// bound, so a command that removes the nesting and then the files it
// found is not stopped halfway; writing more, or leaving the workspace
// unmeasurable, still is.
func TestUnmeasurableWorkspaceBeforeACommand(t *testing.T) {
	ws := t.TempDir()
	mb := make([]byte, 1<<20)
	for _, name := range []string{"g1", "g2", "g3"} {
		require.NoError(t, os.WriteFile(filepath.Join(ws, name), mb, 0o600))
	}
	deep := filepath.Join(ws, strings.Repeat("a/", maxDepth+5))
	require.NoError(t, os.MkdirAll(deep, 0o700))

	used, err := scanWorkspace(ws, nil)
	require.Error(t, err, "nested past the walk's depth")
	require.GreaterOrEqual(t, used, int64(3<<20), "the files beside the nesting are counted")
	before := usageBefore(ws, nil)
	require.Equal(t, used, before)

	var de *diskError
	limit := int64(1 << 20)
	require.True(t, errors.As(overQuota(ws, limit*100, before), &de), "unmeasurable: stopped whatever the limit")
	require.Error(t, de.cause)

	require.NoError(t, os.RemoveAll(filepath.Join(ws, "a")))
	require.NoError(t, overQuota(ws, limit, before), "over the quota, but no larger than before the command")
	require.NoError(t, os.Remove(filepath.Join(ws, "g1")))
	require.NoError(t, overQuota(ws, limit, before))

	// More than the nesting and the files it found (the walk counted a
	// directory a level, up to maxDepth).
	require.NoError(t, os.WriteFile(filepath.Join(ws, "g4"), make([]byte, 4<<20+maxDepth*minEntryBytes), 0o600))
	require.True(t, errors.As(overQuota(ws, limit, before), &de), "grown past what it found: stopped")
	require.NoError(t, de.cause)
}
