package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSnapshotVersions(t *testing.T) {
	m, err := New(t.TempDir())
	require.NoError(t, err)

	// A workspace this node has no copy of (neither its directory nor its
	// list) is not tracked here.
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

// A crash may cut the list's last line short: that line is never read as
// an entry (a shorter id could name another snapshot), and the next
// record starts a line of its own.
func TestSnapshotVersionsCutLineIsNoEntry(t *testing.T) {
	m, p := newListedWorkspace(t, "change-1")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("ses_1 change-12") // "change-123\n" cut short
	require.NoError(t, err)
	require.NoError(t, f.Close())

	fresh, err := New(m.Root()) // another process, or this one after a restart
	require.NoError(t, err)
	known, tracked, err := fresh.HasSnapshot("ses_1", "ses_1", "change-12")
	require.NoError(t, err)
	require.True(t, tracked)
	require.False(t, known, "a cut line is no entry")
	require.NoError(t, fresh.RecordSnapshot("ses_1", "ses_1", "change-124"))
	for _, m := range []*Manager{fresh, m} {
		known, _, err = m.HasSnapshot("ses_1", "ses_1", "change-124")
		require.NoError(t, err)
		require.True(t, known, "a record after a cut line stands on its own line")
		known, _, err = m.HasSnapshot("ses_1", "ses_1", "change-1")
		require.NoError(t, err)
		require.True(t, known)
	}
}

// A record that changes nothing writes nothing, and the file grows by a
// line per record until it is rewritten to the list it stands for.
func TestSnapshotVersionsAppendAndRewrite(t *testing.T) {
	m, p := newListedWorkspace(t, "a")
	before, err := os.Stat(p)
	require.NoError(t, err)
	require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", "a"))
	after, err := os.Stat(p)
	require.NoError(t, err)
	require.True(t, os.SameFile(before, after))
	require.Equal(t, before.Size(), after.Size(), "the latest entry again: nothing written")

	for i := range 500 {
		require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", fmt.Sprintf("s%d", i%20)))
	}
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	require.LessOrEqual(t, strings.Count(string(data), "\n"), 2*maxVersions+4*maxVersions+1, "rewritten as it grows")
	lines, _, err := readVersions(p)
	require.NoError(t, err)
	require.Len(t, lines, maxVersions)
	require.Equal(t, "ses_1 s19", lines[len(lines)-1])

	// Another Manager's record is seen here (the file changed).
	other, err := New(m.Root())
	require.NoError(t, err)
	require.NoError(t, other.RecordSnapshot("ses_1", "ses_1", "theirs"))
	known, _, err := m.HasSnapshot("ses_1", "ses_1", "theirs")
	require.NoError(t, err)
	require.True(t, known)
}

// newListedWorkspace makes workspace ses_1 in a new root, records snapshot
// id of session ses_1 in it, and returns the Manager and the list's path.
func newListedWorkspace(t *testing.T, id string) (*Manager, string) {
	t.Helper()
	m, err := New(t.TempDir())
	require.NoError(t, err)
	_, err = m.Ensure("ses_1")
	require.NoError(t, err)
	require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", id))
	return m, filepath.Join(m.Root(), "ses_1"+versionsSuffix)
}

// A new copy has no list until its first snapshot is recorded, and a copy
// without a list contains no snapshot: it is tracked, never trusted as it
// is (a copy made by hand, or before the lists were kept, included).
func TestSnapshotVersionsNoListMeansNoSnapshot(t *testing.T) {
	m, err := New(t.TempDir())
	require.NoError(t, err)
	_, err = m.Ensure("ses_1")
	require.NoError(t, err)
	p := filepath.Join(m.Root(), "ses_1"+versionsSuffix)
	require.NoFileExists(t, p, "a new copy makes no list")
	known, tracked, err := m.HasSnapshot("ses_1", "ses_1", "snap1")
	require.NoError(t, err)
	require.True(t, tracked)
	require.False(t, known)

	require.NoError(t, os.Mkdir(filepath.Join(m.Root(), "ses_2"), 0o700))
	fresh, err := New(m.Root()) // another process, or this one after a restart
	require.NoError(t, err)
	for _, m := range []*Manager{m, fresh} {
		known, tracked, err = m.HasSnapshot("ses_2", "ses_2", "snap1")
		require.NoError(t, err)
		require.True(t, tracked, "a copy without a list is tracked")
		require.False(t, known)
	}

	// The first record makes the list; every Manager on the root sees it.
	require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", "snap1"))
	lines, tracked, err := readVersions(p)
	require.NoError(t, err)
	require.True(t, tracked)
	require.Equal(t, []string{"ses_1 snap1"}, lines)
	known, _, err = fresh.HasSnapshot("ses_1", "ses_1", "snap1")
	require.NoError(t, err)
	require.True(t, known)
	// Two Managers making the list of a copy at once: neither entry is lost.
	require.NoError(t, fresh.RecordSnapshot("ses_2", "ses_2", "a"))
	require.NoError(t, m.RecordSnapshot("ses_2", "ses_child", "b"))
	lines, _, err = readVersions(filepath.Join(m.Root(), "ses_2"+versionsSuffix))
	require.NoError(t, err)
	require.Equal(t, []string{"ses_2 a", "ses_child b"}, lines)
}

// A list left beside a copy that is gone (a removal cut short) never
// speaks for the copy made next in its place.
func TestSnapshotVersionsLeftoverListIsNotANewCopys(t *testing.T) {
	m, err := New(t.TempDir())
	require.NoError(t, err)
	p := filepath.Join(m.Root(), "ses_1"+versionsSuffix)
	require.NoError(t, os.WriteFile(p, []byte("ses_1 snap1\n"), 0o600))
	known, _, err := m.HasSnapshot("ses_1", "ses_1", "snap1")
	require.NoError(t, err)
	require.True(t, known, "read (and kept in memory) before the copy is made")
	_, err = m.Ensure("ses_1")
	require.NoError(t, err)
	known, tracked, err := m.HasSnapshot("ses_1", "ses_1", "snap1")
	require.NoError(t, err)
	require.True(t, tracked)
	require.False(t, known, "a new copy holds nothing")
	require.NoFileExists(t, p)

	// Removal takes the list with the copy.
	require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", "snap2"))
	require.NoError(t, m.Remove("ses_1"))
	require.NoFileExists(t, p)
	require.NoDirExists(t, m.Path("ses_1"))
}

// A record this Manager knows to be the session's latest already writes
// nothing and reads nothing. Had another Manager replaced the list since
// (a restore), the entry it leaves out makes the copy look stale: the list
// never claims a snapshot the copy may lack.
func TestSnapshotVersionsRecordFromMemoryNeverClaims(t *testing.T) {
	m, p := newListedWorkspace(t, "a")
	other, err := New(m.Root())
	require.NoError(t, err)
	require.NoError(t, other.RecordRestore("ses_1", "ses_1", "b"))
	require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", "a"))
	known, _, err := m.HasSnapshot("ses_1", "ses_1", "a")
	require.NoError(t, err)
	require.False(t, known, "the file is what counts")
	known, _, err = m.HasSnapshot("ses_1", "ses_1", "b")
	require.NoError(t, err)
	require.True(t, known)
	// Read again now, the record is made.
	require.NoError(t, m.RecordSnapshot("ses_1", "ses_1", "a"))
	lines, _, err := readVersions(p)
	require.NoError(t, err)
	require.Equal(t, []string{"ses_1 b", "ses_1 a"}, lines)
}
