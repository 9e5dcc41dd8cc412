package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// testBlobOwners: a project owns the blobs recorded for it and no other
// project's; recording is idempotent and batched; bad arguments are
// refused naming the field, with nothing recorded.
func testBlobOwners(t *testing.T, h *harness) {
	a, b, c := sha([]byte("own a")), sha([]byte("own b")), sha([]byte("own c"))
	owned, err := h.s.BlobsOwned(h.ctx, "alpha", []string{a, b})
	require.NoError(t, err)
	require.Empty(t, owned, "nothing recorded yet")
	require.NoError(t, h.s.BlobOwn(h.ctx, "alpha", nil), "nothing to record")
	require.NoError(t, h.s.BlobOwn(h.ctx, "alpha", []string{a, b}))
	require.NoError(t, h.s.BlobOwn(h.ctx, "alpha", []string{b, a}), "recording again is a no-op")
	require.NoError(t, h.s.BlobOwn(h.ctx, "beta", []string{c}))

	owned, err = h.s.BlobsOwned(h.ctx, "alpha", []string{a, b, c})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{a: true, b: true}, owned)
	owned, err = h.s.BlobsOwned(h.ctx, "beta", []string{a, b, c})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{c: true}, owned, "another project's blobs are not beta's")
	owned, err = h.s.BlobsOwned(h.ctx, "alpha", nil)
	require.NoError(t, err)
	require.Empty(t, owned)

	// Many at once: a first snapshot's blobs, more than one batch.
	many := make([]string, 4500)
	for i := range many {
		many[i] = sha([]byte(strings.Repeat("m", i+1)))
	}
	require.NoError(t, h.s.BlobOwn(h.ctx, "gamma", many))
	owned, err = h.s.BlobsOwned(h.ctx, "gamma", append([]string{a}, many...))
	require.NoError(t, err)
	require.Len(t, owned, len(many))
	require.False(t, owned[a])

	err = h.s.BlobOwn(h.ctx, "alpha", []string{c, "not-a-digest"})
	require.ErrorContains(t, err, "digests[1]")
	owned, err = h.s.BlobsOwned(h.ctx, "alpha", []string{c})
	require.NoError(t, err)
	require.Empty(t, owned, "a refused batch records nothing")
	require.ErrorContains(t, h.s.BlobOwn(h.ctx, "", []string{a}), "project")
	_, err = h.s.BlobsOwned(h.ctx, "", []string{a})
	require.ErrorContains(t, err, "project")
	_, err = h.s.BlobsOwned(h.ctx, "alpha", []string{"../x"})
	require.ErrorContains(t, err, "digests[0]")

	// Owned as a tree: only BlobOwnTrees says so. A blob owned for itself
	// becomes a tree's row when recorded as one, never the other way.
	d, e := sha([]byte("tree d")), sha([]byte("tree e"))
	require.NoError(t, h.s.BlobOwn(h.ctx, "delta", []string{d}))
	trees, err := treesOwned(h.ctx, h.s, "delta", []string{d, e})
	require.NoError(t, err)
	require.Empty(t, trees, "a blob owned for itself is not a tree's row")
	kinds, err := h.s.BlobOwnership(h.ctx, "delta", []string{d, e})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{d: false}, kinds, "owned for itself, and e not at all")
	require.NoError(t, h.s.BlobOwnTrees(h.ctx, "delta", []string{d, e}))
	require.NoError(t, h.s.BlobOwn(h.ctx, "delta", []string{d}), "owning it for itself again keeps the tree's row")
	trees, err = treesOwned(h.ctx, h.s, "delta", []string{d, e, a})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{d: true, e: true}, trees)
	kinds, err = h.s.BlobOwnership(h.ctx, "delta", []string{d, e, a})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{d: true, e: true}, kinds, "trees, and a, which is alpha's, not at all")
	owned, err = h.s.BlobsOwned(h.ctx, "delta", []string{d, e})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{d: true, e: true}, owned, "a tree's row is owned")
	trees, err = treesOwned(h.ctx, h.s, "epsilon", []string{d, e})
	require.NoError(t, err)
	require.Empty(t, trees, "another project's trees")
	require.ErrorContains(t, h.s.BlobOwnTrees(h.ctx, "delta", []string{"nope"}), "digests[0]")
	_, err = treesOwned(h.ctx, h.s, "", []string{d})
	require.ErrorContains(t, err, "project")
}

// testBlobOwnAll: a step's claim in one call (snapshot.BatchOwners):
// blobs owned for themselves, trees as trees, a digest in both lists as a
// tree; more than a batch still records all; a bad digest in either list
// is refused naming it, with nothing recorded.
func testBlobOwnAll(t *testing.T, h *harness) {
	bo, ok := h.s.(interface {
		BlobOwnAll(ctx context.Context, project string, blobs, trees []string) error
	})
	require.True(t, ok, "every driver records a claim in one call")
	a, b, tr := sha([]byte("all a")), sha([]byte("all b")), sha([]byte("all tree"))
	require.NoError(t, bo.BlobOwnAll(h.ctx, "zeta", nil, nil))
	require.NoError(t, bo.BlobOwnAll(h.ctx, "zeta", []string{a, b}, []string{tr, b}))
	kinds, err := h.s.BlobOwnership(h.ctx, "zeta", []string{a, b, tr})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{a: false, b: true, tr: true}, kinds)
	require.NoError(t, bo.BlobOwnAll(h.ctx, "zeta", []string{tr}, nil), "a tree owned for itself again stays a tree")
	kinds, err = h.s.BlobOwnership(h.ctx, "zeta", []string{tr})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{tr: true}, kinds)

	many := make([]string, 2500)
	for i := range many {
		many[i] = sha([]byte(strings.Repeat("z", i+1)))
	}
	require.NoError(t, bo.BlobOwnAll(h.ctx, "eta", many[:1500], many[1500:]))
	kinds, err = h.s.BlobOwnership(h.ctx, "eta", many)
	require.NoError(t, err)
	require.Len(t, kinds, len(many))
	require.False(t, kinds[many[0]])
	require.True(t, kinds[many[len(many)-1]])

	c := sha([]byte("all c"))
	require.ErrorContains(t, bo.BlobOwnAll(h.ctx, "theta", []string{c}, []string{"nope"}), "digests[0]")
	require.ErrorContains(t, bo.BlobOwnAll(h.ctx, "theta", []string{c, "x"}, nil), "digests[1]")
	owned, err := h.s.BlobsOwned(h.ctx, "theta", []string{c})
	require.NoError(t, err)
	require.Empty(t, owned, "a refused claim records nothing")
}

// PreOwnersSQL fills a driver's statements that store a database as it was
// before 015_blob_owners: {snapA} and {snapB} become the digests of two
// snapshots, the first named by a checkpoint of a session of project
// alpha, the second by one of project beta; {loose} a snapshot blob no
// checkpoint names.
func PreOwnersSQL(template string) string {
	return strings.NewReplacer("{snapA}", sha([]byte("snapshot a")), "{snapB}", sha([]byte("snapshot b")),
		"{loose}", sha([]byte("loose"))).Replace(template)
}

// RequireOwnersMigrated checks what 015_blob_owners made of the database
// PreOwnersSQL filled: each project owns the root of its own checkpoints'
// snapshots, as trees, and nothing else.
func RequireOwnersMigrated(t *testing.T, s store.Store) {
	t.Helper()
	snapA, snapB, loose := sha([]byte("snapshot a")), sha([]byte("snapshot b")), sha([]byte("loose"))
	for project, want := range map[string]map[string]bool{
		"alpha":              {snapA: true},
		"beta":               {snapB: true},
		store.DefaultProject: {},
	} {
		owned, err := s.BlobsOwned(t.Context(), project, []string{snapA, snapB, loose})
		require.NoError(t, err)
		require.Equal(t, want, owned, "the snapshots project %s owns", project)
		trees, err := treesOwned(t.Context(), s, project, []string{snapA, snapB, loose})
		require.NoError(t, err)
		require.Equal(t, want, trees, "the roots of project %s's checkpoints are owned as trees", project)
	}
}

// treesOwned returns which of digests project owns as trees (the true
// values of BlobOwnership).
func treesOwned(ctx context.Context, s store.Store, project string, digests []string) (map[string]bool, error) {
	kinds, err := s.BlobOwnership(ctx, project, digests)
	if err != nil {
		return nil, err
	}
	trees := map[string]bool{}
	for d, tree := range kinds {
		if tree {
			trees[d] = true
		}
	}
	return trees, nil
}
