package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// buildWorkspace fills root with every kind of entry Take records.
func buildWorkspace(t *testing.T, root string) {
	t.Helper()
	writeFile(t, root, "README.md", []byte("# hello\n"), 0o644)
	writeFile(t, root, "bin/run.sh", []byte("#!/bin/sh\necho run\n"), 0o755)
	writeFile(t, root, "secret/key.pem", []byte("not really a key"), 0o600)
	writeFile(t, root, "docs/ro.txt", []byte("read only"), 0o444)
	writeFile(t, root, "empty", nil, 0o644)
	writeFile(t, root, "a/b/c/d/deep.txt", []byte("deep"), 0o640)
	writeFile(t, root, "big.bin", randomBytes(1, 3<<20+12345), 0o644) // several chunks
	require.NoError(t, os.Mkdir(filepath.Join(root, "emptydir"), 0o750))
	require.NoError(t, os.Chmod(filepath.Join(root, "a/b"), 0o711))
	// Symlinks: inside, dangling, and two that point outside.
	require.NoError(t, os.Symlink("a/b/c/d/deep.txt", filepath.Join(root, "link-inside")))
	require.NoError(t, os.Symlink("does/not/exist", filepath.Join(root, "dangling")))
	require.NoError(t, os.Symlink("../../outside/victim.txt", filepath.Join(root, "bin/escape")))
	require.NoError(t, os.Symlink("/etc/hostname", filepath.Join(root, "absolute")))
	require.NoError(t, os.Symlink("a", filepath.Join(root, "dirlink")))
	if runtime.GOOS == "linux" {
		// Linux names are bytes; JSON cannot carry this one as text.
		writeFile(t, root, "latin1-\xe9t\xe9.txt", []byte("bytes"), 0o644)
	}
}

func TestTakeRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	src := filepath.Join(t.TempDir(), "ws")
	buildWorkspace(t, src)

	id, st, err := Take(ctx, b, src, Options{})
	require.NoError(t, err)
	require.NoError(t, checkDigest("id", id))
	wantFiles := 7
	if runtime.GOOS == "linux" {
		wantFiles++
	}
	require.Equal(t, wantFiles, st.Files)
	require.Equal(t, 5, st.Symlinks)
	require.Equal(t, 8, st.Dirs, "bin secret docs a a/b a/b/c a/b/c/d emptydir; not the root")
	require.Greater(t, st.NewBytes, int64(3<<20), "the content was stored")
	require.Equal(t, st.Bytes, st.ReadBytes, "without a cache every file is read")

	dst := filepath.Join(t.TempDir(), "restored")
	rst, err := Restore(ctx, b, id, dst)
	require.NoError(t, err)
	requireSameTree(t, describe(t, src), describe(t, dst))
	require.Equal(t, st.Files, rst.Files)
	require.Equal(t, st.Bytes, rst.Bytes)
	require.Equal(t, st.Files, rst.Written)
	require.Equal(t, st.Symlinks, rst.Symlinks)
	require.Equal(t, st.Dirs, rst.Dirs)

	// The restored workspace snapshots to the same id: the format is
	// canonical, and nothing new is stored.
	id2, st2, err := Take(ctx, b, dst, Options{})
	require.NoError(t, err)
	require.Equal(t, id, id2)
	require.Zero(t, st2.NewBlobs)
	require.Zero(t, st2.NewBytes)
}

func TestLoadManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	src := t.TempDir()
	writeFile(t, src, "a/x.txt", []byte("x"), 0o600)
	writeFile(t, src, "a-b", nil, 0o644)
	writeFile(t, src, "big", randomBytes(2, 5<<20), 0o644)
	require.NoError(t, os.Symlink("../outside", filepath.Join(src, "l")))

	id, _, err := Take(ctx, b, src, Options{Exclude: []string{"tmp"}})
	require.NoError(t, err)
	m, err := Load(ctx, b, id)
	require.NoError(t, err)
	require.Equal(t, id, m.ID)
	require.Equal(t, []string{"tmp"}, m.Exclude)

	var paths []string
	for _, e := range m.Entries {
		paths = append(paths, e.Path)
	}
	require.Equal(t, []string{"a", "a/x.txt", "a-b", "big", "l"}, paths, "depth first, names sorted")

	x := m.Entries[1]
	sum := sha256.Sum256([]byte("x"))
	require.Equal(t, Entry{Path: "a/x.txt", Type: TypeFile, Mode: 0o600, Size: 1, SHA256: hex.EncodeToString(sum[:])}, x)
	require.Equal(t, Entry{Path: "a-b", Type: TypeFile, Mode: 0o644, SHA256: sha256Hex(nil)}, m.Entries[2])
	require.Equal(t, Entry{Path: "l", Type: TypeSymlink, Target: "../outside"}, m.Entries[4])

	big := m.Entries[3]
	require.Equal(t, int64(5<<20), big.Size)
	require.GreaterOrEqual(t, len(big.Chunks), 2, "a 5 MiB file is several chunks")
	var sumSizes int64
	for _, c := range big.Chunks {
		require.LessOrEqual(t, c.Size, int64(MaxChunkSize))
		sumSizes += c.Size
	}
	require.Equal(t, big.Size, sumSizes)

	_, err = Load(ctx, b, strings.Repeat("0", 64))
	require.ErrorIs(t, err, errBlobNotFound)
	_, err = Load(ctx, b, "not-a-digest")
	require.ErrorContains(t, err, "snapshot id must be 64 lowercase hex digits")
}

func TestRestoreIntoDirtyDirectoryConverges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	writeFile(t, outside, "victim.txt", []byte("must not change"), 0o644)
	buildWorkspace(t, ws)
	want := describe(t, ws)
	id, _, err := Take(ctx, b, ws, Options{})
	require.NoError(t, err)

	// Make a mess of every kind.
	writeFile(t, ws, "README.md", []byte("# HELLO\n"), 0o644) // same size, other bytes
	require.NoError(t, os.Chmod(filepath.Join(ws, "bin/run.sh"), 0o644))
	require.NoError(t, os.Remove(filepath.Join(ws, "secret/key.pem")))
	writeFile(t, ws, "extra/nested/file.txt", []byte("extra"), 0o644)
	require.NoError(t, os.Chmod(filepath.Join(ws, "extra/nested"), 0o555)) // read-only dir to remove
	require.NoError(t, os.RemoveAll(filepath.Join(ws, "emptydir")))
	writeFile(t, ws, "emptydir", []byte("now a file"), 0o644)
	require.NoError(t, os.Remove(filepath.Join(ws, "empty")))
	require.NoError(t, os.Mkdir(filepath.Join(ws, "empty"), 0o755)) // a dir where a file was
	require.NoError(t, os.Remove(filepath.Join(ws, "link-inside")))
	require.NoError(t, os.Symlink("elsewhere", filepath.Join(ws, "link-inside")))
	// Symlinks to outside where the snapshot has a file and a directory:
	// restoring must replace them, never write through them.
	require.NoError(t, os.Remove(filepath.Join(ws, "docs/ro.txt")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "victim.txt"), filepath.Join(ws, "docs/ro.txt")))
	require.NoError(t, os.RemoveAll(filepath.Join(ws, "a/b/c")))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "a/b/c")))
	writeFile(t, ws, restoreTempPrefix+"leftover", []byte("a crashed restore"), 0o600)
	require.NoError(t, os.Chmod(filepath.Join(ws, "docs"), 0o500))

	st, err := Restore(ctx, b, id, ws)
	require.NoError(t, err)
	requireSameTree(t, want, describe(t, ws))
	require.Positive(t, st.Removed)
	require.Positive(t, st.Written)
	require.Less(t, st.Written, st.Files, "unchanged files are not rewritten")

	victim, err := os.ReadFile(filepath.Join(outside, "victim.txt"))
	require.NoError(t, err)
	require.Equal(t, "must not change", string(victim))
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing was written outside the workspace")

	// A second restore has nothing left to do.
	st, err = Restore(ctx, b, id, ws)
	require.NoError(t, err)
	require.Zero(t, st.Written)
	require.Zero(t, st.Removed)
	requireSameTree(t, want, describe(t, ws))
}

func TestRestoreRecreatesDeletedWorkspace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	ws := filepath.Join(t.TempDir(), "sessions", "ses_1")
	buildWorkspace(t, ws)
	want := describe(t, ws)
	id, _, err := Take(ctx, b, ws, Options{})
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Dir(ws)))

	_, err = Restore(ctx, b, id, ws)
	require.NoError(t, err)
	requireSameTree(t, want, describe(t, ws))
	fi, err := os.Stat(ws)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())
}

func TestTakeErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	base := t.TempDir()

	missing := filepath.Join(base, "gone")
	_, _, err := Take(ctx, b, missing, Options{})
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NotContains(t, err.Error(), base, "no host path in the message")

	ws := filepath.Join(base, "ws")
	writeFile(t, ws, "small.txt", []byte("small"), 0o644)
	writeFile(t, ws, "data/large.bin", make([]byte, 2000), 0o644)
	_, _, err = Take(ctx, b, ws, Options{MaxFileBytes: 1000})
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, `file "data/large.bin" is 2000 bytes, over the limit of 1000 bytes per file`)
	require.NotContains(t, err.Error(), base)

	_, _, err = Take(ctx, b, ws, Options{MaxTotalBytes: 2003})
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, `file "small.txt" brings the workspace over the limit of 2003 bytes in total`)
	_, st, err := Take(ctx, b, ws, Options{MaxTotalBytes: 2005, MaxFileBytes: 2000})
	require.NoError(t, err, "exactly at the limits")
	require.Equal(t, int64(2005), st.Bytes)

	for _, tc := range []struct {
		opts Options
		msg  string
	}{
		{Options{MaxFileBytes: -1}, "MaxFileBytes -1 is negative"},
		{Options{MaxTotalBytes: -1}, "MaxTotalBytes -1 is negative"},
		{Options{Exclude: []string{"ok", "../up"}}, `exclude[1] "../up" must be a path relative to the workspace`},
		{Options{Exclude: []string{"/abs"}}, `exclude[0] "/abs" must be a path relative to the workspace`},
		{Options{Exclude: []string{"."}}, `exclude[0] "." would exclude the whole workspace`},
		{Options{Exclude: []string{"a//b"}}, `exclude[0] "a//b" is not clean (want "a/b")`},
		{Options{Exclude: []string{""}}, `exclude[0] "" is empty`},
	} {
		_, _, err := Take(ctx, b, ws, tc.opts)
		require.ErrorContains(t, err, tc.msg)
	}

	_, _, err = Take(ctx, nil, ws, Options{})
	require.ErrorContains(t, err, "blobs is nil")
}

func TestTakeSkipsSpecialFiles(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	t.Parallel()
	ctx := context.Background()
	ws := t.TempDir()
	writeFile(t, ws, "f.txt", []byte("f"), 0o644)
	require.NoError(t, mkfifo(filepath.Join(ws, "pipe")))
	_, st, err := Take(ctx, newMemBlobs(), ws, Options{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Files)
	require.Equal(t, 1, st.Skipped)
}

func TestExclude(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	ws := t.TempDir()
	writeFile(t, ws, "src/main.go", []byte("package main"), 0o644)
	writeFile(t, ws, "node_modules/x/index.js", []byte("module"), 0o644)
	writeFile(t, ws, "build/cache/obj.o", []byte("obj"), 0o644)
	writeFile(t, ws, "build/out.txt", []byte("out"), 0o644)
	writeFile(t, ws, "builder.txt", []byte("not excluded"), 0o644)
	opts := Options{Exclude: []string{"node_modules", "build/cache"}}

	id, st, err := Take(ctx, b, ws, opts)
	require.NoError(t, err)
	require.Equal(t, 3, st.Files)
	m, err := Load(ctx, b, id)
	require.NoError(t, err)
	for _, e := range m.Entries {
		require.NotContains(t, e.Path, "node_modules")
		require.NotContains(t, e.Path, "build/cache")
	}
	require.Equal(t, []string{"build/cache", "node_modules"}, m.Exclude, "sorted")

	// Restoring leaves excluded paths alone, even inside a directory the
	// snapshot does not have.
	writeFile(t, ws, "node_modules/y/new.js", []byte("new"), 0o644)
	writeFile(t, ws, "src/extra.go", []byte("extra"), 0o644)
	_, err = Restore(ctx, b, id, ws)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(ws, "node_modules/y/new.js"))
	require.FileExists(t, filepath.Join(ws, "node_modules/x/index.js"))
	require.FileExists(t, filepath.Join(ws, "build/cache/obj.o"))
	require.NoFileExists(t, filepath.Join(ws, "src/extra.go"))

	// The excludes are part of the root tree: the same files with other
	// excludes are another snapshot.
	id2, _, err := Take(ctx, b, ws, Options{Exclude: []string{"build/cache", "node_modules", "node_modules"}})
	require.NoError(t, err)
	require.Equal(t, id, id2, "order and duplicates of excludes do not matter")
}

func TestSnapshotsAreSharedAcrossWorkspaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	one, two := t.TempDir(), t.TempDir()
	for _, ws := range []string{one, two} {
		writeFile(t, ws, "data.bin", randomBytes(3, 1<<20), 0o644)
		writeFile(t, ws, "dir/notes.md", []byte("notes"), 0o644)
	}
	id1, st1, err := Take(ctx, b, one, Options{})
	require.NoError(t, err)
	id2, st2, err := Take(ctx, b, two, Options{})
	require.NoError(t, err)
	require.Equal(t, id1, id2)
	require.Positive(t, st1.NewBytes)
	require.Zero(t, st2.NewBytes, "another session's identical workspace costs nothing")
}

func TestChunkingKeepsEditsLocal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	ws := t.TempDir()
	data := randomBytes(4, 10<<20)
	writeFile(t, ws, "big.bin", data, 0o644)
	id1, st, err := Take(ctx, b, ws, Options{})
	require.NoError(t, err)
	require.Greater(t, st.NewBytes, int64(10<<20)-1)

	// Two small edits: an overwrite in the middle, and an insertion at the
	// start that shifts every later byte. Content-defined cuts follow the
	// content, so only the chunk around each edit is new.
	edited := append([]byte("inserted bytes"), data...)
	copy(edited[5<<20:], "a small edit")
	writeFile(t, ws, "big.bin", edited, 0o644)
	id2, st, err := Take(ctx, b, ws, Options{})
	require.NoError(t, err)
	t.Logf("two edits of a 10 MiB file stored %d bytes in %d blobs", st.NewBytes, st.NewBlobs)

	before, err := Load(ctx, b, id1)
	require.NoError(t, err)
	after, err := Load(ctx, b, id2)
	require.NoError(t, err)
	old := make(map[string]bool)
	for _, c := range before.Entries[0].Chunks {
		old[c.SHA256] = true
	}
	var fresh []Chunk
	var freshBytes int64
	for _, c := range after.Entries[0].Chunks {
		if !old[c.SHA256] {
			fresh = append(fresh, c)
			freshBytes += c.Size
		}
	}
	require.GreaterOrEqual(t, len(before.Entries[0].Chunks), 5)
	require.LessOrEqual(t, len(fresh), 2, "one new chunk per edit")
	require.Equal(t, len(fresh)+1, st.NewBlobs, "the new chunks and the root tree")
	require.Less(t, st.NewBytes, freshBytes+1024)
	require.Less(t, st.NewBytes, int64(10<<20)/2)

	dst := t.TempDir()
	_, err = Restore(ctx, b, id2, dst)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dst, "big.bin"))
	require.NoError(t, err)
	require.True(t, string(got) == string(edited), "restored content matches")
}

func TestChunkPolynomialIsIrreducible(t *testing.T) {
	t.Parallel()
	require.True(t, chunkPolynomial.Irreducible())
}

func TestTakeContextCancelled(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFile(t, ws, "f", []byte("f"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := Take(ctx, newMemBlobs(), ws, Options{})
	require.ErrorIs(t, err, context.Canceled)
}

func TestRestoreMissingBlob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	ws := t.TempDir()
	writeFile(t, ws, "f.txt", []byte("content"), 0o644)
	id, _, err := Take(ctx, b, ws, Options{})
	require.NoError(t, err)
	sum := sha256.Sum256([]byte("content"))
	delete(b.m, hex.EncodeToString(sum[:]))

	dst := t.TempDir()
	_, err = Restore(ctx, b, id, dst)
	require.ErrorIs(t, err, errBlobNotFound)
	require.ErrorContains(t, err, `file "f.txt": get chunk 0`)
	entries, err := os.ReadDir(dst)
	require.NoError(t, err)
	require.Empty(t, entries, "the temporary file is removed")
}

func TestRestoreRefusesTamperedBlobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	ws := t.TempDir()
	writeFile(t, ws, "f.txt", []byte("content"), 0o644)
	id, _, err := Take(ctx, b, ws, Options{})
	require.NoError(t, err)

	// The store returns other bytes for the file's blob.
	sum := sha256.Sum256([]byte("content"))
	b.m[hex.EncodeToString(sum[:])] = []byte("CONTENT")
	_, err = Restore(ctx, b, id, t.TempDir())
	require.ErrorContains(t, err, "the store returned other bytes")

	// And for the root tree.
	b.m[id] = []byte(`{"v":1,"entries":[]}`)
	_, err = Restore(ctx, b, id, t.TempDir())
	require.ErrorContains(t, err, "the store returned bytes whose sha256 is")
}

func TestBadTreesAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newMemBlobs()
	file := b.putRaw(t, []byte("pwned"))
	emptyTree := b.putRaw(t, []byte(`{"v":1,"entries":[]}`))
	fileEntry := func(name string) string {
		return `{"name":"` + name + `","type":"file","mode":420,"size":5,"sha256":"` + file + `"}`
	}
	tree := func(entries ...string) []byte {
		return []byte(`{"v":1,"entries":[` + strings.Join(entries, ",") + `]}`)
	}
	nested := b.putRaw(t, tree(fileEntry("../../escaped")))

	for _, tc := range []struct {
		name string
		tree []byte
		msg  string
	}{
		{"dotdot slash", tree(fileEntry("../x")), `name "../x" contains a path separator`},
		{"dotdot", tree(fileEntry("..")), `name ".." is not allowed`},
		{"dot", tree(fileEntry(".")), `name "." is not allowed`},
		{"absolute", tree(fileEntry("/etc/passwd")), `name "/etc/passwd" contains a path separator`},
		{"nested", tree(fileEntry("a/b")), `contains a path separator`},
		{"empty name", tree(fileEntry("")), "name is empty"},
		{"nul", tree(fileEntry(`x\u0000y`)), "contains a path separator or NUL"},
		{"base64 escape", tree(`{"name_base64":"Li4vZXNjYXBlZA==","type":"file","mode":420,"size":5,"sha256":"` + file + `"}`), `name "../escaped"`},
		{"unsorted", tree(fileEntry("b"), fileEntry("a")), "entries must be sorted and unique"},
		{"duplicate", tree(fileEntry("a"), fileEntry("a")), "entries must be sorted and unique"},
		{"unknown type", tree(`{"name":"x","type":"fifo"}`), `type "fifo" is not dir, file or symlink`},
		{"setuid", tree(`{"name":"x","type":"file","mode":2541,"size":5,"sha256":"` + file + `"}`), "has bits other than permissions"},
		{"bad digest", tree(`{"name":"x","type":"file","size":5,"sha256":"zz"}`), "sha256 must be 64 lowercase hex digits"},
		{"chunks mismatch", tree(`{"name":"x","type":"file","size":9,"sha256":"` + file + `","chunks":[{"sha256":"` + file + `","size":5},{"sha256":"` + file + `","size":5}]}`), "chunks add up to more than size 9"},
		{"one chunk", tree(`{"name":"x","type":"file","size":5,"sha256":"` + file + `","chunks":[{"sha256":"` + file + `","size":5}]}`), "stored as its sha256"},
		{"symlink with content", tree(`{"name":"x","type":"symlink","target":"t","size":3}`), "a symlink has only a target"},
		{"empty target", tree(`{"name":"x","type":"symlink"}`), "target is empty"},
		{"unknown field", []byte(`{"v":1,"entries":[],"extra":1}`), "unknown field"},
		{"version", []byte(`{"v":2,"entries":[]}`), "tree format version 2 is not supported"},
		{"nested escape", tree(`{"name":"sub","type":"dir","mode":493,"tree":"` + nested + `"}`), `name "../../escaped" contains a path separator`},
		{"exclude below root", tree(`{"name":"sub","type":"dir","mode":493,"tree":"` + b.putRaw(t, []byte(`{"v":1,"exclude":["x"],"entries":[]}`)) + `"}`), "exclude is set on a tree that is not the root"},
		{"bad exclude", []byte(`{"v":1,"exclude":["../x"],"entries":[]}`), `exclude[0] "../x" must be a path relative`},
		{"entry under exclude", []byte(`{"v":1,"exclude":["sub"],"entries":[{"name":"sub","type":"dir","mode":493,"tree":"` + emptyTree + `"}]}`), `entry "sub" is under an excluded path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := b.putRaw(t, tc.tree)
			base := t.TempDir()
			ws := filepath.Join(base, "a", "ws")
			_, err := Restore(ctx, b, id, ws)
			require.ErrorContains(t, err, tc.msg)
			// Nothing was written beside or above the workspace.
			for _, dir := range []string{base, filepath.Join(base, "a")} {
				entries, err := os.ReadDir(dir)
				if errors.Is(err, fs.ErrNotExist) {
					continue // a bad root tree is refused before anything is created
				}
				require.NoError(t, err)
				for _, e := range entries {
					require.Contains(t, []string{"a", "ws"}, e.Name(), "unexpected %s in %s", e.Name(), dir)
				}
			}
			if tc.name != "entry under exclude" {
				_, err = Load(ctx, b, id)
				require.ErrorContains(t, err, tc.msg)
			}
		})
	}
}

func TestCacheMustMatchBlobs(t *testing.T) {
	t.Parallel()
	c, err := NewCache(newMemBlobs(), nil)
	require.NoError(t, err)
	_, _, err = Take(context.Background(), newMemBlobs(), t.TempDir(), Options{Cache: c})
	require.ErrorContains(t, err, "Cache was made for another Blobs")

	_, err = NewCache(nil, nil)
	require.ErrorContains(t, err, "blobs is nil")
	_, err = NewCache(newMemBlobs(), &CacheConfig{MaxFiles: -1})
	require.ErrorContains(t, err, "MaxFiles -1 is negative")
	_, err = NewCache(newMemBlobs(), &CacheConfig{MaxRecords: -1})
	require.ErrorContains(t, err, "MaxRecords -1 is negative")
}

func TestErrorsNameOnlyWorkspacePaths(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads unreadable directories")
	}
	t.Parallel()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	writeFile(t, ws, "locked/f.txt", []byte("f"), 0o644)
	require.NoError(t, os.Chmod(filepath.Join(ws, "locked"), 0))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(ws, "locked"), 0o755) })
	_, _, err := Take(context.Background(), newMemBlobs(), ws, Options{})
	require.ErrorIs(t, err, fs.ErrPermission)
	require.ErrorContains(t, err, `"locked"`)
	require.NotContains(t, err.Error(), base)
	require.False(t, errors.Is(err, ErrTooLarge))
}
