package environment

import (
	"context"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/snapshot"
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

// claimBase is what a copy's next claim compares its snapshot with
// (snapshot.ClaimOptions.Base): the last snapshot of the copy whose rows
// a claim of this process recorded down to what they reach, sound to lean
// on because ownership is never taken back (claimedSnapshots), and the
// tree blobs its claim read. The next step's snapshot differs from it on
// the way to what the step changed, which is, most of the time, where the
// last step changed something too: the trees to compare with are in
// memory, and so are the new ones (the Take's, treeSet).
type claimBase struct {
	// mu makes a copy's claims one at a time, store reads included: the
	// trees kept are the last claim's. The engine snapshots a session's
	// copy one step at a time anyway.
	mu    sync.Mutex
	id    string
	trees map[string][]byte
}

// claim claims snapshot id for project against the base, and makes id the
// base once it is claimed. A root the project owns already is looked
// below all the same (BelowRoot): one recorded alone, by the migration
// that introduced owners, gets the rows of what it reaches, which the
// next claim, against it, takes for granted.
func (c *claimBase) claim(ctx context.Context, blobs snapshot.Blobs, owners snapshot.Owners, project, id string, taken *treeSet) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &treeReads{Blobs: blobs, kept: c.trees, read: newTreeSet()}
	if taken != nil {
		r.taken = taken.trees
	}
	if _, err := snapshot.Claim(ctx, r, owners, project, id, snapshot.ClaimOptions{Base: c.id, BelowRoot: true}); err != nil {
		return err
	}
	c.id, c.trees = id, r.read.trees
	return nil
}

// adopt makes id the base without a claim: a snapshot a claim of this
// process recorded down to what it reaches (claimedSnapshots, a
// restore's snapshot.CheckOwned). The trees kept stay: named by their
// content, they are still what they were.
func (c *claimBase) adopt(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id = id
}

// treeReads is the Blobs a claim reads trees through: from the trees the
// snapshot's Take encoded or the last claim's when it has them, else from
// the store, keeping what it reads (up to maxClaimTreeBytes) for the next
// claim.
type treeReads struct {
	snapshot.Blobs
	kept, taken map[string][]byte
	read        *treeSet
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
	r.read.add(digest, data)
	return data, nil
}

// treeSet gathers tree blobs up to maxClaimTreeBytes, the first given
// kept: those a Take encodes (snapshot.Options.OnTree), a step's few on
// the way to what it changed, or the first of a walk's many, its deepest
// (a walk encodes a directory's tree after its subdirectories'; the claim
// reads the others from the store), and those a claim reads (treeReads).
// A Take's bytes are its own, named by their digest; the Take that told
// them succeeded before a claim reads them, so they are stored.
type treeSet struct {
	mu    sync.Mutex
	trees map[string][]byte
	bytes int
}

func newTreeSet() *treeSet { return &treeSet{trees: map[string][]byte{}} }

func (s *treeSet) add(digest string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, had := s.trees[digest]; !had && s.bytes+len(data) <= maxClaimTreeBytes {
		s.trees[digest] = data
		s.bytes += len(data)
	}
}
