package engine

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
)

// TestSnapshotCacheKeepsARecordPerRunningSession: the snapshot Cache an
// engine makes itself keeps the records of twice the sessions it runs at
// once, so that each running session's checkpoint starts from its last
// (the Cache's default of 64 made every step of a node running 1,000 at
// once walk its workspace: records dropped least recently used first).
func TestSnapshotCacheKeepsARecordPerRunningSession(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(t, err)
	require.NoError(t, st.Migrate(t.Context()))
	t.Cleanup(func() { st.Close() })
	for workers, records := range map[int]int{0: snapshot.DefaultCacheMaxRecords, 10: snapshot.DefaultCacheMaxRecords, 1000: 2000} {
		e, err := New(st, &Config{WorkspaceRoot: filepath.Join(dir, "workspaces"), NodeID: "node-a", MaxWorkers: workers})
		require.NoError(t, err)
		require.Equal(t, records, e.snapshots.MaxRecords(), "MaxWorkers %d", workers)
		require.NoError(t, e.snapshots.Close())
	}
}
