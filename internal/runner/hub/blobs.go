package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
)

// BlobStore is the server's store of snapshot blobs (store.Store has it).
type BlobStore = snapshot.Blobs

// maxUploads bounds the blobs one connection uploads in parts at once, so
// a runner cannot hold the server's memory with unfinished uploads.
const maxUploads = 4

// upload is a blob arriving in parts.
type upload struct {
	size int64
	data []byte
}

// restoreScope is what one restore the server asked of the runner may
// fetch: the snapshot's root tree, and what each tree fetched refers to
// (learnt tree by tree: a tree's subtrees are trees, its files' blobs are
// contents, never read as trees, so a file's bytes that look like a tree
// widen nothing).
type restoreScope struct {
	// tree holds the digests reachable so far: true for a tree.
	tree map[string]bool
}

// AllowRestore lets the runner fetch, with blob.get, the blobs reachable
// from snapshot id until end is called: the server calls it around each
// snapshot.restore it asks of the runner. A runner never reads a blob it
// was not asked to restore (another session's, by guessing digests).
func AllowRestore(r *Runner, id string) (end func()) {
	s := &restoreScope{tree: map[string]bool{id: true}}
	r.env.mu.Lock()
	if r.env.scopes == nil {
		r.env.scopes = map[*restoreScope]struct{}{}
	}
	r.env.scopes[s] = struct{}{}
	r.env.mu.Unlock()
	return func() {
		r.env.mu.Lock()
		delete(r.env.scopes, s)
		r.env.mu.Unlock()
	}
}

// allowed says whether a restore in progress reaches digest, and whether
// as a tree (root: as a snapshot's root).
func (e *envState) allowed(digest string) (ok, tree bool, scope *restoreScope) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := range e.scopes {
		if isTree, in := s.tree[digest]; in {
			return true, isTree, s
		}
	}
	return false, false, nil
}

func (h *Hub) blobs() (BlobStore, error) {
	if h.cfg.Blobs == nil {
		return nil, link.Errorf(link.CodeFailed, "this server keeps no snapshot blobs for runners")
	}
	return h.cfg.Blobs, nil
}

// blobHas answers link.MethodBlobHas: which digests the store lacks.
func (h *Hub) blobHas(ctx context.Context, req *link.Request) (any, error) {
	var p link.BlobHasParams
	if err := req.DecodeParams(&p); err != nil {
		return nil, err
	}
	if len(p.Digests) > link.MaxDigestsPerHas {
		return nil, link.Errorf(link.CodeBadParams, "digests: at most %d, got %d", link.MaxDigestsPerHas, len(p.Digests))
	}
	b, err := h.blobs()
	if err != nil {
		return nil, err
	}
	res := link.BlobHasResult{Missing: []string{}}
	for i, d := range p.Digests {
		if err := link.CheckDigest(fmt.Sprintf("digests[%d]", i), d); err != nil {
			return nil, link.Errorf(link.CodeBadParams, "%v", err)
		}
		has, err := b.BlobHas(ctx, d)
		if err != nil {
			return nil, link.Errorf(link.CodeFailed, "the server could not read its blobs")
		}
		if !has {
			res.Missing = append(res.Missing, d)
		}
	}
	return res, nil
}

// blobPut answers link.MethodBlobPut: a blob (or a part of it) the runner
// stores. The whole blob's SHA-256 must be its digest; a blob the store
// has is never written again (a digest names one content).
func (h *Hub) blobPut(ctx context.Context, r *Runner, req *link.Request) (any, error) {
	var p link.BlobPutParams
	if err := req.DecodeParams(&p); err != nil {
		return nil, err
	}
	switch err := link.CheckDigest("digest", p.Digest); {
	case err != nil:
		return nil, link.Errorf(link.CodeBadParams, "%v", err)
	case p.Size < 0 || p.Size > link.MaxBlobBytes:
		return nil, link.Errorf(link.CodeBadParams, "size: must be 0 to %d, got %d", link.MaxBlobBytes, p.Size)
	case p.Offset < 0 || p.Offset+int64(len(p.Data)) > p.Size:
		return nil, link.Errorf(link.CodeBadParams, "offset: part %d+%d is past the size %d", p.Offset, len(p.Data), p.Size)
	}
	b, err := h.blobs()
	if err != nil {
		return nil, err
	}
	data, err := r.env.part(&p)
	if err != nil || data == nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != p.Digest {
		return nil, link.Errorf(link.CodeBadParams, "blob %s: its bytes have another sha256", p.Digest)
	}
	has, err := b.BlobHas(ctx, p.Digest)
	if err == nil && !has {
		err = b.BlobPut(ctx, p.Digest, data)
	}
	if err != nil {
		return nil, link.Errorf(link.CodeFailed, "the server could not store blob %s", p.Digest)
	}
	return nil, nil
}

// part adds a part of an upload; the whole blob once it is complete, nil
// before.
func (e *envState) part(p *link.BlobPutParams) ([]byte, error) {
	if p.Offset == 0 && int64(len(p.Data)) == p.Size {
		return p.Data, nil // one part: no state
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	u := e.uploads[p.Digest]
	if p.Offset == 0 {
		if u == nil && len(e.uploads) >= maxUploads {
			return nil, link.Errorf(link.CodeBusy, "%d blobs are being uploaded already, the most at once", maxUploads)
		}
		u = &upload{size: p.Size, data: make([]byte, 0, p.Size)}
		if e.uploads == nil {
			e.uploads = map[string]*upload{}
		}
		e.uploads[p.Digest] = u
	}
	if u == nil || u.size != p.Size || int64(len(u.data)) != p.Offset {
		delete(e.uploads, p.Digest)
		return nil, link.Errorf(link.CodeBadParams, "blob %s: a part out of order", p.Digest)
	}
	u.data = append(u.data, p.Data...)
	if int64(len(u.data)) < u.size {
		return nil, nil
	}
	delete(e.uploads, p.Digest)
	return u.data, nil
}

// blobGet answers link.MethodBlobGet: a blob reachable from a snapshot
// the server asked this runner to restore, sent as output frames.
func (h *Hub) blobGet(ctx context.Context, r *Runner, req *link.Request) (any, error) {
	var p link.BlobGetParams
	if err := req.DecodeParams(&p); err != nil {
		return nil, err
	}
	if err := link.CheckDigest("digest", p.Digest); err != nil {
		return nil, link.Errorf(link.CodeBadParams, "%v", err)
	}
	ok, isTree, scope := r.env.allowed(p.Digest)
	if !ok {
		return nil, link.Errorf(link.CodeNotFound, "blob %s is in no snapshot this runner was asked to restore", p.Digest)
	}
	b, err := h.blobs()
	if err != nil {
		return nil, err
	}
	data, err := b.BlobGet(ctx, p.Digest)
	if err != nil {
		return nil, link.Errorf(link.CodeNotFound, "blob %s is not stored", p.Digest)
	}
	if isTree {
		// The root and subtrees differ only by what they may hold; a tree
		// that does not decode is the restore's error to find, not ours.
		trees, contents, err := snapshot.TreeRefs(data, true)
		if err == nil {
			r.env.mu.Lock()
			for _, t := range trees {
				scope.tree[t] = true
			}
			for _, c := range contents {
				if _, seen := scope.tree[c]; !seen {
					scope.tree[c] = false
				}
			}
			r.env.mu.Unlock()
		}
	}
	if err := req.Output(ctx, link.StreamStdout, data); err != nil {
		return nil, err
	}
	return len(data), nil
}
