//go:build linux

package sandbox

import (
	"cmp"
	"errors"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/longhaul-dev/longhaul/internal/inotify"
)

// Workspace usage, kept up to date.
//
// The quota measures a workspace before every file tool's write, around
// every command and every diskPoll while one runs. Walking the workspace
// each time costs O(workspace): 40 ms per write_file in a 15,000-file tree.
// So the first measure of a workspace walks it as scanWorkspace does,
// keeping a record (every entry's inode and usage, per inode its names)
// and an inotify watch on every directory, added through the directory's
// descriptor before it is listed; every later measure reads the kernel's
// events and stats again only the paths they name (and the directories
// holding them, whose size grows with their entries). Whatever writes —
// the engine's file tools, a person's upload, a sandboxed command through
// the bind mount, a process it left running — the kernel reports it here.
//
// The record is trusted only while the events can vouch for it; otherwise
// the measure walks again, as before this record existed:
//   - the kernel's queue overflowed (events lost), or reading it failed;
//   - a directory was moved in or out (the watches below it name old
//     paths), or the workspace directory itself was removed or moved, or
//     replaced (another device and inode);
//   - more than maxUsageDirty paths changed between two measures;
//   - a path could not be stat'ed again (but that it is gone), or one
//     named under a directory the record does not hold;
//   - a file has a name the record does not hold (nlink above the names
//     seen: a hard link from outside the workspace, whose writes no watch
//     here reports); the measure after each such one walks;
//   - the watches ran out (maxUsageWatches, or the user's
//     max_user_watches), or the workspace has more than maxUsageEntries
//     entries: that workspace is walked at every measure from then on.
//
// inotify does not report every write. A write through a shared mapping
// cannot grow a file past its size, which the measure counts already (max
// of size and blocks). A Linux AIO write (io_submit) raises no event while
// the file stays open, and can grow it: the bwrap sandbox's seccomp filter
// denies Linux AIO, and a running command's monitor walks the workspace at
// every diskWalkEvery-th measure (quota.go), so growth the events miss, by
// whatever path, is caught within that bound. A file deleted while open is
// counted by neither the walk nor the record.

// Bounds of the tracker (all workspaces of this process).
const (
	maxUsageSpaces  = 64
	maxUsageWatches = 100_000
	maxUsageEntries = 200_000
	maxUsageDirty   = 8192
)

// usage is this process's tracker; every backend's workspaces share it.
var usage = &usageTracker{
	spaces:  map[string]*spaceUsage{},
	watches: map[int32][]usageWatch{},
}

type usageTracker struct {
	mu sync.Mutex
	// ino is opened by the first measure; off: it cannot be, so every
	// measure walks.
	ino      *inotify.Instance
	off      bool
	watches  map[int32][]usageWatch
	nWatches int
	spaces   map[string]*spaceUsage
	clock    uint64
}

// usageWatch is where a watched directory is.
type usageWatch struct {
	s   *spaceUsage
	rel string
}

type inodeKey [2]uint64 // device, inode

// spaceUsage is the record of one workspace.
type spaceUsage struct {
	key string
	// measuring is held by a measure: one at a time per workspace.
	measuring sync.Mutex

	// Under usageTracker.mu. valid: the record and dirty account for
	// every change since the last measure; dirty: the paths the events
	// named since; wds: the watch of each directory of the record;
	// untracked: walked at every measure (watches or entries ran out).
	valid     bool
	dirty     map[string]struct{}
	wds       map[string]int32
	untracked bool
	used      uint64
	n         int // entries in the record at the end of the last measure
	walks     int // how many times it was walked (tests)

	// Under measuring.
	entries map[string]usageEntry
	kids    map[string]map[string]struct{} // a directory's names in entries
	inodes  map[inodeKey]*inodeUsage
	linked  map[inodeKey]struct{} // inodes with nlink > 1
	total   int64
	root    inodeKey
	// dirsGone: directories left the record; their watches, if the
	// kernel has not dropped them yet, are removed after the update.
	dirsGone bool
	// ungiven: paths a measure without an owner (a write's check, a
	// command's monitor) stat'ed again for their events, and so took
	// from the next measure with an owner, which must still give them to
	// the sandbox's user; ungivenAll: one without an owner walked (or
	// walked a new directory), so the next with an owner walks.
	ungiven    map[string]struct{}
	ungivenAll bool
}

// usageEntry is one name of the record; a directory's usage is its own
// (directories have one name), a file's is its inode's.
type usageEntry struct {
	key   inodeKey
	dir   bool
	bytes int64
}

type inodeUsage struct {
	bytes int64
	names int
	nlink uint64
}

// measureWorkspace returns what scanWorkspace would: the usage of the
// workspace ws (and gives owner, when set, what it does not own), from the
// tracker's record when the events vouch for it.
func measureWorkspace(ws string, owner *ids) (int64, error) {
	return usage.measure(ws, owner, false)
}

// walkWorkspace walks the workspace ws as scanWorkspace does, and keeps
// what it found as the tracker's record.
func walkWorkspace(ws string, owner *ids) (int64, error) {
	return usage.measure(ws, owner, true)
}

func (t *usageTracker) measure(ws string, owner *ids, walk bool) (int64, error) {
	key := ws
	if abs, err := filepath.Abs(ws); err == nil {
		key = abs
	}
	t.mu.Lock()
	if !t.openLocked() {
		t.mu.Unlock()
		return scanWorkspace(ws, owner)
	}
	s := t.spaceLocked(key)
	t.mu.Unlock()

	s.measuring.Lock()
	defer s.measuring.Unlock()
	t.mu.Lock()
	t.drainLocked()
	valid, untracked := s.valid && t.spaces[key] == s, s.untracked
	dirty := s.dirty
	s.dirty = map[string]struct{}{}
	t.mu.Unlock()
	if owner != nil {
		if s.ungivenAll {
			walk = true
		}
		for p := range s.ungiven {
			dirty[p] = struct{}{}
		}
		s.ungiven, s.ungivenAll = nil, false
	}
	if untracked {
		s.drop()
		t.mu.Lock()
		t.unwatchLocked(s, "")
		t.mu.Unlock()
		return scanWorkspace(ws, owner)
	}
	if valid && !walk {
		if used, ok := t.update(s, ws, owner, dirty); ok {
			if owner == nil {
				s.keepUngiven(dirty)
			}
			t.bound(s)
			return used, nil
		}
	}
	used, err := t.rescan(s, ws, owner)
	if owner == nil {
		s.ungiven, s.ungivenAll = nil, true
	}
	t.bound(s)
	return used, err
}

// keepUngiven adds the paths a measure without an owner consumed to those
// the next measure with one gives away; past maxUsageDirty, that one walks.
// s.measuring is held.
func (s *spaceUsage) keepUngiven(paths map[string]struct{}) {
	if s.ungivenAll {
		return
	}
	if len(s.ungiven)+len(paths) > maxUsageDirty {
		s.ungiven, s.ungivenAll = nil, true
		return
	}
	if s.ungiven == nil {
		s.ungiven = map[string]struct{}{}
	}
	for p := range paths {
		s.ungiven[p] = struct{}{}
	}
}

// openLocked opens the inotify instance if it is not yet; it reports
// whether there is one. t.mu is held.
func (t *usageTracker) openLocked() bool {
	if t.ino != nil {
		return true
	}
	if t.off {
		return false
	}
	ino, err := inotify.Open()
	if err != nil {
		t.off = true // not supported, or the user's instances ran out
		return false
	}
	t.ino = ino
	return true
}

// spaceLocked returns key's record, made if missing, dropping the least
// recently used past maxUsageSpaces. t.mu is held.
func (t *usageTracker) spaceLocked(key string) *spaceUsage {
	t.clock++
	s := t.spaces[key]
	if s == nil {
		s = &spaceUsage{key: key, dirty: map[string]struct{}{}, wds: map[string]int32{}}
		t.spaces[key] = s
		for len(t.spaces) > maxUsageSpaces {
			var old *spaceUsage
			for _, o := range t.spaces {
				if o != s && (old == nil || o.used < old.used) {
					old = o
				}
			}
			t.forgetLocked(old)
		}
	}
	s.used = t.clock
	return s
}

// forgetLocked drops s from the tracker with its watches; a measure
// holding it finishes by walking. t.mu is held.
func (t *usageTracker) forgetLocked(s *spaceUsage) {
	s.valid = false
	t.unwatchLocked(s, "")
	if t.spaces[s.key] == s {
		delete(t.spaces, s.key)
	}
}

// bound keeps the tracker's records within maxUsageEntries: the least
// recently used other workspaces are dropped first, then s is walked at
// every measure.
func (t *usageTracker) bound(s *spaceUsage) {
	n := len(s.entries)
	t.mu.Lock()
	defer t.mu.Unlock()
	s.n = n
	if n > maxUsageEntries {
		s.untracked = true
		t.unwatchLocked(s, "")
		s.valid = false
		return
	}
	total := 0
	var others []*spaceUsage
	for _, o := range t.spaces {
		if o != s {
			total += o.n
			others = append(others, o)
		}
	}
	slices.SortFunc(others, func(a, b *spaceUsage) int { return cmp.Compare(a.used, b.used) })
	for _, o := range others {
		if total+n <= maxUsageEntries {
			break
		}
		total -= o.n
		t.forgetLocked(o)
	}
}

// drainLocked applies the events queued so far. t.mu is held.
func (t *usageTracker) drainLocked() {
	if t.ino == nil {
		return
	}
	if err := t.ino.Read(t.handleLocked); err != nil {
		for _, s := range t.spaces {
			t.forgetLocked(s)
		}
		t.ino.Close()
		t.ino = nil
		clear(t.watches)
		t.nWatches = 0
	}
}

// handleLocked applies one event. t.mu is held.
func (t *usageTracker) handleLocked(ev inotify.Event) {
	if ev.Overflow {
		for _, s := range t.spaces {
			s.valid = false
		}
		return
	}
	locs, known := t.watches[ev.Wd]
	if ev.Ignored && known {
		// The kernel dropped the watch (its directory is gone): the
		// directory is stat'ed again, and walked if it is still there.
		delete(t.watches, ev.Wd)
		t.nWatches--
		for _, l := range locs {
			if l.s.wds[l.rel] == ev.Wd {
				delete(l.s.wds, l.rel)
			}
		}
	}
	var gone []usageWatch
	for _, l := range locs {
		s := l.s
		switch {
		case (ev.Ignored || ev.SelfGone) && l.rel == ".":
			gone = append(gone, l) // the workspace itself is gone
		case !s.valid:
		case ev.DirMoved:
			s.valid = false
		case ev.Ignored || ev.SelfGone:
			// Removed: the watch goes with it, so that a directory made
			// in its place, even on the same inode, is walked.
			gone = append(gone, l)
			s.markDirty(l.rel)
		default:
			s.markDirty(l.rel) // its own size follows its entries
			if ev.Name != "" {
				s.markDirty(path.Join(l.rel, ev.Name))
			}
		}
	}
	for _, l := range gone {
		if l.rel == "." {
			t.forgetLocked(l.s)
		} else if wd, ok := l.s.wds[l.rel]; ok && wd == ev.Wd {
			t.unwatchOneLocked(l.s, l.rel, wd)
		}
	}
}

// markDirty adds p to the paths to stat again. t.mu is held.
func (s *spaceUsage) markDirty(p string) {
	if len(s.dirty) >= maxUsageDirty {
		s.valid = false
		return
	}
	s.dirty[p] = struct{}{}
}

// addWatch watches the directory open as fd, at rel in s, before it is
// listed; it reports false when it could not (s is then walked at the
// next measure, or at every one once the watches ran out).
func (t *usageTracker) addWatch(s *spaceUsage, fd int, rel string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ino == nil || t.spaces[s.key] != s || s.untracked {
		return false
	}
	if t.nWatches >= maxUsageWatches {
		s.untracked = true
		return false
	}
	wd, err := t.ino.AddFd(fd)
	if err != nil {
		if inotify.IsWatchLimit(err) {
			s.untracked = true
		}
		return false
	}
	if old, ok := s.wds[rel]; ok && old != wd {
		t.unwatchOneLocked(s, rel, old)
	}
	loc := usageWatch{s, rel}
	if !slices.Contains(t.watches[wd], loc) {
		if len(t.watches[wd]) == 0 {
			t.nWatches++
		}
		t.watches[wd] = append(t.watches[wd], loc)
	}
	s.wds[rel] = wd
	return true
}

// unwatchLocked removes s's watches of rel and below ("": all of them).
// t.mu is held.
func (t *usageTracker) unwatchLocked(s *spaceUsage, rel string) {
	for r, wd := range s.wds {
		if rel == "" || r == rel || strings.HasPrefix(r, rel+"/") {
			t.unwatchOneLocked(s, r, wd)
		}
	}
}

func (t *usageTracker) unwatchOneLocked(s *spaceUsage, rel string, wd int32) {
	delete(s.wds, rel)
	kept := slices.DeleteFunc(t.watches[wd], func(l usageWatch) bool { return l.s == s && l.rel == rel })
	if len(kept) > 0 {
		t.watches[wd] = kept
		return
	}
	if _, ok := t.watches[wd]; !ok {
		return
	}
	delete(t.watches, wd)
	t.nWatches--
	if t.ino != nil {
		t.ino.Remove(wd)
	}
}

// watched reports whether directory rel of s still has its watch.
func (t *usageTracker) watched(s *spaceUsage, rel string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := s.wds[rel]
	return ok
}

// invalidate makes the next measure of s walk.
func (t *usageTracker) invalidate(s *spaceUsage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.valid = false
}

// drop empties s's record. s.measuring is held.
func (s *spaceUsage) drop() {
	s.entries, s.kids, s.inodes, s.linked, s.total = nil, nil, nil, nil, 0
}

// rescan walks the workspace as scanWorkspace does, making s's record and
// watches anew. The usage it returns is the walk's own.
func (t *usageTracker) rescan(s *spaceUsage, ws string, owner *ids) (int64, error) {
	t.mu.Lock()
	s.walks++
	t.unwatchLocked(s, "")
	clear(s.dirty)
	s.valid = true // events from the first watch on may unset it
	t.mu.Unlock()
	s.drop()
	s.entries = map[string]usageEntry{}
	s.kids = map[string]map[string]struct{}{}
	s.inodes = map[inodeKey]*inodeUsage{}
	s.linked = map[inodeKey]struct{}{}

	fd, st, err := openWorkspaceDir(ws, owner)
	if err != nil {
		t.invalidate(s)
		s.drop()
		return scanWorkspace(ws, owner) // says why, as before
	}
	s.root = statKey(&st)
	watchedAll := true
	sc := t.recorder(s, owner, &watchedAll)
	sc.count(&st)
	s.put(".", &st)
	err = sc.walk(fd, 0)
	if err != nil || !watchedAll || sc.total != s.total || !s.linksHeld() {
		// The record cannot vouch (or disagrees with the walk, which
		// would be a bug here): the next measure walks again.
		t.invalidate(s)
		if err != nil || sc.total != s.total {
			s.drop()
		}
	}
	return sc.total, err
}

// update applies the paths the events named to s's record; false: the
// record cannot vouch, the caller walks.
func (t *usageTracker) update(s *spaceUsage, ws string, owner *ids, dirty map[string]struct{}) (int64, bool) {
	if s.entries == nil {
		return 0, false
	}
	fd, st, err := openWorkspaceDir(ws, owner)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	if statKey(&st) != s.root {
		return 0, false // replaced: walked
	}
	s.put(".", &st)
	paths := make([]string, 0, len(dirty))
	for p := range dirty {
		if p != "." {
			paths = append(paths, p)
		}
	}
	// A directory before what is in it: a new one is walked whole first.
	slices.Sort(paths)
	for _, p := range paths {
		if !t.restat(s, fd, p, owner) {
			return 0, false
		}
	}
	if s.dirsGone {
		s.dirsGone = false
		t.mu.Lock()
		for rel, wd := range s.wds {
			if e, ok := s.entries[rel]; !ok || !e.dir {
				t.unwatchOneLocked(s, rel, wd)
			}
		}
		t.mu.Unlock()
	}
	if !s.linksHeld() {
		// Right now, but a write through the other name would not be
		// reported: the next measure walks.
		t.invalidate(s)
	}
	return s.total, true
}

// restat stats path p of the workspace (open as root) again and updates the
// record; false: it cannot.
func (t *usageTracker) restat(s *spaceUsage, root int, p string, owner *ids) bool {
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	pfd := root
	if dir != "" {
		if e, ok := s.entries[dir]; !ok || !e.dir {
			// Not yet recorded: only a directory's path leads here, and
			// directories come first, so the record has lost track.
			var st unix.Stat_t
			if err := unix.Fstatat(root, dir, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				s.remove(p)
				return true
			}
			return false
		}
		fd, err := unix.Openat2(root, dir, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			// Its directory is gone or became a link: that change is
			// among the paths too, and takes what was below.
			s.remove(p)
			return true
		}
		if err != nil {
			return false
		}
		defer unix.Close(fd)
		pfd = fd
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			s.remove(p)
			return true
		}
		return false
	}
	if owner != nil && (int(st.Uid) != owner.uid || int(st.Gid) != owner.gid) {
		if err := unix.Fchownat(pfd, name, owner.uid, owner.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.ENOENT) {
			return false
		}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		s.put(p, &st)
		return true
	}
	if old, ok := s.entries[p]; ok && old.dir && old.key == statKey(&st) && t.watched(s, p) {
		s.put(p, &st) // the same directory, still watched: its own size
		return true
	}
	// A new directory (or one whose watch is gone): walked whole,
	// watched before it is listed.
	s.remove(p)
	t.mu.Lock()
	t.unwatchLocked(s, p)
	t.mu.Unlock()
	sub, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return true // replaced meanwhile: reported in its directory
		}
		return false
	}
	s.put(p, &st)
	if owner == nil {
		// What is below was found here, not through events: the next
		// measure with an owner walks to give it away.
		s.ungivenAll = true
	}
	watchedAll := true
	err = t.recorder(s, owner, &watchedAll).walkAt(sub, p, strings.Count(p, "/")+1)
	return err == nil && watchedAll
}

// openWorkspaceDir opens the workspace directory ws (not through a
// symlink), stats it and gives it to owner when set.
func openWorkspaceDir(ws string, owner *ids) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, st, err
	}
	err = unix.Fstat(fd, &st)
	if err == nil && owner != nil && (int(st.Uid) != owner.uid || int(st.Gid) != owner.gid) {
		err = unix.Fchown(fd, owner.uid, owner.gid)
	}
	if err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// recorder returns a scanner that records what it walks in s and watches
// every directory before listing it; *watchedAll turns false when a watch
// could not be added.
func (t *usageTracker) recorder(s *spaceUsage, owner *ids, watchedAll *bool) *scanner {
	return &scanner{
		owner: owner,
		seen:  map[[2]uint64]bool{},
		opened: func(fd int, rel string) {
			*watchedAll = t.addWatch(s, fd, rel) && *watchedAll
		},
		found: func(rel string, st *unix.Stat_t) { s.put(rel, st) },
	}
}

func statKey(st *unix.Stat_t) inodeKey { return inodeKey{uint64(st.Dev), st.Ino} }

// entryBytes is what an entry counts for: the larger of its size, its
// allocated blocks and minEntryBytes.
func entryBytes(st *unix.Stat_t) int64 { return max(st.Size, st.Blocks*512, minEntryBytes) }

// put records path p as st says, in place of what it was.
func (s *spaceUsage) put(p string, st *unix.Stat_t) {
	k := statKey(st)
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if old, ok := s.entries[p]; ok {
		if isDir && old.dir && old.key == k {
			s.total += entryBytes(st) - old.bytes
			s.entries[p] = usageEntry{key: k, dir: true, bytes: entryBytes(st)}
			return
		}
		s.remove(p)
	}
	if p != "." {
		parent, name := path.Split(p)
		parent = cleanDir(parent)
		if s.kids[parent] == nil {
			s.kids[parent] = map[string]struct{}{}
		}
		s.kids[parent][name] = struct{}{}
	}
	if isDir {
		s.entries[p] = usageEntry{key: k, dir: true, bytes: entryBytes(st)}
		s.total += entryBytes(st)
		return
	}
	in := s.inodes[k]
	if in == nil {
		in = &inodeUsage{}
		s.inodes[k] = in
	} else {
		s.total -= in.bytes
	}
	in.bytes = entryBytes(st)
	s.total += in.bytes
	in.names++
	in.nlink = uint64(st.Nlink)
	if in.nlink > 1 {
		s.linked[k] = struct{}{}
	}
	s.entries[p] = usageEntry{key: k}
}

// remove takes path p (and what is below it) out of the record.
func (s *spaceUsage) remove(p string) {
	e, ok := s.entries[p]
	if !ok {
		return
	}
	delete(s.entries, p)
	if p != "." {
		parent, name := path.Split(p)
		delete(s.kids[cleanDir(parent)], name)
	}
	if e.dir {
		s.dirsGone = true
		s.total -= e.bytes
		for name := range s.kids[p] {
			s.remove(path.Join(p, name))
		}
		delete(s.kids, p)
		return
	}
	in := s.inodes[e.key]
	if in == nil {
		return
	}
	in.names--
	if in.names <= 0 {
		s.total -= in.bytes
		delete(s.inodes, e.key)
		delete(s.linked, e.key)
	}
}

// linksHeld reports whether every file with several names has them all in
// the record: a write through a name outside the workspace is reported by
// no watch here.
func (s *spaceUsage) linksHeld() bool {
	for k := range s.linked {
		in := s.inodes[k]
		if in == nil || in.nlink <= 1 {
			delete(s.linked, k)
			continue
		}
		if uint64(in.names) != in.nlink {
			return false
		}
	}
	return true
}

func cleanDir(d string) string {
	if d == "" {
		return "."
	}
	return strings.TrimSuffix(d, "/")
}
