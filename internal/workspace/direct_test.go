package workspace_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// TestResolveDirect: a person's path is reached through no symlink: one
// that leads out is an escape, one that stays inside is refused too, a
// file where a directory must be is refused, and a missing path is fine
// (it is created).
func TestResolveDirect(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		path string
		want error
	}{
		{"sub/inner.txt", nil},
		{"sub/new/deeper.txt", nil},
		{"secret-link", nil}, // the link itself: a delete removes it
		{"outdir/x.txt", workspace.ErrEscapes},
		{"outdir-rel/x.txt", workspace.ErrEscapes},
		{"subdir-link/inner.txt", workspace.ErrInvalidPath},
		{"sub/inner.txt/x", workspace.ErrInvalidPath},
		{"../x", workspace.ErrEscapes},
		{"/etc/passwd", workspace.ErrEscapes},
		{".", workspace.ErrInvalidPath},
	} {
		_, _, err := f.dir.ResolveDirect(tc.path)
		if tc.want == nil {
			require.NoError(t, err, tc.path)
			continue
		}
		require.ErrorIs(t, err, tc.want, tc.path)
		require.NotContains(t, err.Error(), f.ws, "errors name workspace paths only")
	}
	c, fi, err := f.dir.ResolveDirect("sub/./inner.txt")
	require.NoError(t, err)
	require.Equal(t, filepath.Join("sub", "inner.txt"), c)
	require.True(t, fi.Mode().IsRegular())
	_, fi, err = f.dir.ResolveDirect("sub/none.txt")
	require.NoError(t, err)
	require.Nil(t, fi)
}

// TestRemoveAndOpenFile: Remove deletes a file or a symlink itself (never
// its target) and refuses directories and escapes; OpenFile reads regular
// files only, following symlinks that stay inside.
func TestRemoveAndOpenFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, f.dir.Remove("secret-link"))
	_, err := os.Lstat(filepath.Join(f.ws, "secret-link"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	secret, err := os.ReadFile(filepath.Join(f.outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, "secret", string(secret), "the target is untouched")
	require.ErrorIs(t, f.dir.Remove("sub"), workspace.ErrInvalidPath)
	require.ErrorIs(t, f.dir.Remove("outdir/secret.txt"), workspace.ErrEscapes)
	require.ErrorIs(t, f.dir.Remove("missing"), fs.ErrNotExist)
	require.Equal(t, []string{"secret.txt"}, f.outsideNames(t))

	rc, fi, err := f.dir.OpenFile("inner-link")
	require.NoError(t, err)
	data, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, "inner", string(data))
	require.EqualValues(t, 5, fi.Size())
	_, _, err = f.dir.OpenFile("sub")
	require.ErrorIs(t, err, workspace.ErrInvalidPath)
	_, _, err = f.dir.OpenFile("secret-link-rel")
	require.True(t, errors.Is(err, workspace.ErrEscapes), "%v", err)
	require.NoError(t, f.dir.Remove("sub/inner.txt"))
	_, _, err = f.dir.OpenFile("sub/inner.txt")
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestWriteDirectAndStatDirect: a person's write lands at the path it
// names or nowhere: a symlink at the path or on the way is refused (never
// written through), and StatDirect describes the path's own entry.
func TestWriteDirectAndStatDirect(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.ErrorIs(t, f.dir.WriteDirect("inner-link", []byte("planted")), workspace.ErrInvalidPath)
	require.ErrorIs(t, f.dir.WriteDirect("subdir-link/inner.txt", []byte("planted")), workspace.ErrInvalidPath)
	require.ErrorIs(t, f.dir.WriteDirect("outdir/x.txt", []byte("planted")), workspace.ErrEscapes)
	inner, err := os.ReadFile(filepath.Join(f.ws, "sub", "inner.txt"))
	require.NoError(t, err)
	require.Equal(t, "inner", string(inner), "the link's target is untouched")
	require.NoError(t, f.dir.WriteDirect("sub/new/direct.txt", []byte("direct")))
	got, err := os.ReadFile(filepath.Join(f.ws, "sub", "new", "direct.txt"))
	require.NoError(t, err)
	require.Equal(t, "direct", string(got))

	en, err := f.dir.StatDirect("inner-link")
	require.NoError(t, err)
	require.Equal(t, workspace.EntrySymlink, en.Type)
	en, err = f.dir.StatDirect("sub/./inner.txt")
	require.NoError(t, err)
	require.Equal(t, workspace.Entry{Name: "sub/inner.txt", Type: workspace.EntryFile, Size: 5}, *en)
	en, err = f.dir.StatDirect("sub/none.txt")
	require.NoError(t, err)
	require.Nil(t, en)
	_, err = f.dir.StatDirect("subdir-link/inner.txt")
	require.ErrorIs(t, err, workspace.ErrInvalidPath)
}
