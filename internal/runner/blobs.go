package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
)

// DefaultBlobCacheBytes bounds the runner's blob cache by default.
const DefaultBlobCacheBytes = 1 << 30

// errNoConnection: a blob call while the runner is not connected.
var errNoConnection = errors.New("the runner is not connected to the server")

// blobCache is the runner's snapshot blobs (snapshot.Blobs, and
// snapshot.ManyBlobs): the server's store, reached over the connection
// (blob.has, blob.put, blob.get), with a cache on disk under the data
// directory in front of it, by digest and bounded, so that a restore
// fetches only the blobs this machine lacks. Every blob read, from the
// cache or the server, is checked against its digest before use.
type blobCache struct {
	dir  string
	max  int64
	log  func(msg string, args ...any)
	conn atomic.Pointer[link.Conn]
	// calls bounds the blob calls in flight, below the server's cap of a
	// runner's calls (hub.MaxRunnerCalls), which would refuse more.
	calls chan struct{}

	mu   sync.Mutex
	size int64 // bytes in the cache (as of the last scan, plus adds)
	// putting holds the digests being put, closed when done: the server
	// takes one upload of a digest at a time (two snapshots of a shared
	// workspace may store the same new blob at once).
	putting map[string]chan struct{}
	// roots are the root trees of the snapshots taken lately
	// (snapshot.RootKeeper), rootBytes their bytes: the server accepts a
	// snapshot id only from a runner that sent it that tree's bytes.
	roots     map[string][]byte
	rootBytes int
}

// maxRootBytes bounds the root trees kept in memory for the snapshots
// being answered.
const maxRootBytes = 64 << 20

// KeepRoot implements snapshot.RootKeeper.
func (c *blobCache) KeepRoot(id string, tree []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.roots[id]; ok {
		return
	}
	if c.rootBytes+len(tree) > maxRootBytes {
		// Old ones go: a snapshot answered later finds its root in the
		// disk cache, where it was put, or takes it again.
		c.roots, c.rootBytes = nil, 0
	}
	if c.roots == nil {
		c.roots = map[string][]byte{}
	}
	c.roots[id] = tree
	c.rootBytes += len(tree)
}

// rootTree returns the root tree of snapshot id, nil when it is not at
// hand.
func (c *blobCache) rootTree(id string) []byte {
	c.mu.Lock()
	data := c.roots[id]
	c.mu.Unlock()
	if data != nil {
		return data
	}
	return c.cached(id)
}

// proveRoot sends the server the root tree of snapshot id, even though it
// may have it: the server accepts the id only from a runner that proved
// it holds that tree.
func (c *blobCache) proveRoot(ctx context.Context, id string) error {
	data := c.rootTree(id)
	if data == nil {
		return fmt.Errorf("snapshot %s: its root tree is not at hand to send the server", id)
	}
	return c.BlobPut(ctx, id, data)
}

func newBlobCache(dir string, max int64, log func(string, ...any)) (*blobCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &blobCache{dir: dir, max: max, log: log, calls: make(chan struct{}, maxBlobCalls), putting: map[string]chan struct{}{}}
	c.size = c.scanSize()
	return c, nil
}

func (c *blobCache) path(digest string) string {
	return filepath.Join(c.dir, digest[:2], digest)
}

func (c *blobCache) call(ctx context.Context, method string, params, result any, opts *link.CallOptions) error {
	conn := c.conn.Load()
	if conn == nil {
		return errNoConnection
	}
	select {
	case c.calls <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.calls }()
	return conn.Call(ctx, method, params, result, opts)
}

// maxBlobCalls bounds a runner's blob calls at once.
const maxBlobCalls = 8

// cached returns the cached blob of digest, nil when absent (or not
// what its name says: then removed).
func (c *blobCache) cached(digest string) []byte {
	p := c.path(digest)
	data, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != digest {
		_ = os.Remove(p)
		return nil
	}
	now := time.Now()
	_ = os.Chtimes(p, now, now) // recently used: evicted last
	return data
}

// keep caches data under digest (checked by the caller), evicting the
// least recently used blobs past the bound.
func (c *blobCache) keep(digest string, data []byte) {
	if int64(len(data)) > c.max/4 {
		return
	}
	p := c.path(digest)
	if _, err := os.Stat(p); err == nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), p) != nil {
		_ = os.Remove(tmp.Name())
		return
	}
	c.mu.Lock()
	c.size += int64(len(data))
	over := c.size > c.max
	c.mu.Unlock()
	if over {
		c.evict()
	}
}

type cachedBlob struct {
	path string
	size int64
	used time.Time
}

func (c *blobCache) list() []cachedBlob {
	var out []cachedBlob
	_ = filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			out = append(out, cachedBlob{p, fi.Size(), fi.ModTime()})
		}
		return nil
	})
	return out
}

func (c *blobCache) scanSize() int64 {
	var n int64
	for _, b := range c.list() {
		n += b.size
	}
	return n
}

// evict removes the least recently used blobs until the cache is at most
// three quarters of its bound.
func (c *blobCache) evict() {
	c.mu.Lock()
	defer c.mu.Unlock()
	blobs := c.list()
	slices.SortFunc(blobs, func(a, b cachedBlob) int { return a.used.Compare(b.used) })
	var size int64
	for _, b := range blobs {
		size += b.size
	}
	for _, b := range blobs {
		if size <= c.max/4*3 {
			break
		}
		if os.Remove(b.path) == nil {
			size -= b.size
		}
	}
	c.size = size
}

// BlobGet implements snapshot.Blobs: from the cache, else from the server
// (which answers only for a snapshot it asked this runner to restore).
func (c *blobCache) BlobGet(ctx context.Context, digest string) ([]byte, error) {
	if err := link.CheckDigest("digest", digest); err != nil {
		return nil, err
	}
	if data := c.cached(digest); data != nil {
		return data, nil
	}
	var data []byte
	err := c.call(ctx, link.MethodBlobGet, link.BlobGetParams{Digest: digest}, nil, &link.CallOptions{OnOutput: func(stream string, part []byte) {
		if len(data)+len(part) <= link.MaxBlobBytes {
			data = append(data, part...)
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("get blob %s from the server: %w", digest, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != digest {
		return nil, fmt.Errorf("get blob %s from the server: its bytes have another sha256", digest)
	}
	c.keep(digest, data)
	return data, nil
}

// BlobHas implements snapshot.Blobs (asking the server).
func (c *blobCache) BlobHas(ctx context.Context, digest string) (bool, error) {
	missing, err := c.BlobHasMany(ctx, []string{digest})
	return !missing[digest], err
}

// BlobHasMany implements snapshot.ManyBlobs: one blob.has per batch.
func (c *blobCache) BlobHasMany(ctx context.Context, digests []string) (map[string]bool, error) {
	missing := make(map[string]bool)
	for batch := range slices.Chunk(digests, link.MaxDigestsPerHas) {
		var res link.BlobHasResult
		if err := c.call(ctx, link.MethodBlobHas, link.BlobHasParams{Digests: batch}, &res, nil); err != nil {
			return nil, fmt.Errorf("ask the server for %d blobs: %w", len(batch), err)
		}
		for _, d := range res.Missing {
			missing[d] = true
		}
	}
	return missing, nil
}

// BlobPut implements snapshot.Blobs: the blob goes to the server (in parts
// that fit a frame) and into the cache.
func (c *blobCache) BlobPut(ctx context.Context, digest string, data []byte) error {
	if err := link.CheckDigest("digest", digest); err != nil {
		return err
	}
	conn := c.conn.Load()
	if conn == nil {
		return errNoConnection
	}
	// Put even when cached: the cache is no proof that this server holds
	// it (only that some server did); the server skips what it has.
	defer c.lockDigest(digest)()
	part := link.ChunkBytes(conn.MaxMessageBytes()) - 1024
	for off := 0; off == 0 || off < len(data); off += part {
		end := min(off+part, len(data))
		p := link.BlobPutParams{Digest: digest, Size: int64(len(data)), Offset: int64(off), Data: data[off:end]}
		if err := c.call(ctx, link.MethodBlobPut, p, nil, nil); err != nil {
			return fmt.Errorf("put blob %s to the server: %w", digest, err)
		}
		if end == len(data) {
			break
		}
	}
	c.keep(digest, data)
	return nil
}

// lockDigest waits until no put of digest is in flight and marks one;
// call the function it returns when done.
func (c *blobCache) lockDigest(digest string) (unlock func()) {
	c.mu.Lock()
	for {
		ch, busy := c.putting[digest]
		if !busy {
			break
		}
		c.mu.Unlock()
		<-ch
		c.mu.Lock()
	}
	ch := make(chan struct{})
	c.putting[digest] = ch
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.putting, digest)
		close(ch)
		c.mu.Unlock()
	}
}

// BlobPutMany implements snapshot.BatchBlobs. The blobs are stored one by
// one: a Take that fails half way leaves blobs no snapshot refers to,
// which the server collects.
func (c *blobCache) BlobPutMany(ctx context.Context, blobs map[string][]byte) error {
	for d, data := range blobs {
		if err := c.BlobPut(ctx, d, data); err != nil {
			return err
		}
	}
	return nil
}
