package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEmptySnapshotsMakeNoList: a copy that only held the empty snapshot
// gets no file beside it (an inode fewer a session); its entries are held
// in memory, for that directory only, and written out with the first entry
// of another snapshot.
func TestEmptySnapshotsMakeNoList(t *testing.T) {
	root := t.TempDir()
	m, err := New(root)
	require.NoError(t, err)
	list := filepath.Join(root, "ses_1"+versionsSuffix)
	has := func(m *Manager, session, id string) (bool, bool) {
		t.Helper()
		known, tracked, err := m.HasSnapshot("ses_1", session, id)
		require.NoError(t, err)
		return known, tracked
	}

	_, err = m.Ensure("ses_1")
	require.NoError(t, err)
	require.NoError(t, m.RecordEmptySnapshot("ses_1", "ses_1", "empty"))
	require.NoFileExists(t, list)
	known, tracked := has(m, "ses_1", "empty")
	require.True(t, known)
	require.True(t, tracked)
	require.NoError(t, m.RecordEmptySnapshot("ses_1", "ses_child", "empty"))
	require.NoFileExists(t, list)

	// A file written since changes nothing: the copy holds the snapshot
	// and the session's changes, as a written list says.
	require.NoError(t, os.WriteFile(filepath.Join(root, "ses_1", "a"), []byte("a"), 0o600))
	known, _ = has(m, "ses_1", "empty")
	require.True(t, known)

	// Another Manager (a restart) does not know the entries: an empty
	// directory is what answers for them then (Empty).
	other, err := New(root)
	require.NoError(t, err)
	known, tracked = has(other, "ses_1", "empty")
	require.False(t, known)
	require.True(t, tracked)
	empty, err := other.Empty("ses_1")
	require.NoError(t, err)
	require.False(t, empty, "a file is in it")
	require.NoError(t, os.Remove(filepath.Join(root, "ses_1", "a")))
	empty, err = other.Empty("ses_1")
	require.NoError(t, err)
	require.True(t, empty)
	empty, err = other.Empty("ses_none")
	require.NoError(t, err)
	require.False(t, empty, "no copy is not an empty copy")

	// The first other snapshot writes the list, with the entries held so
	// far.
	require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", "full"))
	lines, tracked, err := readVersions(list)
	require.NoError(t, err)
	require.True(t, tracked)
	require.Equal(t, []string{"ses_1 empty", "ses_child empty", "ses_1 full"}, lines)
	// And an empty snapshot after it is a line like any other.
	require.NoError(t, m.RecordEmptySnapshot("ses_1", "ses_1", "empty"))
	lines, _, err = readVersions(list)
	require.NoError(t, err)
	require.Equal(t, []string{"ses_child empty", "ses_1 full", "ses_1 empty"}, lines)
	known, _ = has(other, "ses_1", "empty")
	require.True(t, known, "read from the file by another Manager")
}

// TestEmptySnapshotsHeldForTheirDirectoryOnly: the entries kept in memory
// stand for the directory they were recorded in; a copy removed, or made
// again in its place by another Manager, holds none of them.
func TestEmptySnapshotsHeldForTheirDirectoryOnly(t *testing.T) {
	root := t.TempDir()
	m, err := New(root)
	require.NoError(t, err)
	_, err = m.Ensure("ses_1")
	require.NoError(t, err)
	require.NoError(t, m.RecordEmptySnapshot("ses_1", "ses_1", "empty"))

	// Removed and made again behind this Manager's back.
	other, err := New(root)
	require.NoError(t, err)
	// Held open, the removed directory keeps its inode: the new one
	// cannot have the same identity.
	old, err := os.Open(filepath.Join(root, "ses_1"))
	require.NoError(t, err)
	defer old.Close()
	require.NoError(t, other.Remove("ses_1"))
	_, err = other.Ensure("ses_1")
	require.NoError(t, err)
	known, tracked, err := m.HasSnapshot("ses_1", "ses_1", "empty")
	require.NoError(t, err)
	require.False(t, known)
	require.True(t, tracked)

	// Removed by this Manager: forgotten with the copy.
	require.NoError(t, m.RecordEmptySnapshot("ses_1", "ses_1", "empty"))
	require.NoError(t, m.Remove("ses_1"))
	known, tracked, err = m.HasSnapshot("ses_1", "ses_1", "empty")
	require.NoError(t, err)
	require.False(t, known)
	require.False(t, tracked)

	// Recorded for a copy that does not exist: an error, nothing kept.
	require.Error(t, m.RecordEmptySnapshot("ses_1", "ses_1", "empty"))
	known, _, err = m.HasSnapshot("ses_1", "ses_1", "empty")
	require.NoError(t, err)
	require.False(t, known)

	// A restore writes the list out, with the other sessions' entries.
	_, err = m.Ensure("ses_1")
	require.NoError(t, err)
	require.NoError(t, m.RecordEmptySnapshot("ses_1", "ses_child", "empty"))
	require.NoError(t, m.RecordEmptySnapshot("ses_1", "ses_1", "empty"))
	require.NoError(t, m.RecordRestore("ses_1", "ses_1", "restored"))
	lines, _, err := readVersions(filepath.Join(root, "ses_1"+versionsSuffix))
	require.NoError(t, err)
	require.Equal(t, []string{"ses_child empty", "ses_1 restored"}, lines)
}

// TestEmptySnapshotsAreNotDroppedForRoom: past the bound on the lists kept
// in memory, those read from a file make room, never those that have no
// file (they would be lost).
func TestEmptySnapshotsAreNotDroppedForRoom(t *testing.T) {
	root := t.TempDir()
	m, err := New(root)
	require.NoError(t, err)
	m.maxLists = 2
	for _, id := range []string{"ses_a", "ses_b", "ses_c", "ses_d"} {
		_, err = m.Ensure(id)
		require.NoError(t, err)
	}
	require.NoError(t, m.RecordEmptySnapshot("ses_a", "ses_a", "empty"))
	require.NoError(t, m.RecordSnapshot("ses_b", "ses_b", "full"))
	require.NoError(t, m.RecordSnapshot("ses_c", "ses_c", "full"))
	require.NoError(t, m.RecordEmptySnapshot("ses_d", "ses_d", "empty"))
	for _, id := range []string{"ses_a", "ses_d"} {
		known, _, err := m.HasSnapshot(id, id, "empty")
		require.NoError(t, err)
		require.True(t, known, id)
	}
	known, _, err := m.HasSnapshot("ses_b", "ses_b", "full")
	require.NoError(t, err)
	require.True(t, known, "read again from its file")
}
