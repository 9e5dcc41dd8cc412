package environment

import (
	"context"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/snapshot"
)

// maxClaimTreeBytes bounds the tree blobs a copy keeps from its last
// claim: the trees on the way to a step's change, a few KiB, unless a
// directory on the way holds tens of thousands of entries (or the claim
// was the first of a large workspace, which reads every tree). Past it,
// the trees are read from the store again when needed.
const maxClaimTreeBytes = 1 << 20

// claimBase is what a copy's next claim compares its snapshot with
// (snapshot.ClaimOptions.Base): the last snapshot of the copy known
// claimed for its project, sound to lean on because ownership is never
// taken back (claimedSnapshots), and the tree blobs its claim read. The
// next step's snapshot differs from it on the way to what the step
// changed, which is, most of the time, where the last step changed
// something too: the trees to compare with are in memory, and the claim
// reads from the store only the new trees it must read anyway.
type claimBase struct {
	mu    sync.Mutex // one claim at a time: the trees kept are the last claim's
	id    string
	trees map[string][]byte
}

// claim claims snapshot id for project against the base, and makes id the
// base once it is claimed.
func (c *claimBase) claim(ctx context.Context, blobs snapshot.Blobs, owners snapshot.Owners, project, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &treeReads{Blobs: blobs, kept: c.trees, read: map[string][]byte{}}
	if _, err := snapshot.Claim(ctx, r, owners, project, id, snapshot.ClaimOptions{Base: c.id}); err != nil {
		return err
	}
	c.id, c.trees = id, r.read
	return nil
}

// claimed makes id, a snapshot known claimed for the project without a
// claim, the base; the trees kept stay (blobs are named by their content:
// they are still what they were).
func (c *claimBase) claimed(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id = id
}

// treeReads is the Blobs a claim reads trees through: from the last
// claim's trees when it has them, else from the store, keeping what it
// reads (up to maxClaimTreeBytes) for the next claim.
type treeReads struct {
	snapshot.Blobs
	kept, read map[string][]byte
	bytes      int
}

func (r *treeReads) BlobGet(ctx context.Context, digest string) ([]byte, error) {
	data, ok := r.kept[digest]
	if !ok {
		var err error
		if data, err = r.Blobs.BlobGet(ctx, digest); err != nil {
			return nil, err
		}
	}
	if _, had := r.read[digest]; !had && r.bytes+len(data) <= maxClaimTreeBytes {
		r.read[digest] = data
		r.bytes += len(data)
	}
	return data, nil
}
