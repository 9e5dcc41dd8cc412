package snapshot

import (
	"container/list"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/longhaul-dev/longhaul/internal/inotify"
)

// Cache defaults.
const (
	// DefaultCacheMaxRecords is CacheConfig.MaxRecords's default.
	DefaultCacheMaxRecords = 64
	DefaultCacheMaxFiles   = 100_000
	DefaultCacheMaxBlobs   = 200_000
	// racyWindow is how old a file's modification and change times must
	// be, relative to the start of a Take, for its digests to be
	// remembered. A write that lands after the file was read but within
	// the same tick of the file system's clock would leave its size and
	// times as they were; two seconds cover the coarsest clocks in use
	// (FAT's), and a file younger than that is simply read again next time.
	racyWindow = 2 * time.Second
)

// CacheConfig configures a Cache; the zero value means the defaults.
type CacheConfig struct {
	// MaxFiles bounds how many files' digests are remembered, least
	// recently used first out (default DefaultCacheMaxFiles, about 200
	// bytes each), and separately the entries of the workspaces' records
	// for incremental Takes (about 250 bytes each): a workspace of more
	// entries is walked at every Take.
	MaxFiles int
	// MaxBlobs bounds how many blob digests are remembered as stored
	// (default DefaultCacheMaxBlobs, about 100 bytes each).
	MaxBlobs int
	// MaxRecords bounds how many workspaces keep a record for incremental
	// Takes, least recently used first out (default
	// DefaultCacheMaxRecords; their entries are bounded by MaxFiles). A
	// workspace whose record went is walked at its next Take: give it at
	// least as many as the workspaces checkpointed at once, or each of
	// their steps walks its workspace.
	MaxRecords int
	// Now is the clock compared with file times (default time.Now).
	Now func() time.Time
	// Watch lets the Cache watch the workspaces it walks (inotify, on
	// Linux), so that a Take after writes it was not told of
	// (BeginUnknownWrites) reads only what changed instead of walking
	// (watch.go). Call Close to release the watches.
	Watch bool
	// WatchEmptyRoots, without Watch, watches a workspace while its
	// directory is empty, and only its directory (watch.go): nothing in it
	// can be written through a name outside it, so the kernel reports
	// every change, and the Take after a writer the Cache was not told of
	// costs an lstat rather than a walk. Once it holds anything it is
	// walked after such writers, as without watches. Call Close to release
	// the watches.
	WatchEmptyRoots bool
}

func (c *CacheConfig) validate() error {
	if c.MaxFiles < 0 {
		return fmt.Errorf("MaxFiles %d is negative", c.MaxFiles)
	}
	if c.MaxRecords < 0 {
		return fmt.Errorf("MaxRecords %d is negative", c.MaxRecords)
	}
	if c.MaxBlobs < 0 {
		return fmt.Errorf("MaxBlobs %d is negative", c.MaxBlobs)
	}
	return nil
}

// Cache lets Take skip what it already did: it remembers, per workspace
// file, the identity of the file when it was read (device, inode, size,
// modification and change times) with the digests of its content, so an
// unchanged file is neither read nor hashed again; and it remembers which
// blobs the store holds, so they are not asked about again. It is bounded
// (least recently used entries are dropped) and lives in memory only:
// after a restart the first Take reads everything once.
//
// A Cache belongs to the Blobs it was made for: what it remembers as stored
// is stored there, and Take refuses it with another store. It is safe for
// concurrent use, and one Cache may serve any number of workspaces.
type Cache struct {
	blobs Blobs
	now   func() time.Time

	mu       sync.Mutex
	maxFiles int
	files    map[fileCacheKey]*list.Element // of *fileCacheEntry
	fileLRU  list.List
	maxBlobs int
	known    map[string]*list.Element // of string
	knownLRU list.List
	// roots holds, per workspace (absolute path), what the next Take may
	// start from (incremental.go).
	roots map[string]*rootState
	// recLRU lists the states with a record, most recently used first;
	// recEntries counts their records' entries. maxRecords bounds how
	// many there are (CacheConfig.MaxRecords).
	recLRU     list.List
	recEntries int
	maxRecords int
	// sweepAt is the number of roots at which endTake drops those that
	// hold nothing.
	sweepAt int
	gens    uint64 // the last generation given (rootState.gen)
	// watchOn: workspaces are watched (CacheConfig.Watch, and inotify
	// works); ino is opened by the first watched walk. watches names
	// the directory of each watch descriptor (watch.go).
	watchOn    bool
	watchEmpty bool // CacheConfig.WatchEmptyRoots, while inotify works
	ino        *inotify.Instance
	watches    map[int32][]watchLoc
	nWatches   int
	maxWatches int // maxWatches, lower in tests
}

type fileCacheKey struct {
	root string // absolute path of the workspace
	rel  string
}

type fileCacheEntry struct {
	key    fileCacheKey
	id     fileID
	sha256 string
	chunks []Chunk
}

// fileID is what must not change for a file's cached digests to hold.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
	// nlink tells a file that other names share: a write through one of
	// them changes the others, which an incremental Take would not see.
	nlink uint64
}

// NewCache returns an empty Cache for b. cfg may be nil.
func NewCache(b Blobs, cfg *CacheConfig) (*Cache, error) {
	if b == nil {
		return nil, errors.New("new snapshot cache: blobs is nil")
	}
	var c CacheConfig
	if cfg != nil {
		c = *cfg
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("new snapshot cache: %w", err)
	}
	if c.MaxFiles == 0 {
		c.MaxFiles = DefaultCacheMaxFiles
	}
	if c.MaxBlobs == 0 {
		c.MaxBlobs = DefaultCacheMaxBlobs
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = DefaultCacheMaxRecords
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Cache{
		blobs:      b,
		now:        c.Now,
		maxFiles:   c.MaxFiles,
		files:      make(map[fileCacheKey]*list.Element),
		maxBlobs:   c.MaxBlobs,
		known:      make(map[string]*list.Element),
		roots:      make(map[string]*rootState),
		maxRecords: c.MaxRecords,
		sweepAt:    minSweep(c.MaxRecords),
		watchOn:    c.Watch,
		watchEmpty: c.WatchEmptyRoots,
		watches:    make(map[int32][]watchLoc),
		maxWatches: maxWatches,
	}, nil
}

// RecordsFor is the MaxRecords a Cache needs for sessions checkpointed
// at once (a node's or a runner's workers): twice as many, and never fewer
// than DefaultCacheMaxRecords. A running session whose record went walks
// its whole workspace at its next checkpoint; with more of them than
// records, every step of every session would.
func RecordsFor(sessions int) int {
	return max(DefaultCacheMaxRecords, 2*sessions)
}

// MaxRecords returns how many workspaces keep a record (CacheConfig).
func (c *Cache) MaxRecords() int { return c.maxRecords }

// belongsTo reports whether the cache was made for b. Interface values of
// an incomparable dynamic type would panic under ==, so those are compared
// only by type and never match.
func (c *Cache) belongsTo(b Blobs) bool {
	tc, tb := reflect.TypeOf(c.blobs), reflect.TypeOf(b)
	if tc != tb || !tc.Comparable() {
		return false
	}
	return c.blobs == b
}

// file returns the cached digests of root/rel if the file still has the
// identity id.
func (c *Cache) file(root, rel string, id fileID) (string, []Chunk, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.files[fileCacheKey{root, rel}]
	if !ok {
		return "", nil, false
	}
	e := el.Value.(*fileCacheEntry)
	if e.id != id {
		return "", nil, false
	}
	c.fileLRU.MoveToFront(el)
	return e.sha256, e.chunks, true
}

// putFile remembers the digests of root/rel read at identity id, unless
// the file changed so recently (relative to start) that a later write could
// leave the same identity.
func (c *Cache) putFile(start time.Time, root, rel string, id fileID, sha string, chunks []Chunk) {
	limit := start.Add(-racyWindow).UnixNano()
	key := fileCacheKey{root, rel}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id.mtime >= limit || id.ctime >= limit {
		if el, ok := c.files[key]; ok {
			c.fileLRU.Remove(el)
			delete(c.files, key)
		}
		return
	}
	e := &fileCacheEntry{key: key, id: id, sha256: sha, chunks: chunks}
	if el, ok := c.files[key]; ok {
		el.Value = e
		c.fileLRU.MoveToFront(el)
		return
	}
	c.files[key] = c.fileLRU.PushFront(e)
	for c.fileLRU.Len() > c.maxFiles {
		old := c.fileLRU.Back()
		c.fileLRU.Remove(old)
		delete(c.files, old.Value.(*fileCacheEntry).key)
	}
}

// stored reports whether blob d is known to be stored.
func (c *Cache) stored(d string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.known[d]
	if ok {
		c.knownLRU.MoveToFront(el)
	}
	return ok
}

// putStored remembers that blob d is stored.
func (c *Cache) putStored(d string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.known[d]; ok {
		c.knownLRU.MoveToFront(el)
		return
	}
	c.known[d] = c.knownLRU.PushFront(d)
	for c.knownLRU.Len() > c.maxBlobs {
		old := c.knownLRU.Back()
		c.knownLRU.Remove(old)
		delete(c.known, old.Value.(string))
	}
}
