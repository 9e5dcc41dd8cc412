package snapshot

import (
	"context"
	"maps"
	"sync"
)

// maxClaimTreeBytes bounds each of the sets of tree blobs a copy holds:
// the last claim's, kept for as long as its Environment is open, and,
// while a claim runs, its Take's and its own reads. A step's are the trees
// on the way to its change, a few KiB, unless a directory on the way
// holds thousands of entries; the first claim of a large workspace reads
// every tree, and keeps the first it reads. With the maps' cost and the
// encoders' spare capacity, a copy holds at most about twice this between
// claims and six times during one. Past it, trees are read from the store
// again when needed.
const maxClaimTreeBytes = 256 << 10

// LastClaim is what a copy's next claim compares its snapshot with
// (ClaimOptions.base): the last snapshot of the copy that a claim of this
// process read from its root down, recording the rows of what it reaches
// but below the trees it took on trust (unsure), sound to lean on because
// ownership is never taken back, and the tree blobs its claim read. The
// next step's snapshot differs from it on the way to what the step
// changed, which is, most of the time, where the last step changed
// something too: the trees to compare with are in memory, and so may be
// the new ones (a Take's, TreeSet). The zero value has no base yet. A
// local copy and a runner's each keep one.
type LastClaim struct {
	// mu makes a copy's claims one at a time, store reads included: the
	// trees kept are the last claim's. The engine snapshots a session's
	// copy one step at a time anyway.
	mu    sync.Mutex
	id    string
	trees map[string][]byte
	// unsure holds the trees the claims since the base was last empty
	// took for what they reach without reading them (ClaimOptions.unsure):
	// owned as trees, not through the base, they may be roots the owners
	// migration recorded alone. Up to maxUnsure; past it the base is
	// dropped and the next claim starts again without one.
	unsure map[string]bool
	// adopted says that id was adopted (Adopt), not claimed here: only
	// its root is compared with (ClaimOptions.shallowBase).
	adopted bool
}

// maxUnsure bounds LastClaim.unsure: a workspace whose directories are
// trees the project owned already (a repository another session of the
// project holds too) adds, at each claim that reads a directory without a
// counterpart in the base, that directory's subdirectories.
var maxUnsure = 4096 // a variable for the tests

// LastClaimOptions says what LastClaim.Claim may record, and where the
// snapshot's trees may be read from besides the store.
type LastClaimOptions struct {
	// May is ClaimOptions.May: nil when the server read the bytes itself
	// (from the project's workspace), a runner's take's blobs otherwise.
	May func(digest string) bool
	// Taken holds the snapshot's trees as its Take encoded them, if the
	// Take ran here (Options.OnTree).
	Taken *TreeSet
}

// Claim claims snapshot id for project against the base (Claim), and
// makes id the base once the claim read it from its root down. What the
// claim took for what it reaches without reading it (a subdirectory's
// tree the project owned as a tree, not through the base) is kept apart
// (unsure): a later claim does not compare with it, since it may be a
// root the migration that introduced owners recorded alone, the blobs
// below it without rows of their own.
//
// With a nil May, a root the project owns already is looked below all
// the same (BelowRoot): one recorded alone gets the rows of what it
// reaches, which the next claim, against it, takes for granted. A
// runner's claim cannot: below such a root are blobs the runner did not
// send, and no rows say they are the project's. So a runner's snapshot
// whose root the project owned as a tree already is claimed as before and
// does not become the base.
func (c *LastClaim) Claim(ctx context.Context, blobs Blobs, owners Owners, project, id string, opts LastClaimOptions) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &treeReads{Blobs: blobs, kept: c.trees, read: NewTreeSet()}
	if opts.Taken != nil {
		r.taken = opts.Taken.trees
	}
	res, err := claim(ctx, r, owners, project, id, ClaimOptions{May: opts.May, BelowRoot: opts.May == nil, base: c.id,
		unsure: c.unsure, shallowBase: c.adopted})
	if err != nil || !res.walked {
		return err
	}
	fresh := map[string]bool{}
	for _, d := range res.trusted {
		if !c.unsure[d] {
			fresh[d] = true
		}
		if len(c.unsure)+len(fresh) > maxUnsure {
			c.id, c.trees, c.unsure, c.adopted = "", nil, nil, false
			return nil
		}
	}
	if len(fresh) > 0 && c.unsure == nil {
		c.unsure = make(map[string]bool, len(fresh))
	}
	maps.Copy(c.unsure, fresh)
	c.id, c.trees, c.adopted = id, r.read.trees, false
	return nil
}

// Adopt makes id the base, without a claim, if there is none yet: a
// snapshot a claim of this process read from its root down (a restore's
// CheckOwned, a claim remembered), so that its root's entries have rows.
// Which of its subdirectories that claim took for what they reach is not
// known here, so only its root is compared with until a claim here makes
// its own snapshot the base (ClaimOptions.shallowBase). A base there is
// already stays: it is one of the copy's own claims, compared with all
// the way down. The trees kept stay too: named by their content, they are
// still what they were.
func (c *LastClaim) Adopt(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id == "" {
		c.id, c.adopted = id, true
	}
}

// treeReads is the Blobs a claim reads trees through: from the trees the
// snapshot's Take encoded or the last claim's when it has them, else from
// the store, keeping what it reads (up to maxClaimTreeBytes) for the next
// claim.
type treeReads struct {
	Blobs
	kept, taken map[string][]byte
	read        *TreeSet
}

func (r *treeReads) BlobGet(ctx context.Context, digest string) ([]byte, error) {
	data, ok := r.taken[digest]
	if !ok {
		data, ok = r.kept[digest]
	}
	if !ok {
		var err error
		if data, err = r.Blobs.BlobGet(ctx, digest); err != nil {
			return nil, err
		}
	}
	r.read.Add(digest, data)
	return data, nil
}

// TreeSet gathers tree blobs up to maxClaimTreeBytes, the first given
// kept: those a Take encodes (Options.OnTree), a step's few on
// the way to what it changed, or the first of a walk's many, its deepest
// (a walk encodes a directory's tree after its subdirectories'; the claim
// reads the others from the store), and those a claim reads (treeReads).
// A Take's bytes are its own, named by their digest; the Take that told
// them succeeded before a claim reads them, so they are stored.
type TreeSet struct {
	mu    sync.Mutex
	trees map[string][]byte
	bytes int
}

// NewTreeSet returns an empty TreeSet.
func NewTreeSet() *TreeSet { return &TreeSet{trees: map[string][]byte{}} }

// Add keeps data, the tree blob digest, if the set has room for it
// (Options.OnTree).
func (s *TreeSet) Add(digest string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, had := s.trees[digest]; !had && s.bytes+len(data) <= maxClaimTreeBytes {
		s.trees[digest] = data
		s.bytes += len(data)
	}
}
