package workspace_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// fixture is a workspace next to an "outside" directory holding a secret,
// with symlinks from the workspace to the outside and to inside targets.
type fixture struct {
	ws      string
	outside string
	dir     *workspace.Dir
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	require.NoError(t, os.Mkdir(ws, 0o700))
	require.NoError(t, os.Mkdir(outside, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(ws, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "sub", "inner.txt"), []byte("inner"), 0o644))
	// Escaping links: a file, a directory (absolute) and a directory
	// (relative with ..).
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "secret-link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "outdir")))
	require.NoError(t, os.Symlink("../outside", filepath.Join(ws, "outdir-rel")))
	require.NoError(t, os.Symlink("../outside/secret.txt", filepath.Join(ws, "secret-link-rel")))
	// Links that stay inside.
	require.NoError(t, os.Symlink("sub/inner.txt", filepath.Join(ws, "inner-link")))
	require.NoError(t, os.Symlink("sub", filepath.Join(ws, "subdir-link")))
	d, err := workspace.Open(ws)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return &fixture{ws: ws, outside: outside, dir: d}
}

func (f *fixture) outsideNames(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(f.outside)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestConfinement(t *testing.T) {
	t.Parallel()
	escaping := []struct {
		name string
		path string
	}{
		{"dotdot", "../x"},
		{"dotdot after a name", "sub/../../x"},
		{"dotdot to outside file", "../outside/secret.txt"},
		{"absolute", "/etc/passwd"},
		{"symlinked file to outside", "secret-link"},
		{"file under symlinked dir (absolute target)", "outdir/secret.txt"},
		{"file under symlinked dir (relative target)", "outdir-rel/secret.txt"},
		{"new file under symlinked parent dir", "outdir/new.txt"},
		{"new nested dir under symlinked parent dir", "outdir/deep/new.txt"},
		{"symlinked file to outside, relative target", "sub/../secret-link-rel"},
	}
	for _, tc := range escaping {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)

			_, err := f.dir.ReadFile(tc.path, 0, 1024)
			require.ErrorIs(t, err, workspace.ErrEscapes, "read")
			require.ErrorContains(t, err, `path "`+tc.path+`" leaves the workspace`)

			werr := f.dir.WriteFile(tc.path, []byte("pwned"))
			require.ErrorIs(t, werr, workspace.ErrEscapes, "write")

			// Nothing was created or changed outside.
			require.Equal(t, []string{"secret.txt"}, f.outsideNames(t))
			b, err := os.ReadFile(filepath.Join(f.outside, "secret.txt"))
			require.NoError(t, err)
			require.Equal(t, "secret", string(b))
			// The error message never shows a host path.
			require.NotContains(t, werr.Error(), f.ws)
		})
	}

	listEscaping := []string{"..", "/", "outdir", "outdir-rel", "sub/../.."}
	for _, p := range listEscaping {
		t.Run("list "+p, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			_, err := f.dir.List(p, 0)
			require.ErrorIs(t, err, workspace.ErrEscapes)
		})
	}
}

func TestSymlinksInsideAreFollowed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	r, err := f.dir.ReadFile("inner-link", 0, 1024)
	require.NoError(t, err)
	require.Equal(t, "inner", string(r.Data))

	r, err = f.dir.ReadFile("subdir-link/inner.txt", 0, 1024)
	require.NoError(t, err)
	require.Equal(t, "inner", string(r.Data))

	require.NoError(t, f.dir.WriteFile("subdir-link/new.txt", []byte("via link")))
	b, err := os.ReadFile(filepath.Join(f.ws, "sub", "new.txt"))
	require.NoError(t, err)
	require.Equal(t, "via link", string(b))

	l, err := f.dir.List("subdir-link", 0)
	require.NoError(t, err)
	require.Equal(t, []string{"inner.txt", "new.txt"}, entryNames(l.Entries))

	// A dotdot that stays inside is fine.
	r, err = f.dir.ReadFile("sub/../sub/inner.txt", 0, 1024)
	require.NoError(t, err)
	require.Equal(t, "inner", string(r.Data))
	require.Equal(t, "sub/inner.txt", r.Path)
}

func TestWriteReadRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	content := []byte("hello, workspace\nline two\n")

	require.NoError(t, f.dir.WriteFile("a/b/c.txt", content))
	fi, err := os.Stat(filepath.Join(f.ws, "a", "b"))
	require.NoError(t, err)
	require.True(t, fi.IsDir())

	tests := []struct {
		name          string
		offset, limit int64
		want          string
		truncated     bool
	}{
		{"whole", 0, 1024, string(content), false},
		{"exact size", 0, int64(len(content)), string(content), false},
		{"head", 0, 5, "hello", true},
		{"middle", 7, 9, "workspace", true},
		{"tail", 17, 1024, "line two\n", false},
		{"at end", int64(len(content)), 10, "", false},
		{"past end", 1000, 10, "", false},
	}
	for _, tc := range tests {
		r, err := f.dir.ReadFile("a/b/c.txt", tc.offset, tc.limit)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, string(r.Data), tc.name)
		require.Equal(t, tc.truncated, r.Truncated, tc.name)
		require.Equal(t, int64(len(content)), r.Size, tc.name)
		require.Equal(t, "a/b/c.txt", r.Path, tc.name)
	}

	// Overwrite keeps the mode of an existing file and leaves no temp file.
	require.NoError(t, os.Chmod(filepath.Join(f.ws, "a/b/c.txt"), 0o750))
	require.NoError(t, f.dir.WriteFile("a/b/c.txt", []byte("new")))
	fi, err = os.Stat(filepath.Join(f.ws, "a/b/c.txt"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
	entries, err := os.ReadDir(filepath.Join(f.ws, "a/b"))
	require.NoError(t, err)
	require.Len(t, entries, 1)

	// Empty content is a valid write.
	require.NoError(t, f.dir.WriteFile("empty", nil))
	r, err := f.dir.ReadFile("empty", 0, 10)
	require.NoError(t, err)
	require.Empty(t, r.Data)
	require.Zero(t, r.Size)
}

func TestWriteThroughSymlinkInside(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, f.dir.WriteFile("inner-link", []byte("through")))
	fi, err := os.Lstat(filepath.Join(f.ws, "inner-link"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeSymlink, "the link stays a link")
	b, err := os.ReadFile(filepath.Join(f.ws, "sub", "inner.txt"))
	require.NoError(t, err)
	require.Equal(t, "through", string(b))

	// A chain of links, and a dangling link whose target gets created.
	require.NoError(t, os.Symlink("inner-link", filepath.Join(f.ws, "link2")))
	require.NoError(t, f.dir.WriteFile("link2", []byte("chain")))
	b, err = os.ReadFile(filepath.Join(f.ws, "sub", "inner.txt"))
	require.NoError(t, err)
	require.Equal(t, "chain", string(b))

	require.NoError(t, os.Symlink("sub/created.txt", filepath.Join(f.ws, "dangling")))
	require.NoError(t, f.dir.WriteFile("dangling", []byte("new")))
	b, err = os.ReadFile(filepath.Join(f.ws, "sub", "created.txt"))
	require.NoError(t, err)
	require.Equal(t, "new", string(b))

	// A dangling link pointing outside is refused, and nothing is created.
	require.NoError(t, os.Symlink("../outside/planted.txt", filepath.Join(f.ws, "dangling-out")))
	require.ErrorIs(t, f.dir.WriteFile("dangling-out", []byte("x")), workspace.ErrEscapes)
	require.Equal(t, []string{"secret.txt"}, f.outsideNames(t))

	// A loop is an error, not a hang.
	require.NoError(t, os.Symlink("loop-b", filepath.Join(f.ws, "loop-a")))
	require.NoError(t, os.Symlink("loop-a", filepath.Join(f.ws, "loop-b")))
	require.ErrorContains(t, f.dir.WriteFile("loop-a", []byte("x")), "too many levels")
}

func TestFileErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, syscall.Mkfifo(filepath.Join(f.ws, "fifo"), 0o600))

	_, err := f.dir.ReadFile("missing.txt", 0, 10)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Equal(t, `read "missing.txt": no such file or directory`, err.Error())

	_, err = f.dir.ReadFile("sub", 0, 10)
	require.ErrorContains(t, err, "is a directory")

	_, err = f.dir.ReadFile("fifo", 0, 10)
	require.ErrorContains(t, err, "not a regular file")

	_, err = f.dir.ReadFile("sub/inner.txt", -1, 10)
	require.ErrorContains(t, err, "negative")
	_, err = f.dir.ReadFile("sub/inner.txt", 0, 0)
	require.ErrorContains(t, err, "not positive")

	for _, p := range []string{"", ".", "sub/..", "a\x00b"} {
		_, err = f.dir.ReadFile(p, 0, 10)
		require.ErrorIs(t, err, workspace.ErrInvalidPath, "read %q", p)
		require.ErrorIs(t, f.dir.WriteFile(p, nil), workspace.ErrInvalidPath, "write %q", p)
	}

	require.ErrorContains(t, f.dir.WriteFile("sub", []byte("x")), "is a directory")
	// A regular file in the way of a parent directory.
	err = f.dir.WriteFile("sub/inner.txt/x", []byte("x"))
	require.Error(t, err)
	require.ErrorContains(t, err, `write "sub/inner.txt/x": a parent of it is not a directory`)

	_, err = f.dir.List("sub/inner.txt", 0)
	require.ErrorContains(t, err, "not a directory")
}

func TestList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, syscall.Mkfifo(filepath.Join(f.ws, "fifo"), 0o600))

	l, err := f.dir.List(".", 0)
	require.NoError(t, err)
	require.Equal(t, ".", l.Path)
	require.False(t, l.Truncated)
	require.Equal(t, 8, l.Total)
	byName := map[string]workspace.Entry{}
	for _, e := range l.Entries {
		byName[e.Name] = e
	}
	require.Equal(t, []string{"fifo", "inner-link", "outdir", "outdir-rel", "secret-link", "secret-link-rel", "sub", "subdir-link"}, entryNames(l.Entries))
	require.Equal(t, workspace.EntryDir, byName["sub"].Type)
	require.Equal(t, workspace.EntryOther, byName["fifo"].Type)
	// Symlinks are listed as such, never followed, even when they point
	// outside.
	require.Equal(t, workspace.EntrySymlink, byName["outdir"].Type)
	require.Equal(t, f.outside, byName["outdir"].Target)
	require.Equal(t, workspace.EntrySymlink, byName["inner-link"].Type)
	require.Equal(t, "sub/inner.txt", byName["inner-link"].Target)
	require.Equal(t, int64(len("sub/inner.txt")), byName["inner-link"].Size)

	l, err = f.dir.List("sub", 0)
	require.NoError(t, err)
	require.Equal(t, []workspace.Entry{{Name: "inner.txt", Type: workspace.EntryFile, Size: 5}}, l.Entries)
}

func TestListBoundedKeepsFirstNamesInOrder(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	// Created in reverse order so directory order is unlikely to be sorted.
	for i := 599; i >= 0; i-- {
		name := filepath.Join(ws, "f"+leftPad(i))
		require.NoError(t, os.WriteFile(name, nil, 0o644))
	}
	d, err := workspace.Open(ws)
	require.NoError(t, err)
	defer d.Close()

	l, err := d.List(".", 10)
	require.NoError(t, err)
	require.True(t, l.Truncated)
	require.Equal(t, 600, l.Total)
	want := make([]string, 10)
	for i := range want {
		want[i] = "f" + leftPad(i)
	}
	require.Equal(t, want, entryNames(l.Entries))

	l, err = d.List(".", 0)
	require.NoError(t, err)
	require.False(t, l.Truncated)
	require.Len(t, l.Entries, 600)
}

func entryNames(entries []workspace.Entry) []string {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name
	}
	return names
}

func leftPad(i int) string {
	s := "000" + itoa(i)
	return s[len(s)-3:]
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
