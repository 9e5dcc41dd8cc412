package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConditionalWriteSeesAProgramBeforeItsCommit: a program writes the
// file after it was compared and before the new content replaces it (the
// commit check runs at that moment). A file created where the basis said
// absent is kept (linked in, not renamed over); a file replaced or
// rewritten after it was hashed is seen by its description.
func TestConditionalWriteSeesAProgramBeforeItsCommit(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	program := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}

	err = d.writeFile("new.txt", []byte("person"), func(string) (bool, error) {
		program("new.txt", "program")
		return true, nil
	})
	require.ErrorIs(t, err, errAppeared)
	got, err := os.ReadFile(filepath.Join(dir, "new.txt"))
	require.NoError(t, err)
	require.Equal(t, "program", string(got), "the program's file is kept")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")

	program("a.txt", "before")
	c, fi, err := d.ResolveDirect("a.txt")
	require.NoError(t, err)
	basis, hashed, err := d.basisOf("a.txt", c, fi)
	require.NoError(t, err)
	require.Equal(t, BasisOf([]byte("before")), basis)
	require.True(t, d.unchanged(c, hashed))
	program("a.txt", "after, longer") // in place: the same inode
	require.False(t, d.unchanged(c, hashed), "rewritten in place")
	_, hashed, err = d.basisOf("a.txt", c, fi)
	require.NoError(t, err)
	require.NoError(t, os.Rename(filepath.Join(dir, "new.txt"), filepath.Join(dir, "a.txt")))
	require.False(t, d.unchanged(c, hashed), "replaced by a rename")
	require.False(t, d.unchanged(c, nil), "absent when compared, there now")

	found, err := d.WriteDirectIf("a.txt", []byte("person"), BasisOf([]byte("before")))
	require.NoError(t, err)
	require.Equal(t, BasisOf([]byte("program")), found, "nothing written: the path holds another file")
	got, err = os.ReadFile(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "program", string(got))
}

// TestRemoveIfSymlinkDeletesOnlyASymlink: the delete of a symlink (basis
// "symlink") removes the link, never a regular file a program put in its
// place, whether before the comparison or between it and the removal.
func TestRemoveIfSymlinkDeletesOnlyASymlink(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "target.txt"), []byte("target"), 0o644))

	require.NoError(t, os.Symlink("target.txt", filepath.Join(dir, "link")))
	found, err := d.RemoveIf("link", string(EntrySymlink))
	require.NoError(t, err)
	require.Equal(t, string(EntrySymlink), found)
	_, err = os.Lstat(filepath.Join(dir, "link"))
	require.ErrorIs(t, err, os.ErrNotExist)

	// A program's file where the person saw a symlink: kept.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "link"), []byte("program"), 0o644))
	found, err = d.RemoveIf("link", string(EntrySymlink))
	require.NoError(t, err)
	require.Equal(t, BasisOf([]byte("program")), found)
	got, err := os.ReadFile(filepath.Join(dir, "link"))
	require.NoError(t, err)
	require.Equal(t, "program", string(got))

	// Replaced after it was described, before the removal: kept too.
	require.NoError(t, os.Remove(filepath.Join(dir, "link")))
	require.NoError(t, os.Symlink("target.txt", filepath.Join(dir, "link")))
	fi, err := os.Lstat(filepath.Join(dir, "link"))
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, "link")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "link"), []byte("program"), 0o644))
	require.False(t, d.sameEntry("link", fi))
	got, err = os.ReadFile(filepath.Join(dir, "target.txt"))
	require.NoError(t, err)
	require.Equal(t, "target", string(got), "never the target")
}

// TestConditionalChangeThroughAPlantedSymlink: a change with a basis whose
// path now has a symlink on the way finds FoundThroughSymlink (a conflict:
// not what the person saw), writing and removing nothing through it;
// without a basis it is refused as ResolveDirect refuses it.
func TestConditionalChangeThroughAPlantedSymlink(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "scripts"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "scripts", "x.md"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink("scripts", filepath.Join(dir, "notes")))

	found, err := d.WriteDirectIf("notes/today.md", []byte("person"), BasisAbsent)
	require.NoError(t, err)
	require.Equal(t, FoundThroughSymlink, found)
	_, err = os.Lstat(filepath.Join(dir, "scripts", "today.md"))
	require.ErrorIs(t, err, os.ErrNotExist)
	found, err = d.RemoveIf("notes/x.md", BasisOf([]byte("x")))
	require.NoError(t, err)
	require.Equal(t, FoundThroughSymlink, found)
	require.FileExists(t, filepath.Join(dir, "scripts", "x.md"))
	_, err = d.WriteDirectIf("notes/today.md", []byte("person"), "")
	require.ErrorIs(t, err, ErrInvalidPath)
	require.Contains(t, err.Error(), "goes through the symlink")
	require.NotContains(t, err.Error(), "%!")
}
