package workspace

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSnapshotVersions(t *testing.T) {
	m, err := New(t.TempDir())
	require.NoError(t, err)

	// A workspace made before versions were kept is trusted as it is.
	known, tracked, err := m.HasSnapshot("ses_legacy", "ses_legacy", "snap1")
	require.NoError(t, err)
	require.False(t, known)
	require.False(t, tracked)

	// A new one contains no snapshot until one is recorded.
	_, err = m.Ensure("ses_1")
	require.NoError(t, err)
	known, tracked, err = m.HasSnapshot("ses_1", "ses_1", "snap1")
	require.NoError(t, err)
	require.False(t, known)
	require.True(t, tracked)
	require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", "snap1"))
	known, _, err = m.HasSnapshot("ses_1", "ses_1", "snap1")
	require.NoError(t, err)
	require.True(t, known)

	// Sub-agents sharing the workspace record at the same time: none is
	// lost, and the list keeps only the latest.
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() { require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", fmt.Sprintf("c%d", i))) })
	}
	wg.Wait()
	lines, _, err := readVersions(m.root + "/ses_1" + versionsSuffix)
	require.NoError(t, err)
	require.Len(t, lines, maxVersions, "every concurrent record landed; the latest %d are kept", maxVersions)
	for i := range 100 {
		require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", fmt.Sprintf("n%d", i)))
	}
	// A sub-agent's many snapshots of the shared workspace do not push the
	// root's out.
	require.NoError(t, m.RecordSnapshot("ses_1", "ses_child", "mine"))
	for i := range 100 {
		require.NoError(t, m.RecordSnapshot("ses_1", "ses_child", fmt.Sprintf("k%d", i)))
	}
	known, _, err = m.HasSnapshot("ses_1", "ses_1", "n99")
	require.NoError(t, err)
	require.True(t, known)
	known, _, err = m.HasSnapshot("ses_1", "ses_1", "snap1")
	require.NoError(t, err)
	require.False(t, known, "only the latest snapshots are kept")

	// Removing the workspace removes its list.
	require.NoError(t, m.Remove("ses_1"))
	_, tracked, err = m.HasSnapshot("ses_1", "ses_1", "n99")
	require.NoError(t, err)
	require.False(t, tracked)
}
