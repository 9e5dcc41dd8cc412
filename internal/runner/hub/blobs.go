package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
)

// BlobStore is the server's store of snapshot blobs (store.Store has it).
type BlobStore = snapshot.Blobs

// OwnerStore is the server's record of which project owns which blob, and
// the blobs it reads trees from to check a snapshot (store.Store has it).
type OwnerStore interface {
	snapshot.Blobs
	snapshot.Owners
}

// Bounds of the blobs a runner uploads in parts (a blob larger than a
// frame): the parts are held in the server's memory until the last one,
// so a runner must not hold much of it with uploads it never finishes.
const (
	// maxUploads bounds a connection's blobs arriving in parts at once.
	maxUploads = 4
	// maxUploadBytesPerConn bounds the bytes of a connection's unfinished
	// uploads: one blob of link.MaxBlobBytes and some more.
	maxUploadBytesPerConn = link.MaxBlobBytes + 16<<20
	// DefaultMaxUploadBytes bounds the bytes of all the node's runners'
	// unfinished uploads (Config.MaxUploadBytes).
	DefaultMaxUploadBytes = 256 << 20
	// DefaultMaxTakeBytes bounds what a runner may put during one snapshot
	// whose limits set no MaxTotalBytes.
	DefaultMaxTakeBytes = 8 << 30
	// takeTreeBytes is what a snapshot's trees may add to its files'
	// bytes (MaxTotalBytes counts the files only).
	takeTreeBytes = 64 << 20
)

// upload is a blob arriving in parts; its buffer grows as they come.
type upload struct {
	size int64
	data []byte
}

// takeScope is one snapshot the server asked the runner to take
// (snapshot.take, or the one env.stop takes): only while one runs may the
// runner store blobs, at most budget bytes of them for this one.
type takeScope struct {
	budget int64
	seq    uint64 // in the order the takes began, from 1
}

// sentBlob is a blob the runner sent (whole, checked against its digest)
// while a take was in progress: the proof that it holds the bytes. A blob
// whose bytes decode as a tree keeps what the tree refers to: it becomes
// its project's only along with them (ownProofs).
type sentBlob struct {
	tree bool
	refs []string
	// recordedAt is 0 until the blob is recorded as the project's; then
	// the seq of the last take begun. The proof stays until every take
	// begun by then has ended: one of them may have read the blob as not
	// owned yet and look for its proof next.
	recordedAt uint64
}

// AllowTake lets the runner store blobs (blob.has, blob.put) until end is
// called, at most maxBytes of them (0: DefaultMaxTakeBytes): the server
// calls it around each call that makes the runner take a snapshot, with
// the snapshot's MaxTotalBytes. sent reports whether the runner proved
// it holds blob digest (sent its whole bytes) during a take still in
// progress on the connection, this one or another (two environments of a
// shared workspace take snapshots at once, and the runner's cache knows
// a blob as stored once either sent it): the proof, for AcceptSnapshot,
// that it holds a blob its project does not own yet.
//
// The proofs are the connection's, not a take's: the end of every take
// records as the project's those whose blobs all are by then (ownProofs),
// and the others wait for the end of the takes still in progress, whose
// blobs they may name, so that no proof is lost between a take that sent
// a file and one that sent a tree naming it, whatever order they end in.
// The last take to end forgets what could not be recorded: a tree naming
// blobs the runner never sent.
func AllowTake(r *Runner, maxBytes int64) (sent func(digest string) bool, end func()) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxTakeBytes
	} else {
		maxBytes += takeTreeBytes
	}
	e := &r.env
	e.mu.Lock()
	if e.takes == nil {
		e.takes = map[*takeScope]struct{}{}
	}
	e.takeSeq++
	s := &takeScope{budget: maxBytes, seq: e.takeSeq}
	e.takes[s] = struct{}{}
	e.mu.Unlock()
	sent = func(digest string) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.proofs[digest] != nil
	}
	end = func() {
		var dropped int64
		for {
			e.mu.Lock()
			gen := e.proofGen
			pending, done := map[string]*sentBlob{}, map[string]bool{}
			for d, p := range e.proofs {
				if p.recordedAt == 0 {
					pending[d] = p
				} else {
					done[d] = true
				}
			}
			e.mu.Unlock()
			var settled []string
			var recorded bool
			if r.hub != nil {
				settled, recorded = r.hub.ownProofs(r, pending, done)
			}
			e.mu.Lock()
			for _, d := range settled {
				if p := e.proofs[d]; p != nil && p.recordedAt == 0 {
					p.recordedAt = e.takeSeq
				}
			}
			if recorded {
				e.proofGen++ // a tree waiting for these may be recorded now
			}
			// Done once a pass recorded nothing and no proof came (or was
			// recorded by another take's end) since it began: checked
			// with the take's removal, under one lock.
			if recorded || gen != e.proofGen {
				e.mu.Unlock()
				continue
			}
			delete(e.takes, s)
			if len(e.takes) == 0 {
				// No snapshot is being taken: no upload can be finished,
				// and no blob a waiting tree names can be sent.
				dropped = e.dropUploadsLocked()
				e.proofs = nil
			} else {
				e.pruneProofsLocked()
			}
			e.mu.Unlock()
			break
		}
		if r.hub != nil {
			r.hub.uploading.Add(-dropped)
		}
	}
	return sent, end
}

// ownProofs records as the runner's project's the blobs it proved it
// holds (proofs): the runner's cache knows them as stored from then on,
// so it names them in later snapshots without sending them again,
// whatever became of the take that sent them (a snapshot refused, the
// one env.stop compares, a walk that started again). Each is recorded for
// itself (store.BlobOwn), never as a tree: only snapshot.Claim, having
// walked a tree, records one that stands for what it reaches. A blob that
// decodes as a tree is recorded only once everything it refers to is the
// project's, so that nothing the runner sent names another project's
// digests. done lists the proofs recorded already. settled lists the
// proofs found owned (before, or by this call); recorded says whether
// this call recorded any.
func (h *Hub) ownProofs(r *Runner, proofs map[string]*sentBlob, done map[string]bool) (settled []string, recorded bool) {
	if len(proofs) == 0 || h.cfg.Owners == nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ask := make([]string, 0, len(proofs))
	for d, b := range proofs {
		ask = append(ask, d)
		for _, ref := range b.refs {
			if proofs[ref] == nil && !done[ref] {
				ask = append(ask, ref)
			}
		}
	}
	owned, err := h.cfg.Owners.BlobsOwned(ctx, r.Row.Project, ask)
	if err != nil {
		h.log.Warn("record a runner's blobs", "runner", r.Row.Name, "project", r.Row.Project, "err", err)
		return nil, false
	}
	for d := range done {
		owned[d] = true
	}
	var own, trees []string
	for d, b := range proofs {
		switch {
		case owned[d]:
			settled = append(settled, d)
		case b.tree:
			trees = append(trees, d)
		default:
			own = append(own, d)
			owned[d] = true
		}
	}
	slices.Sort(own)
	slices.Sort(trees)
	// A tree once all it refers to is: as many passes as trees nest.
	for progress := true; progress; {
		progress = false
		rest := trees[:0]
		for _, t := range trees {
			if !slices.ContainsFunc(proofs[t].refs, func(ref string) bool { return !owned[ref] }) {
				own = append(own, t)
				owned[t], progress = true, true
			} else {
				rest = append(rest, t)
			}
		}
		trees = rest
	}
	if len(own) == 0 {
		return settled, false
	}
	if err := h.cfg.Owners.BlobOwn(ctx, r.Row.Project, own); err != nil {
		h.log.Warn("record a runner's blobs", "runner", r.Row.Name, "project", r.Row.Project, "err", err)
		return settled, false
	}
	return append(settled, own...), true
}

// AcceptSnapshot checks the snapshot id the runner answered to a take
// (sent: AllowTake's) and records its blobs as its project's: every blob
// the snapshot reaches must be one the project owns or one the runner
// sent the bytes of during the take. A runner that learnt another
// project's snapshot or tree digest and wraps it in a tree of its own
// sends that tree's bytes but not the other project's: refused, with
// snapshot.ErrNotOwned, and nothing is recorded. Only the trees the
// project does not own are read (snapshot.Claim), and of their entries
// the store is asked only about those that last's snapshot (the copy's
// last claimed, snapshot.LastClaim: required) does not name: the cost is
// that of what changed.
func AcceptSnapshot(ctx context.Context, r *Runner, id string, sent func(digest string) bool, last *snapshot.LastClaim) error {
	o, err := r.hub.owners()
	if err != nil {
		return err
	}
	// A root not sent must be the project's: as a tree it stands for what
	// it reaches, as a blob owned for itself (ownSent) it is walked
	// (Claim).
	if !sent(id) {
		owned, err := o.BlobsOwned(ctx, r.Row.Project, []string{id})
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", id, err)
		}
		if !owned[id] {
			return fmt.Errorf("snapshot %s: the runner did not send its root tree: %w", id, snapshot.ErrNotOwned)
		}
	}
	return last.Claim(ctx, o, o, r.Row.Project, id, snapshot.LastClaimOptions{May: sent})
}

// pruneProofsLocked forgets (r.env.mu held) the proofs recorded before
// every take in progress began: those takes read the blobs as owned.
func (e *envState) pruneProofsLocked() {
	first := e.takeSeq
	for s := range e.takes {
		first = min(first, s.seq)
	}
	for d, p := range e.proofs {
		if p.recordedAt != 0 && p.recordedAt < first {
			delete(e.proofs, d)
		}
	}
}

// dropUploadsLocked forgets the connection's unfinished uploads (r.env.mu
// held) and returns their bytes, to uncount from the node's.
func (e *envState) dropUploadsLocked() int64 {
	var n int64
	for d, u := range e.uploads {
		n += int64(len(u.data))
		delete(e.uploads, d)
	}
	return n
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
// was not asked to restore (another session's, by guessing digests), nor
// one its project does not own: a snapshot its project does not own is
// refused (snapshot.ErrNotOwned), and what it reaches is recorded as
// owned first (snapshot.CheckOwned), which blob.get checks too.
func AllowRestore(ctx context.Context, r *Runner, id string) (end func(), err error) {
	o, err := r.hub.owners()
	if err != nil {
		return nil, err
	}
	if err := snapshot.CheckOwned(ctx, o, o, r.Row.Project, id); err != nil {
		return nil, fmt.Errorf("project %q: %w", r.Row.Project, err)
	}
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
	}, nil
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
	if h.cfg.Blobs == nil || h.cfg.Owners == nil {
		return nil, link.Errorf(link.CodeFailed, "this server keeps no snapshot blobs for runners")
	}
	return h.cfg.Blobs, nil
}

func (h *Hub) owners() (OwnerStore, error) {
	if h.cfg.Blobs == nil || h.cfg.Owners == nil {
		return nil, link.Errorf(link.CodeFailed, "this server keeps no snapshot blobs for runners")
	}
	return h.cfg.Owners, nil
}

// blobHas answers link.MethodBlobHas: which digests the runner must send.
// A blob its project does not own is "missing", stored or not: the runner
// then sends its bytes, the proof that it holds them, and learns nothing
// of what other projects store.
func (h *Hub) blobHas(ctx context.Context, r *Runner, req *link.Request) (any, error) {
	var p link.BlobHasParams
	if err := req.DecodeParams(&p); err != nil {
		return nil, err
	}
	if len(p.Digests) > link.MaxDigestsPerHas {
		return nil, link.Errorf(link.CodeBadParams, "digests: at most %d, got %d", link.MaxDigestsPerHas, len(p.Digests))
	}
	if !r.env.taking() {
		return nil, errNoTake
	}
	o, err := h.owners()
	if err != nil {
		return nil, err
	}
	for i, d := range p.Digests {
		if err := link.CheckDigest(fmt.Sprintf("digests[%d]", i), d); err != nil {
			return nil, link.Errorf(link.CodeBadParams, "%v", err)
		}
	}
	// A blob is owned only once stored (its bytes came first), so an
	// owned blob is one the store has.
	owned, err := o.BlobsOwned(ctx, r.Row.Project, p.Digests)
	if err != nil {
		return nil, link.Errorf(link.CodeFailed, "the server could not read its blobs")
	}
	res := link.BlobHasResult{Missing: []string{}}
	for _, d := range p.Digests {
		if !owned[d] {
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
	data, err := h.part(r, &p)
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
	// Stored or not (the store may have it), the runner proved it holds
	// these bytes, for every snapshot being taken (a put names none; two
	// environments of a shared workspace may take the same one at once).
	proof := &sentBlob{}
	if len(data) > 0 && data[0] == '{' {
		if trees, contents, err := snapshot.TreeRefs(data, true); err == nil {
			proof.tree, proof.refs = true, append(trees, contents...)
		}
	}
	r.env.mu.Lock()
	defer r.env.mu.Unlock()
	if len(r.env.takes) == 0 {
		// The last take ended meanwhile: no proof outlives it, and the
		// runner must not take the blob as stored.
		return nil, errNoTake
	}
	if r.env.proofs == nil {
		r.env.proofs = map[string]*sentBlob{}
	}
	if r.env.proofs[p.Digest] == nil { // the same bytes: the same proof
		r.env.proofs[p.Digest] = proof
		r.env.proofGen++
	}
	return nil, nil
}

// errNoTake refuses a blob call made while no snapshot the server asked
// for is being taken.
var errNoTake = link.Errorf(link.CodeBadParams, "no snapshot the server asked for is being taken on this runner: blobs are stored only during one")

// taking says whether a snapshot the server asked for is being taken.
func (e *envState) taking() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.takes) > 0
}

// part charges a part of a blob to a snapshot being taken and adds it to
// its upload: the whole blob once it is complete, nil before.
func (h *Hub) part(r *Runner, p *link.BlobPutParams) ([]byte, error) {
	e := &r.env
	e.mu.Lock()
	defer e.mu.Unlock()
	var scope *takeScope
	for s := range e.takes {
		if s.budget >= int64(len(p.Data)) {
			scope = s
			break
		}
	}
	switch {
	case len(e.takes) == 0:
		return nil, errNoTake
	case scope == nil:
		return nil, link.Errorf(link.CodeTooLarge, "blob %s: the snapshot being taken stored more bytes than its limit", p.Digest)
	}
	scope.budget -= int64(len(p.Data))
	if p.Offset == 0 && int64(len(p.Data)) == p.Size {
		return p.Data, nil // one part: no state
	}
	u := e.uploads[p.Digest]
	if p.Offset == 0 {
		if u == nil && len(e.uploads) >= maxUploads {
			return nil, link.Errorf(link.CodeBusy, "%d blobs are being uploaded already, the most at once", maxUploads)
		}
		if u != nil {
			h.uploading.Add(-int64(len(u.data)))
		}
		u = &upload{size: p.Size}
		if e.uploads == nil {
			e.uploads = map[string]*upload{}
		}
		e.uploads[p.Digest] = u
	}
	drop := func() {
		if u != nil {
			h.uploading.Add(-int64(len(u.data)))
		}
		delete(e.uploads, p.Digest)
	}
	if u == nil || u.size != p.Size || int64(len(u.data)) != p.Offset {
		drop()
		return nil, link.Errorf(link.CodeBadParams, "blob %s: a part out of order", p.Digest)
	}
	n := int64(len(p.Data))
	var held int64
	for _, o := range e.uploads {
		held += int64(len(o.data))
	}
	if held+n > maxUploadBytesPerConn {
		drop()
		return nil, link.Errorf(link.CodeBusy, "blob %s: this connection's unfinished uploads hold %d bytes, the most is %d", p.Digest, held, maxUploadBytesPerConn)
	}
	if h.uploading.Add(n) > h.cfg.MaxUploadBytes {
		h.uploading.Add(-n)
		drop()
		return nil, link.Errorf(link.CodeBusy, "blob %s: the server holds too many unfinished uploads: try again", p.Digest)
	}
	// Grown as the parts come (append's doubling), not sized by what the
	// runner announces: a first part claiming 32 MiB holds only its bytes.
	u.data = append(u.data, p.Data...)
	if int64(len(u.data)) < u.size {
		return nil, nil
	}
	h.uploading.Add(-int64(len(u.data)))
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
	// In a scope, and its project's too: AllowRestore recorded what the
	// snapshot reaches, so this fails only for a blob that was not.
	o, err := h.owners()
	if err != nil {
		return nil, err
	}
	owned, err := o.BlobsOwned(ctx, r.Row.Project, []string{p.Digest})
	if err != nil {
		return nil, link.Errorf(link.CodeFailed, "the server could not read its blobs")
	}
	if !owned[p.Digest] {
		return nil, link.Errorf(link.CodeNotFound, "blob %s is not this project's", p.Digest)
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
