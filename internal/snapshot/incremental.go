package snapshot

import (
	"container/list"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Incremental snapshots.
//
// A Take with a Cache leaves, per workspace, a record of what it found:
// every directory's tree with its digest and the counts below it. When the
// only writes to the workspace since were told to the Cache (NoteWrites:
// write_file, edit_file, a person's upload), the next Take starts from that
// record and looks at the written paths and their parent directories only:
// its cost is that of the change, whatever the size of the workspace.
//
// Anything else makes the next Take walk the whole workspace (still
// skipping the files the stat cache vouches for): a writer the Cache was
// not told about (BeginUnknownWrites: a shell command), unless the Cache
// watches the workspace (watch.go), a restore (Forget),
// a record from another Take that overlapped, a workspace directory that
// was replaced, other options, or anything unusual on a written path (a
// symlink on it, a file with other names, a special file). The record lives
// in this process's memory only, so after a crash, or on another node, the
// first Take walks.

// maxDirtyPaths is how many written paths a record follows; past it the
// next Take walks, which is then about as cheap.
const maxDirtyPaths = 4096

// errNotIncremental: the record cannot vouch for the workspace; the Take
// walks instead.
var errNotIncremental = errors.New("the previous snapshot's record does not apply")

// rootState is what the Cache knows of one workspace.
type rootState struct {
	rec *rootRecord // nil: the next Take walks
	// dirty lists the paths written since rec was taken: true for a
	// path told by NoteWrites, false for one the watches reported.
	dirty map[string]bool
	// unknown counts the writers in progress whose writes are unknown;
	// while there is one, no record is kept.
	unknown int
	// gen changes whenever a record could go stale (a Take starts, a
	// writer of unknown paths starts or ends, a restore): a Take keeps its
	// record only if gen is still the one it started with.
	gen uint64
	// lru is rec's place in Cache.recLRU (nil without a record), for
	// dropping the least recently used record.
	lru *list.Element
	key string // the workspace, as rootKey names it
	// watching: the directories of the record (or of the walk that
	// makes it) are watched, so unknown writers need not make the next
	// Take walk; watchFailed: the watches ran out, this workspace is not
	// watched again (watch.go).
	watching    bool
	watchFailed bool
	// emptyOnly: watched only while the workspace directory is empty
	// (CacheConfig.WatchEmptyRoots), its subdirectories never.
	emptyOnly bool
}

// rootRecord is the result of a Take, per directory.
type rootRecord struct {
	id      string // the snapshot
	dev     uint64 // of the workspace directory: a replaced one is walked
	ino     uint64
	options string // the options that shaped it
	dirs    map[string]*dirRecord
	// broken is set when a directory could not be recorded: the record
	// is not kept.
	broken bool
	// entries counts the entries of all its trees, for the Cache's bound.
	entries int
}

// empty reports whether the record is of a workspace directory that holds
// nothing: no entry, none skipped, and no exclusion that could hide one.
func (r *rootRecord) empty() bool {
	d := r.dirs["."]
	return d != nil && len(d.tree.Entries) == 0 && d.skipped == 0 && len(d.tree.Exclude) == 0
}

// dirRecord is one directory of a rootRecord.
type dirRecord struct {
	tree   tree
	digest string
	// below counts the files, directories, symlinks, bytes and skipped
	// special files under the directory (not the directory itself).
	below Stats
	// skipped counts its own entries that were skipped: one of them may be
	// a written path, whose old state is then unknown.
	skipped int
}

// NoteWrites tells the Cache that paths (workspace-relative, "/"-separated,
// clean) of the workspace root are being, or were, written: the next
// incremental Take reads them again. Call it before the write and again
// after, so that a Take that ran in between does not hide the write. An
// unclean path makes the next Take walk.
func (c *Cache) NoteWrites(root string, paths ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.roots[rootKey(root)]
	if s == nil {
		return // no record, and no Take in progress that would leave one
	}
	for _, p := range paths {
		if p == "." || p == "" || path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." || path.IsAbs(p) || len(s.dirty) >= maxDirtyPaths {
			c.forgetLocked(s)
			return
		}
		s.dirty[p] = true
	}
}

// BeginUnknownWrites tells the Cache that something may now write anywhere
// in the workspace root (a shell command): until end is called, and for the
// next Take after, Take walks the workspace, unless the Cache watches it
// (CacheConfig.Watch): then the kernel tells it what the writer changed.
func (c *Cache) BeginUnknownWrites(root string) (end func()) {
	key := rootKey(root)
	c.mu.Lock()
	s := c.state(key)
	s.unknown++
	if !s.watching {
		c.forgetLocked(s)
	}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		s.unknown--
		if !s.watching {
			c.forgetLocked(s)
		}
	}
}

// Forget makes the next Take of root walk the workspace: call it when the
// workspace is changed other than by the writes told by NoteWrites (a
// restore, a fork into it, a removal).
func (c *Cache) Forget(root string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(c.state(rootKey(root)))
}

func (c *Cache) forgetLocked(s *rootState) {
	c.unwatchLocked(s)
	c.takeRecLocked(s)
	s.gen = c.nextGen()
	clear(s.dirty)
}

// nextGen returns a generation never given before: a state dropped and
// made again never gives a Take in progress the generation it started
// with; c.mu is held.
func (c *Cache) nextGen() uint64 {
	c.gens++
	return c.gens
}

// state returns root's state, created if missing; c.mu is held.
func (c *Cache) state(key string) *rootState {
	s := c.roots[key]
	if s == nil {
		s = &rootState{dirty: make(map[string]bool), key: key}
		c.roots[key] = s
	}
	if s.lru != nil {
		c.recLRU.MoveToFront(s.lru)
	}
	return s
}

// keepRecLocked makes rec root state s's record, the most recently used;
// c.mu is held.
func (c *Cache) keepRecLocked(s *rootState, rec *rootRecord) {
	c.takeRecLocked(s)
	s.rec = rec
	s.lru = c.recLRU.PushFront(s)
	c.recEntries += rec.entries
}

// takeRecLocked removes s's record, if any, and returns it; c.mu is held.
func (c *Cache) takeRecLocked(s *rootState) *rootRecord {
	rec := s.rec
	if s.lru != nil {
		c.recLRU.Remove(s.lru)
		s.lru = nil
		c.recEntries -= rec.entries
	}
	s.rec = nil
	return rec
}

// startTake takes root's record out (a Take overlapping this one walks)
// with the paths written since, and returns the generation that the Take's
// own record must find to be kept. rec is nil when the Take must walk;
// watching tells the Take to watch the directories it lists.
func (c *Cache) startTake(root string) (rec *rootRecord, dirty map[string]bool, gen uint64, watching bool) {
	rec, dirty, gen, watching, _ = c.startWatchedTake(root)
	return rec, dirty, gen, watching
}

// startWatchedTake is startTake, telling also whether only the workspace
// directory is to be watched (CacheConfig.WatchEmptyRoots).
func (c *Cache) startWatchedTake(root string) (rec *rootRecord, dirty map[string]bool, gen uint64, watching, emptyOnly bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainLocked() // the changes so far are among the dirty paths
	s := c.state(root)
	rec = c.takeRecLocked(s)
	dirty = maps.Clone(s.dirty)
	clear(s.dirty)
	s.gen = c.nextGen()
	if s.unknown > 0 && !s.watching {
		rec = nil
	}
	if rec == nil && !s.watchFailed {
		// A walk: its watches are set up afresh as it lists.
		c.unwatchLocked(s)
		s.watching = c.ensureInotifyLocked()
		s.emptyOnly = s.watching && !c.watchOn
	}
	return rec, dirty, s.gen, s.watching, s.emptyOnly
}

// endTake keeps rec as root's record unless something could have made it
// stale since startTake returned gen. linked tells that the Take found a
// file with other names, whose writes through them no watch reports.
func (c *Cache) endTake(root string, rec *rootRecord, gen uint64, linked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.roots[root]
	if s != nil && s.gen == gen && s.watching && (linked || s.emptyOnly && !rec.empty()) {
		c.drainLocked() // applied while still watched: the record may be kept
		c.unwatchLocked(s)
	}
	if s == nil || s.gen != gen || (s.unknown > 0 && !s.watching) {
		return
	}
	rec.entries = 0
	for _, d := range rec.dirs {
		rec.entries += len(d.tree.Entries)
	}
	c.keepRecLocked(s, rec)
	// Bound the records kept, by their entries like the files' digests
	// (MaxFiles) and by their number, least recently used out. Every
	// checkpoint of every session comes here, under the lock every Take
	// of the node takes: the totals are kept as records come and go, and
	// the least recently used is the list's last, so this costs nothing
	// per workspace of the node.
	for c.recEntries > c.maxFiles || c.recLRU.Len() > c.maxRecords {
		c.forgetLocked(c.recLRU.Back().Value.(*rootState))
	}
	// States that hold nothing (no record, no writes told or under way,
	// no watch) are dropped, in one sweep each time their number doubled.
	if len(c.roots) >= c.sweepAt {
		for k, o := range c.roots {
			if o.rec == nil && o.unknown == 0 && len(o.dirty) == 0 && o != s && !o.watching {
				delete(c.roots, k)
			}
		}
		c.sweepAt = max(2*len(c.roots), minSweep(c.maxRecords))
	}
}

// minSweep is the fewest workspace states at which endTake sweeps, for a
// Cache that keeps maxRecords records.
func minSweep(maxRecords int) int { return 4 * maxRecords }

// rootKey is how the Cache names a workspace: its absolute path.
func rootKey(root string) string {
	if abs, err := filepath.Abs(root); err == nil {
		return abs
	}
	return root
}

// optionsKey says what in Options shapes a record: a record made under
// other limits or exclusions is not reused.
func (t *taker) optionsKey() string {
	var b strings.Builder
	b.WriteString(strings.Join(t.excludes, "\x00"))
	b.WriteString("\x01")
	b.WriteString(strconv.FormatInt(t.opts.MaxFileBytes, 10))
	b.WriteString("\x01")
	b.WriteString(strconv.FormatInt(t.opts.MaxTotalBytes, 10))
	return b.String()
}

// incremental takes the snapshot from base and the paths written since:
// only the written paths and the directories holding them are read again.
// It returns errNotIncremental when base cannot vouch for the rest.
func (t *taker) incremental(r *os.Root, base *rootRecord, dirty map[string]bool) (string, error) {
	if base.options != t.optionsKey() || base.dev != t.rec.dev || base.ino != t.rec.ino {
		return "", errNotIncremental
	}
	if len(dirty) == 0 {
		// Nothing written: the same snapshot. Its trees are stored
		// already; the record is kept as it is.
		t.rec = base
		t.st = base.dirs["."].below
		return base.id, nil
	}
	// children[d] lists the names in directory d to look at again: the
	// written paths and the directories on the way to them.
	children := make(map[string]map[string]bool)
	written := make(map[string]bool)
	for p, told := range dirty {
		if excluded(t.excludes, p) {
			continue
		}
		written[p] = told
		dir := "."
		for _, name := range strings.Split(p, "/") {
			if children[dir] == nil {
				children[dir] = make(map[string]bool)
			}
			children[dir][name] = true
			dir = joinRel(dir, name)
		}
	}
	t.rec.dirs = base.dirs // updated in place: base was taken out of the Cache
	digest, err := t.rebuild(r, ".", 0, children, written)
	if err != nil {
		return "", err
	}
	t.st.Files, t.st.Dirs, t.st.Symlinks, t.st.Bytes, t.st.Skipped = addBelow(Stats{}, t.rec.dirs["."].below)
	if max := t.opts.MaxTotalBytes; max > 0 && t.st.Bytes > max {
		return "", errNotIncremental // the walk names the file that crossed it
	}
	return digest, nil
}

// rebuild stores directory rel (open as d) anew from its record, looking
// again at the names children lists, and returns its digest. written holds
// the paths written, true for those told by NoteWrites.
func (t *taker) rebuild(d *os.Root, rel string, depth int, children map[string]map[string]bool, written map[string]bool) (string, error) {
	if depth >= maxDepth {
		return "", errNotIncremental
	}
	if err := t.ctx.Err(); err != nil {
		return "", err
	}
	old := t.rec.dirs[rel]
	if old == nil {
		return "", errNotIncremental
	}
	names := make([]string, 0, len(children[rel]))
	for name := range children[rel] {
		names = append(names, name)
	}
	slices.Sort(names)
	entries := slices.Clone(old.tree.Entries)
	skipped := old.skipped
	for _, name := range names {
		p := joinRel(rel, name)
		if excluded(t.excludes, p) {
			continue
		}
		i, found, err := findEntry(entries, name)
		if err != nil {
			return "", err
		}
		var prev treeEntry
		if found {
			prev = entries[i]
			entries = slices.Delete(entries, i, i+1)
		} else if skipped > 0 {
			return "", errNotIncremental // it may have been one of them
		}
		fi, err := d.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", pathErr("stat", p, err)
		}
		if !found {
			// A new name must be one the directory lists: on a file
			// system that ignores case, "A" may be the existing "a".
			if listed, err := readDirNames(d, "."); err != nil || !slices.Contains(listed, name) {
				return "", errNotIncremental
			}
		}
		var te treeEntry
		encodeText(name, &te.Name, &te.NameB64)
		_, onTheWay := children[p]
		switch mode := fi.Mode(); {
		case mode.IsDir():
			sub, err := t.openSubdir(d, name, p)
			if err != nil {
				return "", err
			}
			var digest string
			_, isWritten := written[p]
			if rec := t.rec.dirs[p]; onTheWay && !isWritten && prev.Type == TypeDir && rec != nil && rec.digest == prev.Tree {
				digest, err = t.rebuild(sub, p, depth+1, children, written)
			} else {
				// New, or written as a whole: walked (and recorded).
				digest, err = t.dir(sub, p, depth+1)
			}
			sub.Close()
			if err != nil {
				return "", err
			}
			te.Type, te.Mode, te.Tree = TypeDir, uint32(mode.Perm()), digest
		case mode.IsRegular():
			if id, ok := identify(fi); !ok || id.nlink > 1 {
				// Written through another name, the others changed too.
				return "", errNotIncremental
			}
			t.fresh = true
			ok, err := t.file(d, name, p, fi, &te)
			t.fresh = false
			if err != nil {
				return "", err
			}
			if !ok {
				return "", errNotIncremental
			}
		case mode&fs.ModeSymlink != 0 && seenOnly(written, p):
			// A link the watches saw made: the link itself changed
			// (a write through it is reported where it lands).
			target, err := d.Readlink(name)
			if err != nil {
				return "", errNotIncremental
			}
			te.Type = TypeSymlink
			encodeText(target, &te.Target, &te.TargetB64)
		default:
			// A symlink on a path told written: the write went
			// through it to another path. Special files are rare
			// enough to walk.
			return "", errNotIncremental
		}
		j, _, _ := findEntry(entries, name)
		entries = slices.Insert(entries, j, te)
	}
	tr := tree{V: formatVersion, Entries: entries}
	if rel == "." {
		tr.Exclude = t.excludes
	}
	data, digest, err := encodeTree(&tr)
	if err != nil {
		return "", err
	}
	if err := t.put(digest, data, rel, "tree", false); err != nil {
		return "", err
	}
	below := Stats{Skipped: skipped}
	for _, e := range entries {
		switch e.Type {
		case TypeFile:
			below.Files++
			below.Bytes += e.Size
		case TypeSymlink:
			below.Symlinks++
		case TypeDir:
			name, err := e.name()
			if err != nil {
				return "", err
			}
			sub := t.rec.dirs[joinRel(rel, name)]
			if sub == nil || sub.digest != e.Tree {
				return "", errNotIncremental
			}
			below.Dirs++
			below.Files, below.Dirs, below.Symlinks, below.Bytes, below.Skipped = addBelow(below, sub.below)
		}
	}
	t.rec.dirs[rel] = &dirRecord{tree: tr, digest: digest, below: below, skipped: skipped}
	return digest, nil
}

// seenOnly reports whether path p was reported by the watches and not told
// by NoteWrites.
func seenOnly(written map[string]bool, p string) bool {
	told, ok := written[p]
	return ok && !told
}

// openSubdir opens directory name of d, as subdir does, or says the record
// cannot be used.
func (t *taker) openSubdir(d *os.Root, name, rel string) (*os.Root, error) {
	sub, err := d.OpenRoot(name)
	if err != nil {
		return nil, errNotIncremental
	}
	if fi, err := d.Lstat(name); err != nil || !fi.IsDir() {
		sub.Close()
		return nil, errNotIncremental
	}
	return sub, nil
}

// findEntry finds name in entries, sorted by name, or where it belongs.
func findEntry(entries []treeEntry, name string) (int, bool, error) {
	var bad error
	i, found := slices.BinarySearchFunc(entries, name, func(e treeEntry, name string) int {
		n, err := e.name()
		if err != nil {
			bad = err
		}
		return strings.Compare(n, name)
	})
	return i, found, bad
}

// addBelow returns the counts of a and b added up.
func addBelow(a, b Stats) (files, dirs, symlinks int, bytes int64, skipped int) {
	return a.Files + b.Files, a.Dirs + b.Dirs, a.Symlinks + b.Symlinks, a.Bytes + b.Bytes, a.Skipped + b.Skipped
}

// recordDir keeps, during a walk, the tree of directory rel and the counts
// below it (the difference of the Take's counts since before was read).
func (t *taker) recordDir(rel string, tr *tree, digest string, before Stats) {
	if t.rec == nil {
		return
	}
	var below Stats
	below.Files = t.st.Files - before.Files
	below.Dirs = t.st.Dirs - before.Dirs
	below.Symlinks = t.st.Symlinks - before.Symlinks
	below.Bytes = t.st.Bytes - before.Bytes
	below.Skipped = t.st.Skipped - before.Skipped
	// Its own skipped entries are those not below a subdirectory.
	skipped := below.Skipped
	for _, e := range tr.Entries {
		if e.Type != TypeDir {
			continue
		}
		name, err := e.name()
		sub := t.rec.dirs[joinRel(rel, name)]
		if err != nil || sub == nil {
			t.rec.broken = true
			return
		}
		skipped -= sub.below.Skipped
	}
	t.rec.dirs[rel] = &dirRecord{tree: *tr, digest: digest, below: below, skipped: skipped}
}
