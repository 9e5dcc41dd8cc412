package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Owners records which project owns which blobs (store.Store): blobs are
// shared by content, so a digest alone proves nothing, and a project may
// reach (restore, fork, fetch on a runner) only the blobs it owns. A blob
// is owned either for itself (BlobOwn: a file's bytes, or bytes a runner
// sent) or as a tree (BlobOwnTrees: read as a tree, with every blob it
// reaches owned first). Only a tree's row stands for what it reaches: a
// file whose bytes parse as a tree naming another project's digests is
// owned for itself, and meeting it later as a tree walks it again.
type Owners interface {
	// BlobOwn records that project owns digests, each for itself.
	BlobOwn(ctx context.Context, project string, digests []string) error
	// BlobOwnTrees records that project owns the trees digests and what
	// they reach, in the order given.
	BlobOwnTrees(ctx context.Context, project string, digests []string) error
	// BlobsOwned returns which of digests project owns, either way.
	BlobsOwned(ctx context.Context, project string, digests []string) (map[string]bool, error)
	// BlobOwnership returns the digests project owns, each with true
	// when owned as a tree.
	BlobOwnership(ctx context.Context, project string, digests []string) (map[string]bool, error)
}

// BatchOwners is Owners that records blobs and trees in one call
// (store.Store's drivers): a Claim of a step's snapshot, a blob or two and
// the trees on their way, is then one transaction, one commit, not one for
// the blobs and one for the trees.
type BatchOwners interface {
	Owners
	// BlobOwnAll is BlobOwn of blobs then BlobOwnTrees of trees, in one
	// transaction when they are few enough, else in that order.
	BlobOwnAll(ctx context.Context, project string, blobs, trees []string) error
}

// ErrNotOwned is the error of a snapshot that reaches a blob its project
// neither owns nor may claim: another project's, named by its digest.
var ErrNotOwned = errors.New("the blob is not the project's")

// ClaimOptions says what a Claim may record.
type ClaimOptions struct {
	// May says whether the project may claim a blob it does not own yet
	// (a runner's snapshot: the runner sent that blob's bytes during the
	// take). Nil: every blob (the server read the bytes itself, from the
	// project's workspace, or the snapshot is one the project owns).
	May func(digest string) bool
	// BelowRoot descends into the root tree even when the project owns
	// it. A restore sets it (it reads every tree anyway): a root recorded
	// alone, as the migration that introduced owners recorded the
	// snapshots already journaled, gets the rows of what it reaches.
	BelowRoot bool
	// base is a snapshot the project owns as a tree, which a Claim of
	// this process read from its root down, recording the rows of what it
	// reaches (with BelowRoot when its root was owned already: a root
	// recorded alone, as by the migration that introduced owners, stands
	// for blobs with no row of their own, which a runner's fetch of a
	// blob asks about), but below the subdirectories it took for what
	// they reach (unsure): typically the copy's previous snapshot. What a
	// tree of the snapshot names that the tree at the same path in base
	// names too is owned through base's rows (an owner's row is never
	// removed), so the store is not asked about it: a step that wrote one
	// file in a directory of ten thousand asks about the file and the
	// trees on its way, not about the directory's other entries, nor the
	// root's. A base the project does not own as a tree is ignored (Claim
	// asks, with the root). Empty: the store is asked about every entry
	// of every tree not owned as a tree. Only LastClaim sets it, with
	// what makes it sound (unsure, shallowBase).
	base string

	// unsure holds the trees that the claims since LastClaim last had no
	// base took for what they reach without reading them (owned as
	// trees, not through their own base): a claim does not compare a
	// tree with one of them, which may be a root the owners migration
	// recorded alone, with no rows below it.
	unsure map[string]bool
	// shallowBase says that base was adopted, not claimed by LastClaim
	// (LastClaim.Adopt): its root's entries have rows (the claim that
	// read it recorded them), but which of its subdirectories that claim
	// took on trust is not known. Only its root is compared with, and its
	// subdirectories met again are taken on trust (trusted).
	shallowBase bool
}

// Claim records that project owns every blob snapshot id reaches. An
// owned tree stands for every blob it reaches (Claim records a tree only
// after them), so Claim reads only the trees project does not own as
// trees yet: the cost of a snapshot that changed a file is that of the
// trees on the way to it, not of the workspace. A blob the project does
// not own that opts.May refuses makes Claim fail with ErrNotOwned, having
// recorded nothing. It returns how many blobs it recorded.
func Claim(ctx context.Context, b Blobs, o Owners, project, id string, opts ClaimOptions) (int, error) {
	res, err := claim(ctx, b, o, project, id, opts)
	return res.recorded, err
}

// claimResult is what a claim did: how many blobs it recorded, whether
// it read the root (false: the project owned it as a tree, and the claim
// took it for what it reaches; a root recorded alone, by the migration
// that introduced owners, has no rows below it), and the subdirectories'
// trees it took for what they reach the same way, not through the base:
// one of those may be such a root too.
type claimResult struct {
	recorded int
	walked   bool
	trusted  []string
}

func claim(ctx context.Context, b Blobs, o Owners, project, id string, opts ClaimOptions) (claimResult, error) {
	may := opts.May
	if may == nil {
		may = func(string) bool { return true }
	}
	ask := []string{id}
	if opts.base != "" && opts.base != id {
		ask = append(ask, opts.base) // in the same question: no round trip more
	}
	owned, trees, err := ownedBoth(ctx, o, project, ask)
	if err != nil {
		return claimResult{}, fmt.Errorf("snapshot %s: %w", id, err)
	}
	var claimTrees, claimBlobs []string // trees breadth first: a tree before what it reaches
	var trusted []string                // subdirectories owned as trees, not through base
	switch {
	case trees[id] && !opts.BelowRoot:
		return claimResult{}, nil
	case !owned[id] && !may(id):
		return claimResult{}, fmt.Errorf("snapshot %s: its root tree: %w", id, ErrNotOwned)
	case !trees[id]:
		claimTrees = append(claimTrees, id)
	}
	// seen holds the digests met so far: true for a tree. A digest met as
	// a file's content and then as a tree is read as a tree too.
	seen := map[string]bool{id: true}
	base := map[string]string{} // a tree of the level read: its counterpart in opts.base
	if opts.base != "" && opts.base != id && trees[opts.base] {
		base[id] = opts.base
	}
	level := []string{id}
	for depth := 0; len(level) > 0; depth++ {
		if depth > maxDepth {
			return claimResult{}, fmt.Errorf("snapshot %s: trees nested deeper than %d levels", id, maxDepth)
		}
		var next []string
		isTree := map[string]bool{}
		nextBase := map[string]string{}
		for _, t := range level {
			tr, err := readTree(ctx, b, t, depth == 0)
			if err != nil {
				return claimResult{}, fmt.Errorf("snapshot %s: tree %s: %w", id, t, err)
			}
			var shared baseRefs
			if bt, ok := base[t]; ok {
				// base is the project's: a failure to read it costs the
				// questions it would have spared, never the claim.
				if btr, err := readTree(ctx, b, bt, depth == 0); err == nil {
					shared = refsOf(btr)
				}
			}
			for i := range tr.Entries {
				e := &tr.Entries[i]
				switch e.Type {
				case TypeDir:
					d := e.Tree
					switch {
					case shared.trees[d]:
						seen[d] = true // owned as a tree through base
						if opts.shallowBase {
							trusted = append(trusted, d)
						}
					case !seen[d]:
						// A digest met as a file's content only is read as a
						// tree too, as is one base names only as content.
						seen[d], isTree[d] = true, true
						next = append(next, d)
						if bd, ok := shared.dirs[entryKey(e)]; ok && !opts.unsure[bd] && !opts.shallowBase {
							nextBase[d] = bd
						}
					}
				case TypeFile:
					for _, c := range e.chunks() {
						d := c.SHA256
						if _, met := seen[d]; met || shared.named[d] {
							continue
						}
						seen[d] = false
						next = append(next, d)
					}
				}
			}
		}
		if len(next) == 0 {
			break
		}
		owned, trees, err := ownedBoth(ctx, o, project, next)
		if err != nil {
			return claimResult{}, fmt.Errorf("snapshot %s: %w", id, err)
		}
		level = level[:0]
		for _, d := range next {
			switch {
			case trees[d]:
				if isTree[d] {
					trusted = append(trusted, d)
				}
				continue // it stands for what it reaches
			case !owned[d] && !may(d):
				return claimResult{}, fmt.Errorf("snapshot %s: blob %s: %w", id, d, ErrNotOwned)
			case isTree[d]:
				// Owned for itself at most (a file's bytes, a runner's
				// upload): what it names is checked all the same.
				claimTrees = append(claimTrees, d)
				level = append(level, d)
			case !owned[d]:
				claimBlobs = append(claimBlobs, d)
			}
		}
		base = nextBase
	}
	if len(claimTrees)+len(claimBlobs) == 0 {
		return claimResult{walked: true, trusted: trusted}, nil
	}
	// What a tree reaches first, so that a row of a tree always stands
	// for the rows of its blobs, even if recording stops half way.
	slices.Reverse(claimTrees)
	if bo, ok := o.(BatchOwners); ok {
		if err := bo.BlobOwnAll(ctx, project, claimBlobs, claimTrees); err != nil {
			return claimResult{}, fmt.Errorf("snapshot %s: %w", id, err)
		}
		return claimResult{len(claimTrees) + len(claimBlobs), true, trusted}, nil
	}
	if err := o.BlobOwn(ctx, project, claimBlobs); err != nil {
		return claimResult{}, fmt.Errorf("snapshot %s: %w", id, err)
	}
	if err := o.BlobOwnTrees(ctx, project, claimTrees); err != nil {
		return claimResult{}, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return claimResult{len(claimTrees) + len(claimBlobs), true, trusted}, nil
}

// readTree reads and decodes the tree blob digest.
func readTree(ctx context.Context, b Blobs, digest string, root bool) (*tree, error) {
	data, err := b.BlobGet(ctx, digest)
	if err != nil {
		return nil, err
	}
	return decodeTree(data, root)
}

// baseRefs is what a tree of a Claim's base names, owned through the
// base's rows: its subdirectories' trees as trees, and every digest it
// names (a file's content, a subdirectory's tree) as a blob.
type baseRefs struct {
	trees map[string]bool   // its subdirectories' trees
	named map[string]bool   // every digest it names: its files' contents and its subdirectories' trees
	dirs  map[string]string // its subdirectories' trees by name (entryKey)
}

func refsOf(t *tree) baseRefs {
	r := baseRefs{trees: map[string]bool{}, named: map[string]bool{}, dirs: map[string]string{}}
	for i := range t.Entries {
		e := &t.Entries[i]
		switch e.Type {
		case TypeDir:
			r.trees[e.Tree], r.named[e.Tree] = true, true
			r.dirs[entryKey(e)] = e.Tree
		case TypeFile:
			for _, c := range e.chunks() {
				r.named[c.SHA256] = true
			}
		}
	}
	return r
}

// entryKey names an entry as its tree stores it (either form of the name).
func entryKey(e *treeEntry) string { return e.Name + "\x00" + e.NameB64 }

// ownedBoth returns which of digests project owns, and which of them as
// trees: one read.
func ownedBoth(ctx context.Context, o Owners, project string, digests []string) (owned, trees map[string]bool, err error) {
	kinds, err := o.BlobOwnership(ctx, project, digests)
	if err != nil {
		return nil, nil, err
	}
	owned, trees = make(map[string]bool, len(kinds)), make(map[string]bool, len(kinds))
	for d, tree := range kinds {
		owned[d], trees[d] = true, tree
	}
	return owned, trees, nil
}

// Owned reports whether project owns snapshot id as a tree (its root,
// which stands for every blob it reaches).
func Owned(ctx context.Context, o Owners, project, id string) (bool, error) {
	kinds, err := o.BlobOwnership(ctx, project, []string{id})
	if err != nil {
		return false, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return kinds[id], nil
}

// CheckOwned checks, before a restore, that project owns snapshot id as
// a tree, and records as owned what the snapshot reaches below its root
// (a restore reads every tree anyway; a snapshot journaled before owners
// were kept has only its root's row, and a root the project owns as a
// tree stands for its blobs). A snapshot the project does not own fails
// with ErrNotOwned.
func CheckOwned(ctx context.Context, b Blobs, o Owners, project, id string) error {
	owned, err := Owned(ctx, o, project, id)
	if err != nil {
		return err
	}
	if !owned {
		return fmt.Errorf("snapshot %s: %w", id, ErrNotOwned)
	}
	_, err = Claim(ctx, b, o, project, id, ClaimOptions{BelowRoot: true})
	return err
}
