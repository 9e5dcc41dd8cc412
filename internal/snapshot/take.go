package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/restic/chunker"
)

// Blobs is where snapshots live: content-addressed blobs keyed by the
// lowercase hex SHA-256 of their bytes. store.Store satisfies it.
// BlobPut must not keep data after it returns (Take reuses the buffer).
type Blobs interface {
	BlobPut(ctx context.Context, sha256Hex string, data []byte) error
	BlobGet(ctx context.Context, sha256Hex string) ([]byte, error)
	BlobHas(ctx context.Context, sha256Hex string) (bool, error)
}

// RootKeeper is a Blobs told the root tree of each snapshot Take took
// (whether or not the store had it): a runner, which must prove to its
// server that it holds a snapshot's root tree by sending its bytes even
// when the server has them, keeps them this way.
type RootKeeper interface {
	KeepRoot(id string, tree []byte)
}

// errVanished: a directory was removed between being listed in its parent
// and being read; it is left out like a file removed meanwhile.
var errVanished = errors.New("directory vanished")

// ErrTooLarge is matched (errors.Is) by Take's error when a file or the
// whole workspace is over a limit of Options.
var ErrTooLarge = errors.New("over the snapshot size limit")

// Content-defined chunking parameters. Files are cut where a rolling Rabin
// fingerprint of the last 64 bytes matches a pattern, so an insertion moves
// only the cuts near it and the other chunks keep their digests. They are
// part of the format in effect: changing them (or the polynomial) breaks
// no snapshot, but the next snapshot of a large file then shares no chunk
// with the previous ones.
const (
	// MinChunkSize is the smallest chunk but a file's last; a file up to
	// this size is one chunk, stored once as a whole.
	MinChunkSize = 512 << 10
	// MaxChunkSize bounds a chunk, hence a blob; the average is 1 MiB.
	MaxChunkSize = 4 << 20
	// chunkPolynomial is an irreducible polynomial of degree 53 over GF(2)
	// (checked by a test), fixed so that every process cuts the same file
	// at the same places.
	chunkPolynomial = chunker.Pol(0x3DA3358B4DC173)
)

// Options bound and shape a Take.
type Options struct {
	// MaxFileBytes is the largest file Take stores (0: no limit). A larger
	// one fails the Take with an error naming it that matches ErrTooLarge.
	MaxFileBytes int64
	// MaxTotalBytes bounds the sum of the file sizes (0: no limit). Over
	// it the Take fails with an error naming the file that crossed it.
	MaxTotalBytes int64
	// Exclude lists workspace paths ("/"-separated, relative, clean) left
	// out of the snapshot with everything under them, e.g. "node_modules"
	// or ".git/objects". They are prefixes of whole components: "build"
	// excludes "build/x", not "builder". Restore leaves them alone.
	Exclude []string
	// Cache, if set, lets Take skip reading files unchanged since a
	// previous Take and asking the store about blobs it knows are stored.
	// It must have been made for the same Blobs.
	Cache *Cache
	// Incremental, with a Cache, lets Take start from the Cache's record
	// of the previous Take of this workspace and read again only the
	// paths told to Cache.NoteWrites since (incremental.go). The caller
	// vouches that every other change of the workspace since was told too
	// (Cache.BeginUnknownWrites, Cache.Forget); without it, Take walks the
	// whole workspace.
	Incremental bool
	// OnTree, if set, is told each tree the Take encodes, its digest and
	// its bytes (which it must not change), whether new to the store or
	// not: a Claim that follows the Take can read the new snapshot's trees
	// from memory rather than from the store. It is called on the Take's
	// goroutine, before the tree is stored: only a Take that succeeded
	// stored every tree it told (a walk encodes a directory's tree after
	// its subdirectories').
	OnTree func(digest string, data []byte)
}

func (o *Options) validate(b Blobs) ([]string, error) {
	if o.MaxFileBytes < 0 {
		return nil, fmt.Errorf("MaxFileBytes %d is negative", o.MaxFileBytes)
	}
	if o.MaxTotalBytes < 0 {
		return nil, fmt.Errorf("MaxTotalBytes %d is negative", o.MaxTotalBytes)
	}
	if o.Cache != nil && !o.Cache.belongsTo(b) {
		return nil, errors.New("Cache was made for another Blobs")
	}
	if o.Incremental && o.Cache == nil {
		return nil, errors.New("Incremental needs a Cache")
	}
	return cleanExcludes(o.Exclude)
}

// Stats describe a Take or a Restore.
type Stats struct {
	// Files, Dirs (the root excepted) and Symlinks count what the snapshot
	// holds; Bytes is the sum of its file sizes.
	Files    int   `json:"files"`
	Dirs     int   `json:"dirs"`
	Symlinks int   `json:"symlinks"`
	Bytes    int64 `json:"bytes"`
	// Skipped counts the devices, FIFOs and sockets Take left out.
	Skipped int `json:"skipped,omitempty"`
	// ReadBytes is how much file content was read from the workspace:
	// by Take, the files the Cache could not vouch for; by Restore, the
	// existing files compared with the snapshot.
	ReadBytes int64 `json:"read_bytes"`
	// NewBlobs and NewBytes count the blobs Take stored that the store
	// did not hold yet: what the snapshot cost.
	NewBlobs int   `json:"new_blobs,omitempty"`
	NewBytes int64 `json:"new_bytes,omitempty"`
	// Written and WrittenBytes count the files Restore wrote; Removed the
	// entries it removed because the snapshot does not have them.
	// Incremental is true when Take started from the previous Take's
	// record and read only the paths written since (Options.Incremental).
	Incremental  bool  `json:"incremental,omitempty"`
	Written      int   `json:"written,omitempty"`
	WrittenBytes int64 `json:"written_bytes,omitempty"`
	Removed      int   `json:"removed,omitempty"`
}

// Take snapshots the directory root: every file's content is stored as
// chunks, every directory as a tree blob listing its entries (only blobs the
// store lacks are sent), and the root tree's digest is returned as the
// snapshot id. Symlinks are recorded, never followed; devices, FIFOs and
// sockets are skipped. Each file is read once, so its stored content is one
// consistent read even if the workspace changes meanwhile; the snapshot as
// a whole is only as consistent as the workspace was quiet.
//
// Error messages name workspace-relative paths only. A root that does not
// exist gives an error matching fs.ErrNotExist.
func Take(ctx context.Context, b Blobs, root string, opts Options) (string, Stats, error) {
	if b == nil {
		return "", Stats{}, errors.New("snapshot: blobs is nil")
	}
	excludes, err := opts.validate(b)
	if err != nil {
		return "", Stats{}, fmt.Errorf("snapshot options: %w", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", Stats{}, fmt.Errorf("snapshot: %w", err)
	}
	t := &taker{
		ctx: ctx, b: b, rootPath: abs, opts: opts, excludes: excludes,
		cache: opts.Cache, seen: make(map[string]bool),
	}
	defer func() {
		if t.puts != nil {
			t.puts.finish() // a Take that failed leaves no goroutine behind
		}
		if t.work != nil {
			t.work.chunker.Reset(nil, chunkPolynomial) // drop the file
			chunkWorkPool.Put(t.work)
		}
	}()
	var base *rootRecord
	var dirty map[string]bool
	var gen uint64
	if t.cache != nil {
		t.start = t.cache.now()
	}
	if t.cache != nil && opts.Incremental {
		// The workspace directory's identity is recorded: a record of a
		// directory since replaced (removed and made again) is not used.
		if fi, err := os.Lstat(abs); err == nil {
			if id, ok := identify(fi); ok {
				base, dirty, gen, t.watching, t.emptyOnly = t.cache.startWatchedTake(abs)
				t.gen = gen
				t.rec = &rootRecord{dev: id.dev, ino: id.ino, options: t.optionsKey(), dirs: make(map[string]*dirRecord)}
			}
		}
	}
	if base != nil && len(dirty) == 0 {
		// Nothing written since the record (of this very directory, by
		// its identity): the same snapshot, and nothing to open or list.
		if id, err := t.incremental(nil, base, dirty); err == nil {
			t.st.Incremental = true
			t.keepRoot(id)
			t.cache.endTake(abs, t.rec, gen, t.linked)
			return id, t.st, nil
		}
		base = nil // walked below
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return "", Stats{}, fmt.Errorf("snapshot: open workspace: %w", stripPath(err))
	}
	defer r.Close()
	if base != nil && t.emptyOnly {
		// Written since: the workspace may not be empty any longer, and
		// only its directory is watched. Empty before, it is walked:
		// what is in it now is all new (and many new names in one
		// directory cost an incremental Take a listing each).
		t.stopEmptyWatch()
		if base.empty() {
			base = nil
		}
	}
	if base != nil {
		id, err := t.incremental(r, base, dirty)
		if err == nil {
			if err := t.flush(); err != nil {
				return "", t.st, fmt.Errorf("snapshot: %w", err)
			}
		}
		switch {
		case err == nil:
			t.rec.id = id
			t.st.Incremental = true
			t.keepRoot(id)
			if !t.rec.broken {
				t.cache.endTake(abs, t.rec, gen, t.linked)
			}
			return id, t.st, nil
		case t.ctx.Err() != nil:
			return "", t.st, fmt.Errorf("snapshot: %w", t.ctx.Err())
		}
		// Walk instead; what was read and stored stays counted.
		t.st = Stats{ReadBytes: t.st.ReadBytes, NewBlobs: t.st.NewBlobs, NewBytes: t.st.NewBytes}
		t.rec.dirs, t.rec.broken = make(map[string]*dirRecord), false
	}
	t.background = true // a walk may read thousands of files
	id, err := t.dir(r, ".", 0)
	if err == nil {
		err = t.flush()
	}
	if err != nil {
		return "", t.st, fmt.Errorf("snapshot: %w", err)
	}
	if t.rec != nil && !t.rec.broken {
		t.rec.id = id
		t.cache.endTake(abs, t.rec, gen, t.linked)
	}
	t.keepRoot(id)
	return id, t.st, nil
}

// keepRoot tells a RootKeeper the root tree of snapshot id: the one this
// Take encoded, or the record's when nothing was written since.
func (t *taker) keepRoot(id string) {
	k, ok := t.b.(RootKeeper)
	if !ok {
		return
	}
	data := t.root
	if data == nil && t.rec != nil && t.rec.dirs["."] != nil {
		data, _, _ = encodeTree(&t.rec.dirs["."].tree)
	}
	if data != nil && sha256Hex(data) == id {
		k.KeepRoot(id, data)
	}
}

type taker struct {
	ctx      context.Context
	b        Blobs
	rootPath string
	opts     Options
	excludes []string
	cache    *Cache
	start    time.Time // by the cache's clock
	seen     map[string]bool
	work     *chunkWork // taken from chunkWorkPool when a file is read
	st       Stats
	// rec, with a Cache, records the trees for the next Take to start
	// from (incremental.go).
	rec *rootRecord
	// fresh makes file read the file even if the Cache vouches for it: it
	// was written.
	fresh bool
	// puts stores the blobs in the background (putter.go); files are
	// the Cache's entries for the files read, kept once they are stored.
	puts  *putter
	files []pendingFile
	// background: blobs are stored by puts (a walk); an incremental
	// Take, of a few blobs, stores them itself without the hand-off: in
	// batch, at its flush, into a store that can (BatchBlobs).
	background bool
	batch      []putJob
	batchBytes int
	// watching: the Cache watches each directory before the Take lists
	// it (watch.go), only the workspace directory when emptyOnly, for the
	// Take that started at generation gen; linked is set when a file with
	// other names was seen.
	watching  bool
	emptyOnly bool
	gen       uint64
	linked    bool
	// root is the root tree last encoded (RootKeeper).
	root []byte
}

// chunkWork is the memory chunking needs (4.5 MiB, 8.5 MiB once a file of
// several chunks was read), pooled so that a Take
// that reads nothing (every file cached) allocates none of it.
type chunkWork struct {
	buf []byte
	// next holds the chunks after the first (made for the first file
	// of more than one chunk), while buf keeps the first.
	next    []byte
	chunker *chunker.Chunker
}

var chunkWorkPool = sync.Pool{New: func() any {
	return &chunkWork{
		buf:     make([]byte, MaxChunkSize),
		chunker: chunker.NewWithBoundaries(nil, chunkPolynomial, MinChunkSize, MaxChunkSize),
	}
}}

// dir stores the tree of directory rel, open as d (and, first, everything
// in it) and returns its digest. Each directory is an os.Root of its own,
// opened through its parent's, so entries are reached by name with one
// system call and still never outside the workspace.
func (t *taker) dir(d *os.Root, rel string, depth int) (string, error) {
	if depth >= maxDepth {
		return "", fmt.Errorf("directory %q: directories nest deeper than %d levels", rel, maxDepth)
	}
	if err := t.ctx.Err(); err != nil {
		return "", err
	}
	names, err := t.listDir(d, rel)
	if err != nil {
		return "", pathErr("list", rel, err)
	}
	before := t.st
	tr := tree{V: formatVersion, Entries: make([]treeEntry, 0, len(names))}
	if rel == "." {
		tr.Exclude = t.excludes
	}
	for _, name := range names {
		p := joinRel(rel, name)
		if excluded(t.excludes, p) {
			continue
		}
		fi, err := d.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while we listed
		}
		if err != nil {
			return "", pathErr("stat", p, err)
		}
		var te treeEntry
		encodeText(name, &te.Name, &te.NameB64)
		switch mode := fi.Mode(); {
		case mode.IsDir():
			sub, err := t.subdir(d, name, p, depth+1)
			if errors.Is(err, errVanished) {
				continue // removed, or replaced by a non-directory, while we listed
			}
			if err != nil {
				return "", err
			}
			te.Type, te.Mode, te.Tree = TypeDir, uint32(mode.Perm()), sub
			t.st.Dirs++
		case mode.IsRegular():
			ok, err := t.file(d, name, p, fi, &te)
			if err != nil {
				return "", err
			}
			if !ok {
				continue
			}
		case mode&fs.ModeSymlink != 0:
			target, err := d.Readlink(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return "", pathErr("read link", p, err)
			}
			te.Type = TypeSymlink
			encodeText(target, &te.Target, &te.TargetB64)
			t.st.Symlinks++
		default:
			t.st.Skipped++
			continue
		}
		tr.Entries = append(tr.Entries, te)
	}
	data, digest, err := encodeTree(&tr)
	if err != nil {
		return "", err
	}
	if err := t.put(digest, data, rel, "tree", false); err != nil {
		return "", err
	}
	t.recordDir(rel, &tr, digest, before)
	return digest, nil
}

// subdir opens directory name of d and stores its tree.
func (t *taker) subdir(d *os.Root, name, rel string, depth int) (string, error) {
	sub, err := d.OpenRoot(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || !isKind(d, name, fs.ModeDir) {
			return "", errVanished
		}
		return "", pathErr("open", rel, err)
	}
	defer sub.Close()
	// OpenRoot follows a symlink that replaced the directory since it was
	// listed; the tree would then describe the link's target under the
	// directory's name. The link is left out instead, as if it vanished.
	if fi, err := d.Lstat(name); err != nil || !fi.IsDir() {
		return "", errVanished
	}
	return t.dir(sub, rel, depth)
}

// file fills te for the regular file name of d (rel in the workspace). It
// returns false if the file vanished (or stopped being a regular file)
// since it was listed.
func (t *taker) file(d *os.Root, name, rel string, fi fs.FileInfo, te *treeEntry) (bool, error) {
	if err := t.checkSize(rel, fi.Size()); err != nil {
		return false, err
	}
	te.Type, te.Mode = TypeFile, uint32(fi.Mode().Perm())
	if t.cache != nil && !t.fresh {
		if id, ok := identify(fi); ok {
			t.linked = t.linked || id.nlink > 1
			if sha, chunks, hit := t.cache.file(t.rootPath, rel, id); hit {
				te.Size, te.SHA256, te.Chunks = id.size, sha, chunks
				return true, t.count(rel, id.size)
			}
		}
	}

	f, err := d.OpenFile(name, readFlags, 0)
	if errors.Is(err, fs.ErrNotExist) || (err != nil && !isKind(d, name, 0)) {
		return false, nil // removed, or replaced by another kind of entry (a symlink)
	}
	if err != nil {
		return false, pathErr("open", rel, err)
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return false, pathErr("stat", rel, err)
	}
	if !before.Mode().IsRegular() {
		t.st.Skipped++
		return false, nil
	}
	if err := t.checkSize(rel, before.Size()); err != nil {
		return false, err
	}
	size, sha, chunks, err := t.read(rel, f, before.Size())
	if err != nil {
		return false, err
	}
	te.Size, te.SHA256 = size, sha
	if len(chunks) > 1 {
		te.Chunks = chunks
	} else {
		chunks = nil
	}
	if t.cache != nil {
		// Only a file that did not change while it was read is cached
		// under its identity.
		after, err := f.Stat()
		idBefore, ok1 := identify(before)
		idAfter, ok2 := identify(after)
		if err == nil && ok1 && ok2 && idBefore == idAfter && idAfter.size == size {
			t.files = append(t.files, pendingFile{rel: rel, id: idAfter, sha: sha, chunks: chunks})
		}
	}
	return true, t.count(rel, size)
}

// checkSize applies MaxFileBytes and, ahead of reading, MaxTotalBytes.
func (t *taker) checkSize(rel string, size int64) error {
	if max := t.opts.MaxFileBytes; max > 0 && size > max {
		return fmt.Errorf("file %q is %d bytes, over the limit of %d bytes per file: %w", rel, size, max, ErrTooLarge)
	}
	if max := t.opts.MaxTotalBytes; max > 0 && t.st.Bytes+size > max {
		return fmt.Errorf("file %q brings the workspace over the limit of %d bytes in total: %w", rel, max, ErrTooLarge)
	}
	return nil
}

// count adds a file to the stats.
func (t *taker) count(rel string, size int64) error {
	if err := t.checkSize(rel, size); err != nil {
		return err
	}
	t.st.Files++
	t.st.Bytes += size
	return nil
}

// read reads f (statSize bytes when opened) to its end and stores its
// content: see readChunks.
//
// Most files of a workspace are smaller than MinChunkSize, hence one
// chunk: such a file is read whole into a buffer of its own that the
// putter keeps as it is, where chunking would have copied every byte twice
// more (into the chunker's buffer, then the blob's). One that grew past
// MinChunkSize meanwhile is read again from the start, chunked.
func (t *taker) read(rel string, f *os.File, statSize int64) (int64, string, []Chunk, error) {
	if statSize < MinChunkSize {
		data, err := readSmall(f, statSize)
		if err != nil {
			return 0, "", nil, pathErr("read", rel, err)
		}
		t.st.ReadBytes += int64(len(data))
		if len(data) < MinChunkSize {
			return t.storeSmall(rel, data)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return 0, "", nil, pathErr("read", rel, err)
		}
	}
	return t.readChunks(rel, f)
}

// readSmall reads f to its end or to MinChunkSize bytes, whichever is
// first, into a buffer made for size bytes (and one more, to see the end).
func readSmall(f io.Reader, size int64) ([]byte, error) {
	data := make([]byte, 0, size+1)
	for len(data) < MinChunkSize {
		if len(data) == cap(data) {
			data = slices.Grow(data, min(cap(data), MinChunkSize))
		}
		n, err := f.Read(data[len(data):min(cap(data), MinChunkSize)])
		data = data[:len(data)+n]
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return data, nil
}

// storeSmall stores the content of a file read whole (less than
// MinChunkSize bytes: one chunk, as readChunks would cut it) and returns
// what readChunks does.
func (t *taker) storeSmall(rel string, data []byte) (int64, string, []Chunk, error) {
	size := int64(len(data))
	if max := t.opts.MaxFileBytes; max > 0 && size > max {
		return 0, "", nil, fmt.Errorf("file %q grew over the limit of %d bytes per file: %w", rel, max, ErrTooLarge)
	}
	d := sha256Hex(data)
	if size == 0 {
		return 0, d, nil, nil
	}
	if err := t.put(d, data, rel, "content", true); err != nil {
		return 0, "", nil, err
	}
	return size, d, []Chunk{{SHA256: d, Size: size}}, nil
}

// readChunks reads f to its end (within MaxFileBytes), storing each chunk,
// and returns the size, the digest of the whole content and the chunks.
func (t *taker) readChunks(rel string, f io.Reader) (int64, string, []Chunk, error) {
	limit := int64(math.MaxInt64)
	if max := t.opts.MaxFileBytes; max > 0 {
		limit = max + 1 // one byte more tells a file that grew past it
	}
	if t.work == nil {
		t.work = chunkWorkPool.Get().(*chunkWork)
	}
	ch := t.work.chunker
	ch.ResetWithBoundaries(io.LimitReader(f, limit), chunkPolynomial, MinChunkSize, MaxChunkSize)
	// Most files are one chunk, whose digest is the whole content's: the
	// content is hashed once. The first chunk is kept (in buf) until a
	// second one shows the file is longer, and only then hashed into whole
	// with the rest (read into next).
	whole := sha256.New()
	var first []byte
	var chunks []Chunk
	var size int64
	for {
		if err := t.ctx.Err(); err != nil {
			return 0, "", nil, err
		}
		buf := t.work.buf
		if len(chunks) > 0 {
			if t.work.next == nil {
				t.work.next = make([]byte, MaxChunkSize)
			}
			buf = t.work.next
		}
		c, err := ch.Next(buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, "", nil, pathErr("read", rel, err)
		}
		size += int64(len(c.Data))
		t.st.ReadBytes += int64(len(c.Data))
		if max := t.opts.MaxFileBytes; max > 0 && size > max {
			return 0, "", nil, fmt.Errorf("file %q grew over the limit of %d bytes per file: %w", rel, max, ErrTooLarge)
		}
		if len(chunks) == 0 {
			first = c.Data
		} else {
			if first != nil {
				whole.Write(first)
				first = nil
			}
			whole.Write(c.Data)
		}
		d := sha256Hex(c.Data)
		if err := t.put(d, c.Data, rel, "content", false); err != nil {
			return 0, "", nil, err
		}
		chunks = append(chunks, Chunk{SHA256: d, Size: int64(len(c.Data))})
	}
	switch len(chunks) {
	case 0:
		return 0, sha256Hex(nil), nil, nil
	case 1:
		return size, chunks[0].SHA256, chunks, nil
	}
	return size, hex.EncodeToString(whole.Sum(nil)), chunks, nil
}

// put stores blob d (the content or the tree of rel) unless this Take, the
// cache or the store has it. It is stored in the background: flush waits.
// owned says that data is the blob's alone (no buffer reused), so the
// putter need not copy it.
func (t *taker) put(d string, data []byte, rel, kind string, owned bool) error {
	if kind == "tree" && rel == "." {
		t.root = data // encodeTree's own: never reused
	}
	if kind == "tree" && t.opts.OnTree != nil {
		t.opts.OnTree(d, data) // encodeTree's own too
	}
	if t.seen[d] {
		return nil
	}
	if t.cache != nil && t.cache.stored(d) {
		t.seen[d] = true
		return nil
	}
	what := fmt.Sprintf("%s of %q", kind, rel)
	if _, ok := t.b.(BatchBlobs); ok && !t.background {
		// An incremental Take's few blobs (a step's file, the trees on
		// its way) are stored at its flush, in one transaction: one
		// commit, not one each. A batch is bounded as the putter's are
		// (a new directory is walked incrementally too): past the
		// bounds, what is kept is stored first.
		if len(t.batch) > 0 && (len(t.batch) >= maxBatchBlobs || t.batchBytes+len(data) > maxBatchBytes) {
			if err := t.storeBatch(); err != nil {
				return err
			}
		}
		if !owned {
			data = append([]byte(nil), data...)
		}
		t.batch = append(t.batch, putJob{digest: d, data: data, what: what})
		t.batchBytes += len(data)
		t.seen[d] = true
		return nil
	}
	if !t.background {
		stored, err := storeBlob(t.ctx, t.b, t.cache, d, data, what)
		if err != nil {
			return err
		}
		if stored {
			t.st.NewBlobs++
			t.st.NewBytes += int64(len(data))
		}
		t.seen[d] = true
		return nil
	}
	if t.puts == nil {
		t.puts = newPutter(t.ctx, t.b, t.cache)
	}
	if err := t.puts.put(d, data, what, owned); err != nil {
		return err
	}
	t.seen[d] = true
	return nil
}

// isKind reports whether name of d is (now) of the given type: 0 for a
// regular file, fs.ModeDir for a directory.
func isKind(d *os.Root, name string, typ fs.FileMode) bool {
	fi, err := d.Lstat(name)
	return err == nil && fi.Mode().Type() == typ
}

// listDir lists directory d (rel in the workspace), sorted by name,
// watching it first if the Take watches: a change after the watch is
// reported, one before it is in the listing.
func (t *taker) listDir(d *os.Root, rel string) ([]string, error) {
	if !t.watching || t.emptyOnly && rel != "." {
		return readDirNames(d, ".")
	}
	f, err := d.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t.watching = t.cache.addWatch(t.rootPath, t.gen, f, rel)
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	if t.emptyOnly && len(names) > 0 {
		t.stopEmptyWatch()
	}
	slices.Sort(names)
	return names, nil
}

// stopEmptyWatch stops watching the workspace, watched only while empty,
// and this Take's watching (Cache.stopEmptyWatch).
func (t *taker) stopEmptyWatch() {
	if t.watching {
		t.cache.stopEmptyWatch(t.rootPath, t.gen)
		t.watching = false
	}
}

// readDirNames lists directory rel of r, sorted by name (bytes).
func readDirNames(r *os.Root, rel string) ([]string, error) {
	f, err := r.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// joinRel joins a "/"-separated workspace path and a name (a single
// component, so no cleaning is needed).
func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// pathErr says what failed on which workspace path, without the host path
// that os errors carry; the cause stays in the chain for errors.Is.
func pathErr(op, rel string, err error) error {
	return fmt.Errorf("%s %q: %w", op, rel, stripPath(err))
}

// stripPath removes the *fs.PathError and *os.LinkError layers (whose
// messages carry paths) around a cause.
func stripPath(err error) error {
	for {
		var pe *fs.PathError
		var le *os.LinkError
		switch {
		case errors.As(err, &pe) && pe.Err != nil:
			err = pe.Err
		case errors.As(err, &le) && le.Err != nil:
			err = le.Err
		default:
			return err
		}
	}
}

// TakeEmpty is Take of a workspace with nothing in it, without one: it
// stores the empty tree under opts (unless opts.Cache or the store has it)
// and returns its id, EmptyID's. A workspace whose directory was never
// made is such a workspace, and its snapshot costs no directory.
func TakeEmpty(ctx context.Context, b Blobs, opts Options) (string, Stats, error) {
	if b == nil {
		return "", Stats{}, errors.New("snapshot: blobs is nil")
	}
	excludes, err := opts.validate(b)
	if err != nil {
		return "", Stats{}, fmt.Errorf("snapshot options: %w", err)
	}
	data, id, err := encodeTree(&tree{V: formatVersion, Entries: make([]treeEntry, 0), Exclude: excludes})
	if err != nil {
		return "", Stats{}, err
	}
	var st Stats
	if opts.Cache == nil || !opts.Cache.stored(id) {
		stored, err := storeBlob(ctx, b, opts.Cache, id, data, `tree of "."`)
		if err != nil {
			return "", Stats{}, err
		}
		if stored {
			st.NewBlobs, st.NewBytes = 1, int64(len(data))
		}
	}
	if k, ok := b.(RootKeeper); ok {
		k.KeepRoot(id, data)
	}
	return id, st, nil
}

// EmptyID returns the id Take gives a workspace with nothing in it under
// opts (the root tree lists the excluded prefixes, so the id depends on
// them), without storing anything: to tell a snapshot of an empty
// workspace by its id.
func EmptyID(opts Options) (string, error) {
	excludes, err := cleanExcludes(opts.Exclude)
	if err != nil {
		return "", fmt.Errorf("snapshot options: %w", err)
	}
	_, id, err := encodeTree(&tree{V: formatVersion, Entries: make([]treeEntry, 0), Exclude: excludes})
	return id, err
}
