package snapshot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
)

// askingOwners counts the digests a Claim asks the store about.
type askingOwners struct {
	BatchOwners
	mu    sync.Mutex
	asked []string
}

func (a *askingOwners) BlobOwnership(ctx context.Context, p string, d []string) (map[string]bool, error) {
	a.mu.Lock()
	a.asked = append(a.asked, d...)
	a.mu.Unlock()
	return a.BatchOwners.BlobOwnership(ctx, p, d)
}

func (a *askingOwners) reset() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.asked
	a.asked = nil
	return out
}

// TestClaimAsksOnlyWhatDiffersFromBase: a step that wrote one file in a
// directory of 300, in a workspace of 20 top-level directories, claims its
// snapshot against the previous one (ClaimOptions.base) asking the store
// about the root (with the base: is it the project's?), the directory's
// new tree and the file's content: not about the other 319 entries. What
// it records is what a Claim without a base records: both projects end up
// owning the same digests the same way.
func TestClaimAsksOnlyWhatDiffersFromBase(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	owners := &askingOwners{BatchOwners: s}
	ws := t.TempDir()
	for i := range 20 {
		writeFile(t, ws, fmt.Sprintf("top%02d/readme.md", i), []byte(fmt.Sprintf("dir %d", i)), 0o644)
	}
	for i := range 300 {
		writeFile(t, ws, fmt.Sprintf("big/f%03d.txt", i), []byte(fmt.Sprintf("file %d", i)), 0o644)
	}
	first := snap(t, s, ws)
	for _, p := range []string{"with", "without"} {
		_, err := Claim(ctx, s, owners, p, first, ClaimOptions{})
		require.NoError(t, err)
	}

	writeFile(t, ws, "big/new.txt", []byte("a step's file"), 0o644)
	id := snap(t, s, ws)
	owners.reset()
	n, err := Claim(ctx, s, owners, "with", id, ClaimOptions{base: first})
	require.NoError(t, err)
	require.Equal(t, 3, n, "the root, big's tree and the new file's content")
	asked := owners.reset()
	require.ElementsMatch(t, []string{id, first, subtree(t, s, id, "big"), sha256Hex([]byte("a step's file"))}, asked,
		"the root with the base (is it the project's?), big's new tree, the file")

	n, err = Claim(ctx, s, owners, "without", id, ClaimOptions{})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Greater(t, len(owners.reset()), 320, "without a base, every entry of the root and of big")

	all := reachable(t, s, id)
	with, err := s.BlobOwnership(ctx, "with", all)
	require.NoError(t, err)
	without, err := s.BlobOwnership(ctx, "without", all)
	require.NoError(t, err)
	require.Equal(t, without, with)
	require.True(t, with[id], "the root is owned as a tree")

	// A base the snapshot shares nothing with spares nothing, and costs
	// nothing wrong.
	other := t.TempDir()
	writeFile(t, other, "elsewhere.txt", []byte("unrelated"), 0o644)
	unrelated, _, err := Take(ctx, s, other, Options{})
	require.NoError(t, err)
	_, err = Claim(ctx, s, owners, "third", unrelated, ClaimOptions{})
	require.NoError(t, err)
	owners.reset()
	_, err = Claim(ctx, s, owners, "third", id, ClaimOptions{base: unrelated})
	require.NoError(t, err)
	require.Greater(t, len(owners.reset()), 320)
	third, err := s.BlobOwnership(ctx, "third", all)
	require.NoError(t, err)
	require.Equal(t, without, third)
}

// TestClaimBaseLendsNoFileAsATree: a file of the base whose bytes are
// another project's tree is the project's for itself only. A snapshot
// that names those bytes as a directory's tree (a runner's snapshot,
// whose blobs the project may claim only if the runner sent them) is
// still read as a tree, and what it names that the project does not own
// is refused, base or no base.
func TestClaimBaseLendsNoFileAsATree(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	_, treeD := theirSecret(t, s)
	treeBytes, err := s.BlobGet(ctx, treeD)
	require.NoError(t, err)

	// The project's base holds a file with exactly those bytes.
	ours := t.TempDir()
	writeFile(t, ours, "copy.json", treeBytes, 0o644)
	base, _, err := Take(ctx, s, ours, Options{})
	require.NoError(t, err)
	_, err = Claim(ctx, s, s, "us", base, ClaimOptions{})
	require.NoError(t, err)
	kinds, err := s.BlobOwnership(ctx, "us", []string{treeD})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{treeD: false}, kinds, "owned as a file's bytes, not as a tree")

	// A snapshot naming those bytes as a directory, beside the file.
	baseTree, err := readTree(ctx, s, base, true)
	require.NoError(t, err)
	forged := *baseTree
	forged.Entries = append(append([]treeEntry(nil), baseTree.Entries...), treeEntry{Name: "d", Type: TypeDir, Mode: 0o755, Tree: treeD}) // after "copy.json": sorted
	data, forgedID, err := encodeTree(&forged)
	require.NoError(t, err)
	require.NoError(t, s.BlobPut(ctx, forgedID, data))
	sent := func(d string) bool { return d == forgedID } // the runner sent the root only
	for _, opts := range []ClaimOptions{{May: sent}, {May: sent, base: base}} {
		_, err = Claim(ctx, s, s, "us", forgedID, opts)
		require.ErrorIs(t, err, ErrNotOwned, "base %q", opts.base)
	}
	secret := sha256Hex([]byte("their secret"))
	kinds, err = s.BlobOwnership(ctx, "us", []string{forgedID, secret})
	require.NoError(t, err)
	require.Empty(t, kinds, "nothing recorded")
}

// TestClaimIgnoresABaseNotOwned: a base must be the project's, as a tree:
// another project's snapshot given as the base (by a caller that trusts
// what it was told) spares no question, so a forged root that names that
// project's trees is refused all the same, and nothing is recorded.
func TestClaimIgnoresABaseNotOwned(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	theirRoot, td := theirSecret(t, s)
	// Their directory twice: not their root itself, which would be no base.
	forged := tree{V: formatVersion, Entries: []treeEntry{{Name: "d", Type: TypeDir, Mode: 0o755, Tree: td}, {Name: "e", Type: TypeDir, Mode: 0o755, Tree: td}}}
	data, forgedID, err := encodeTree(&forged)
	require.NoError(t, err)
	require.NotEqual(t, theirRoot, forgedID)
	require.NoError(t, s.BlobPut(ctx, forgedID, data))
	sent := func(d string) bool { return d == forgedID }
	_, err = Claim(ctx, s, s, "us", forgedID, ClaimOptions{May: sent, base: theirRoot})
	require.ErrorIs(t, err, ErrNotOwned)
	secret := sha256Hex([]byte("their secret"))
	kinds, err := s.BlobOwnership(ctx, "us", []string{forgedID, td, secret})
	require.NoError(t, err)
	require.Empty(t, kinds)
}

// theirSecret makes another project's snapshot, "them", of a directory d
// holding "their secret", and returns its root and d's tree.
func theirSecret(t *testing.T, s *sqlite.Store) (root, d string) {
	t.Helper()
	ctx := context.Background()
	theirs := t.TempDir()
	writeFile(t, theirs, "d/secret.txt", []byte("their secret"), 0o644)
	root, _, err := Take(ctx, s, theirs, Options{})
	require.NoError(t, err)
	_, err = Claim(ctx, s, s, "them", root, ClaimOptions{})
	require.NoError(t, err)
	return root, subtree(t, s, root, "d")
}

// subtree returns the tree of the directory at path (slash-separated) in
// snapshot id.
func subtree(t *testing.T, b Blobs, id, path string) string {
	t.Helper()
	cur := id
	for i, name := range strings.Split(path, "/") {
		tr, err := readTree(context.Background(), b, cur, i == 0)
		require.NoError(t, err)
		j := slices.IndexFunc(tr.Entries, func(e treeEntry) bool { return e.Name == name && e.Type == TypeDir })
		require.GreaterOrEqual(t, j, 0, "no directory %q in %s", path, id)
		cur = tr.Entries[j].Tree
	}
	return cur
}

// reachable returns every digest snapshot id reaches, itself included.
func reachable(t *testing.T, b Blobs, id string) []string {
	t.Helper()
	out := []string{id}
	level := []string{id}
	for depth := 0; len(level) > 0; depth++ {
		var next []string
		for _, d := range level {
			data, err := b.BlobGet(context.Background(), d)
			require.NoError(t, err)
			trees, contents, err := TreeRefs(data, depth == 0)
			require.NoError(t, err)
			next = append(next, trees...)
			out = append(out, trees...)
			out = append(out, contents...)
		}
		level = next
	}
	return out
}

// TestTakeTellsItsTrees: Options.OnTree hears every tree a Take encodes,
// with bytes that are the tree's (their digest is the name given): the
// root's and those on the way to a step's change, so that the claim that
// follows reads them from memory.
func TestTakeTellsItsTrees(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	cache, err := NewCache(s, nil)
	require.NoError(t, err)
	ws := t.TempDir()
	writeFile(t, ws, "a/b/c.txt", []byte("deep"), 0o644)
	writeFile(t, ws, "other/d.txt", []byte("beside"), 0o644)
	var mu sync.Mutex
	told := map[string][]byte{}
	opts := Options{Cache: cache, Incremental: true, OnTree: func(d string, data []byte) {
		mu.Lock()
		defer mu.Unlock()
		told[d] = data
	}}
	first, _, err := Take(ctx, s, ws, opts)
	require.NoError(t, err)
	require.Len(t, told, 4, "a walk: the root, a, a/b and other")
	require.Contains(t, told, first)

	clear(told)
	cache.NoteWrites(ws, "a/b/new.txt")
	writeFile(t, ws, "a/b/new.txt", []byte("a step's file"), 0o644)
	cache.NoteWrites(ws, "a/b/new.txt")
	id, st, err := Take(ctx, s, ws, opts)
	require.NoError(t, err)
	require.True(t, st.Incremental)
	require.Contains(t, told, id)
	require.Len(t, told, 3, "the root, a and a/b: the way to the change")
	for d, data := range told {
		require.Equal(t, d, sha256Hex(data))
		stored, err := s.BlobGet(ctx, d)
		require.NoError(t, err)
		require.Equal(t, stored, data)
	}
}

// failOnceBatch fails its first BlobPutMany once fail is set.
type failOnceBatch struct {
	BatchBlobs
	mu   sync.Mutex
	fail bool
}

func (f *failOnceBatch) BlobPutMany(ctx context.Context, blobs map[string][]byte) error {
	f.mu.Lock()
	fail := f.fail
	f.fail = false
	f.mu.Unlock()
	if fail {
		return errors.New("transient: database is locked")
	}
	return f.BatchBlobs.BlobPutMany(ctx, blobs)
}

// TestIncrementalTakeAfterAFailedBatchStoresEverything: an incremental
// Take whose batch of new blobs fails to be stored half way (a step that
// made 140 directories: more than a batch) falls back to a walk, and the
// walk stores what the failed batch held, rather than skipping it as
// seen: a Take that succeeds has stored every tree and file it reaches.
// A review found 128 trees missing.
func TestIncrementalTakeAfterAFailedBatchStoresEverything(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	b := &failOnceBatch{BatchBlobs: s}
	ws, cache, opts, _ := firstIncrementalTake(t, b, "a.txt", "a")

	cache.NoteWrites(ws, "big")
	for i := range 140 {
		writeFile(t, ws, fmt.Sprintf("big/s%03d/f.txt", i), []byte(fmt.Sprintf("file %d", i)), 0o644)
	}
	cache.NoteWrites(ws, "big")
	b.mu.Lock()
	b.fail = true
	b.mu.Unlock()
	id, _, err := Take(ctx, b, ws, opts)
	require.NoError(t, err)
	var missing []string
	for _, d := range reachable(t, s, id) { // fails on a tree the store lacks
		if has, err := s.BlobHas(ctx, d); err != nil || !has {
			missing = append(missing, d)
		}
	}
	require.Empty(t, missing, "every blob of a successful Take is stored")
	_, err = Claim(ctx, s, s, "p", id, ClaimOptions{})
	require.NoError(t, err)
}

// TestRunnersLastClaimIsNeverARootRecordedAlone: a runner's claim (May
// set) of a snapshot whose root the project owned as a tree already, as
// the migration that introduced owners recorded roots (alone, no rows
// below), takes the root for what it reaches and does not make it the
// base: the next claim would take for owned blobs that have no rows of
// their own, and a runner's fetch of one asks about its own row. A
// snapshot a runner's claim read from its root down becomes the base; so
// does one a local claim (May nil) read, root owned or not.
func TestRunnersLastClaimIsNeverARootRecordedAlone(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	ws := t.TempDir()
	writeFile(t, ws, "d/a.txt", []byte("a"), 0o644)
	old := snap(t, s, ws)
	require.NoError(t, s.BlobOwnTrees(ctx, "p", []string{old}), "the migration's row: the root alone")
	nothingSent := func(string) bool { return false }

	var c LastClaim
	require.NoError(t, c.Claim(ctx, s, s, "p", old, LastClaimOptions{May: nothingSent}))
	require.Empty(t, c.id, "a root owned as a tree, not read: not the base")

	writeFile(t, ws, "e/b.txt", []byte("b"), 0o644)
	next := snap(t, s, ws)
	all := func(string) bool { return true }
	require.NoError(t, c.Claim(ctx, s, s, "p", next, LastClaimOptions{May: all}))
	require.Equal(t, next, c.id, "read from its root down: the base")

	var local LastClaim
	require.NoError(t, local.Claim(ctx, s, s, "p", old, LastClaimOptions{}))
	require.Equal(t, old, local.id, "a local claim reads below an owned root (BelowRoot): the base")
	below := reachable(t, s, old)
	owned, err := s.BlobsOwned(ctx, "p", below)
	require.NoError(t, err)
	require.Len(t, owned, len(below), "with the rows of what it reaches")
}

// TestLastClaimDoesNotCompareWithATreeItTookOnTrust: a runner's snapshot
// whose directory x is a tree the project owned already (here standing
// for a root the owners migration recorded alone: no rows below it)
// becomes the base, but x is not compared with: the next snapshot, x with
// a file added, is refused as it is without a base, since the runner did
// not send x's old file and no row says it is the project's. Were x
// compared with, its old file would be taken as owned through the base.
func TestLastClaimDoesNotCompareWithATreeItTookOnTrust(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "x"), "a.txt", []byte("old a"), 0o644)
	r1 := snap(t, s, ws)
	m := subtree(t, s, r1, "x")
	require.NoError(t, s.BlobOwnTrees(ctx, "p", []string{m}), "x alone, as the migration recorded roots")
	var c LastClaim
	require.NoError(t, c.Claim(ctx, s, s, "p", r1, LastClaimOptions{May: func(d string) bool { return d == r1 }}))
	require.Equal(t, r1, c.id)

	writeFile(t, filepath.Join(ws, "x"), "b.txt", []byte("new b"), 0o644)
	r2 := snap(t, s, ws)
	x2, b := subtree(t, s, r2, "x"), sha256Hex([]byte("new b"))
	sent := func(d string) bool { return d == r2 || d == x2 || d == b }
	_, err := Claim(ctx, s, s, "p", r2, ClaimOptions{May: sent})
	require.ErrorIs(t, err, ErrNotOwned, "without a base")
	require.ErrorIs(t, c.Claim(ctx, s, s, "p", r2, LastClaimOptions{May: sent}), ErrNotOwned, "against the last: a.txt is x's, which has no rows below it")
	require.Equal(t, r1, c.id, "a refused claim leaves the base")
}

// TestLastClaimOfTheSameSnapshotKeepsItsTrees: a runner's snapshot that
// did not change (its root owned as a tree, the base already) reads
// nothing and keeps the trees the last claim read for the next.
func TestLastClaimOfTheSameSnapshotKeepsItsTrees(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	ws := t.TempDir()
	writeFile(t, ws, "d/a.txt", []byte("a"), 0o644)
	id := snap(t, s, ws)
	all := func(string) bool { return true }
	var c LastClaim
	require.NoError(t, c.Claim(ctx, s, s, "p", id, LastClaimOptions{May: all}))
	kept := maps.Clone(c.trees)
	require.NotEmpty(t, kept)
	require.NoError(t, c.Claim(ctx, s, s, "p", id, LastClaimOptions{May: all}))
	require.Equal(t, id, c.id)
	require.Equal(t, kept, c.trees)
}

// TestLastClaimCarriesWhatItTookOnTrust: x is a tree the project owns
// "alone" (migration 015): the first claim trusts it; the second shares x
// unchanged with the base (skipped via shared.trees, so not in this
// claim's trusted); the third changes x. x must still not be compared
// with, though it was taken on trust two claims ago. Variants: x kept at
// its path, x renamed, x one level deeper.
func TestLastClaimCarriesWhatItTookOnTrust(t *testing.T) {
	for _, tc := range []struct {
		name        string
		x           string // where x is first
		x2          string // where x is in the second snapshot
		otherChange string // a file the second snapshot changes
	}{
		{"kept", "x", "x", "top.txt"},
		{"renamed", "x", "y", "top.txt"},
		{"deeper", "top/x", "top/x", "top/other.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openSQLiteBlobs(t)
			ws := t.TempDir()
			writeFile(t, filepath.Join(ws, tc.x), "a.txt", []byte("old a"), 0o644)
			writeFile(t, ws, "top.txt", []byte("t1"), 0o644)
			writeFile(t, ws, "top/other.txt", []byte("o1"), 0o644)
			r1 := snap(t, s, ws)
			m := subtree(t, s, r1, tc.x)
			require.NoError(t, s.BlobOwnTrees(ctx, "p", []string{m}), "x alone, as the migration recorded roots")
			oldA := sha256Hex([]byte("old a"))
			notOldA := func(d string) bool { return d != oldA } // the runner never sent a.txt

			var c LastClaim
			require.NoError(t, c.Claim(ctx, s, s, "p", r1, LastClaimOptions{May: notOldA}))
			require.Equal(t, r1, c.id)

			if tc.x2 != tc.x {
				require.NoError(t, os.Rename(filepath.Join(ws, tc.x), filepath.Join(ws, tc.x2)))
			}
			writeFile(t, ws, tc.otherChange, []byte("t2"), 0o644)
			r2 := snap(t, s, ws)
			require.Equal(t, m, subtree(t, s, r2, tc.x2))
			require.NoError(t, c.Claim(ctx, s, s, "p", r2, LastClaimOptions{May: notOldA}))
			require.Equal(t, r2, c.id)

			writeFile(t, filepath.Join(ws, tc.x2), "b.txt", []byte("new b"), 0o644)
			r3 := snap(t, s, ws)
			_, err := Claim(ctx, s, s, "p", r3, ClaimOptions{May: notOldA})
			require.ErrorIs(t, err, ErrNotOwned, "without a base")
			require.ErrorIs(t, c.Claim(ctx, s, s, "p", r3, LastClaimOptions{May: notOldA}), ErrNotOwned,
				"against the last: x was taken on trust two claims ago")
		})
	}
}

// TestLastClaimPastMaxUnsureDropsTheBase: a claim that takes more than
// maxUnsure trees on trust drops the base (and the unsure set with it): a
// base kept with the set forgotten would compare with x.
func TestLastClaimPastMaxUnsureDropsTheBase(t *testing.T) {
	defer func(was int) { maxUnsure = was }(maxUnsure)
	maxUnsure = 16
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "x"), "a.txt", []byte("old a"), 0o644)
	for i := range maxUnsure {
		writeFile(t, ws, fmt.Sprintf("d%04d/f", i), []byte(fmt.Sprint(i)), 0o644)
	}
	r1 := snap(t, s, ws)
	tr, err := readTree(ctx, s, r1, true)
	require.NoError(t, err)
	var dirs []string
	for _, e := range tr.Entries {
		if e.Type == TypeDir {
			dirs = append(dirs, e.Tree)
		}
	}
	require.Len(t, dirs, maxUnsure+1)
	require.NoError(t, s.BlobOwnTrees(ctx, "p", dirs), "every directory alone")
	oldA := sha256Hex([]byte("old a"))
	notOldA := func(d string) bool { return d != oldA }

	var c LastClaim
	require.NoError(t, c.Claim(ctx, s, s, "p", r1, LastClaimOptions{May: notOldA}))
	require.Empty(t, c.id, "more than maxUnsure on trust: no base")

	writeFile(t, filepath.Join(ws, "x"), "b.txt", []byte("new b"), 0o644)
	r2 := snap(t, s, ws)
	require.ErrorIs(t, c.Claim(ctx, s, s, "p", r2, LastClaimOptions{May: notOldA}), ErrNotOwned)
}

// TestAdoptedBaseIsComparedAtItsRootOnly: a local copy restored to R,
// whose directory x is a tree owned alone (as the owners migration
// recorded roots), adopts R; its next snapshot, x with a file added, is
// compared with R's root only, so x's old file is asked about and gets its
// row. Compared with x, it would have got none, for good: a later
// CheckOwned of that snapshot takes the new x for what it reaches, and a
// runner's fetch of the file would be refused.
func TestAdoptedBaseIsComparedAtItsRootOnly(t *testing.T) {
	s, ws, c := adoptedWithXAlone(t)
	claimXChangedAndCheckOldA(t, s, ws, c)
}

// TestAdoptedBaseCarriesItsDirectoriesOnTrust: the directories of an
// adopted base that the next snapshot keeps unchanged are taken on trust
// (which of them the restore's check trusted is not known), so a later
// change in one is not compared with it either: x's old file is asked
// about and gets its row.
func TestAdoptedBaseCarriesItsDirectoriesOnTrust(t *testing.T) {
	s, ws, c := adoptedWithXAlone(t)
	writeFile(t, ws, "top.txt", []byte("t2"), 0o644) // x kept as it is
	s1, _, err := Take(context.Background(), s, ws, Options{})
	require.NoError(t, err)
	require.NoError(t, c.Claim(context.Background(), s, s, "p", s1, LastClaimOptions{}))
	require.Equal(t, s1, c.id)
	claimXChangedAndCheckOldA(t, s, ws, c)
}

// adoptedWithXAlone returns a store, a workspace holding x/a.txt and
// top.txt, and a LastClaim that adopted its snapshot R after a restore's
// CheckOwned, R and x being owned as trees alone (as the owners migration
// recorded roots).
func adoptedWithXAlone(t *testing.T) (*sqlite.Store, string, *LastClaim) {
	t.Helper()
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "x"), "a.txt", []byte("old a"), 0o644)
	writeFile(t, ws, "top.txt", []byte("t"), 0o644)
	r := snap(t, s, ws)
	require.NoError(t, s.BlobOwnTrees(ctx, "p", []string{r, subtree(t, s, r, "x")}), "R's root and x, alone")
	require.NoError(t, CheckOwned(ctx, s, s, "p", r))
	c := &LastClaim{}
	c.Adopt(r)
	return s, ws, c
}

// claimXChangedAndCheckOldA adds a file to x, claims the snapshot against
// c, and checks that x's old file has a row after a restore's check.
func claimXChangedAndCheckOldA(t *testing.T, s *sqlite.Store, ws string, c *LastClaim) {
	t.Helper()
	ctx := context.Background()
	writeFile(t, filepath.Join(ws, "x"), "b.txt", []byte("new b"), 0o644)
	s2 := snap(t, s, ws)
	require.NoError(t, c.Claim(ctx, s, s, "p", s2, LastClaimOptions{}))
	require.NoError(t, CheckOwned(ctx, s, s, "p", s2))
	oldA := sha256Hex([]byte("old a"))
	owned, err := s.BlobsOwned(ctx, "p", []string{oldA})
	require.NoError(t, err)
	require.True(t, owned[oldA], "x's old file, reached by s2, has a row")
}

// TestAdoptedBaseIsShallowForOneClaimOnly: a snapshot claimed after an
// adopted base becomes the base, compared with all the way down: the claim
// after it asks about the changed file and the trees on its way only.
func TestAdoptedBaseIsShallowForOneClaimOnly(t *testing.T) {
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	owners := &askingOwners{BatchOwners: s}
	ws := t.TempDir()
	for d := range 10 {
		for f := range 10 {
			writeFile(t, ws, fmt.Sprintf("d%d/f%d.txt", d, f), []byte(fmt.Sprintf("%d/%d", d, f)), 0o644)
		}
	}
	r := snap(t, s, ws)
	_, err := Claim(ctx, s, s, "p", r, ClaimOptions{})
	require.NoError(t, err)
	var c LastClaim
	c.Adopt(r)

	writeFile(t, filepath.Join(ws, "d3"), "new1.txt", []byte("one"), 0o644)
	s1 := snap(t, s, ws)
	owners.reset()
	require.NoError(t, c.Claim(ctx, s, owners, "p", s1, LastClaimOptions{}))
	require.Len(t, owners.reset(), 2+1+11, "root with base, d3's tree, d3's 11 files (root only compared)")

	writeFile(t, filepath.Join(ws, "d3"), "new2.txt", []byte("two"), 0o644)
	s2 := snap(t, s, ws)
	require.NoError(t, c.Claim(ctx, s, owners, "p", s2, LastClaimOptions{}))
	require.Len(t, owners.reset(), 4, "root with base, d3's tree, the file: compared all the way down again")
}

// TestLastClaimCountsATreeOnTrustOnce: trees taken on trust are counted
// once each against maxUnsure: eight identical directories of an adopted
// base are one tree.
func TestLastClaimCountsATreeOnTrustOnce(t *testing.T) {
	defer func(was int) { maxUnsure = was }(maxUnsure)
	maxUnsure = 4
	ctx := context.Background()
	s := openSQLiteBlobs(t)
	ws := t.TempDir()
	for d := range 8 {
		writeFile(t, ws, fmt.Sprintf("d%d/same.txt", d), []byte("same"), 0o644)
	}
	writeFile(t, ws, "top.txt", []byte("t1"), 0o644)
	r := snap(t, s, ws)
	_, err := Claim(ctx, s, s, "p", r, ClaimOptions{})
	require.NoError(t, err)
	var c LastClaim
	c.Adopt(r)
	writeFile(t, ws, "top.txt", []byte("t2"), 0o644)
	s1 := snap(t, s, ws)
	require.NoError(t, c.Claim(ctx, s, s, "p", s1, LastClaimOptions{}))
	require.Equal(t, s1, c.id, "one tree on trust, not eight: the base is kept")
	require.Len(t, c.unsure, 1)
}

// snap takes a snapshot of ws into s, with no options.
func snap(t *testing.T, s *sqlite.Store, ws string) string {
	t.Helper()
	id, _, err := Take(context.Background(), s, ws, Options{})
	require.NoError(t, err)
	return id
}
