package snapshot

import (
	"errors"
	"os"
	"slices"

	"github.com/longhaul-dev/longhaul/internal/inotify"
)

// Watched workspaces.
//
// A shell command may write anywhere, so before watching, the Take after
// one walked the whole workspace: an lstat of every file, whatever the
// command changed. With CacheConfig.Watch, a walk also puts an inotify
// watch on every directory it lists (before listing it), and from then on
// the kernel tells the Cache which names changed; a Take after a command
// (BeginUnknownWrites) is incremental like one after a write_file, reading
// only the changed paths. The workspace is bind-mounted into the sandbox,
// so the sandboxed command's writes reach the same directories and are
// seen the same way.
//
// Whenever the watches cannot vouch for the workspace, the next Take walks
// and sets them up anew: the kernel's queue overflowed, a directory was
// moved (its watches name its old path), the workspace directory itself
// was removed or moved, the watches ran out (the user's
// max_user_watches, or maxWatches of the Cache: then this workspace is no
// longer watched), reading the events failed, or a file has other names
// (nlink > 1: a write through a name outside the workspace is reported
// there, not here; such a workspace is not watched). Restores, new runners
// and removals still call Forget, which drops the watches with the record.
//
// With CacheConfig.WatchEmptyRoots instead, only the workspace directory
// is watched, and only while it is empty (nothing in it, nothing left out
// by Options.Exclude or as a special file): a walk watches it before
// listing it, and a Take whose record is not of an empty directory stops
// watching it (its events drained first, as for a file with other
// names). Such a workspace holds no file that could be written through a
// name outside it, nor a directory whose changes would need a watch of
// its own: whatever changes it is made in it, by name, and reported. The
// workspace of a session whose tools write nothing (or only through the
// Environment, which tells the Cache) is then never walked after its
// first Take, whatever the tools the Cache was not told of did not do.
//
// Writes made through a shared memory mapping after the file was closed
// are not reported by inotify; a command's process that writes so and ends
// before the command does has them in the file by the Take (its close was
// reported, and the Take reads the file after the command), but a process
// left running in the background that keeps writing through a mapping is
// seen at its next close or write only.

// maxWatches bounds the watches of one Cache, so that workspaces do not
// take all of the user's (the kernel's default is 8,192 on small machines,
// shared with every other program of the user); past it a workspace is
// walked after each command as before.
const maxWatches = 100_000

// errTooManyWatches: the Cache's maxWatches are in use.
var errTooManyWatches = errors.New("too many watches")

// watchLoc is where a watched directory is: a workspace and the path in
// it. One directory may have several (a bind mount inside a workspace).
type watchLoc struct {
	root string
	rel  string
}

// ensureInotifyLocked opens the Cache's inotify instance if watching is on
// (of every workspace, or of empty ones) and it is not open yet; it reports
// whether it is open. c.mu is held.
func (c *Cache) ensureInotifyLocked() bool {
	if !c.watchOn && !c.watchEmpty {
		return false
	}
	if c.ino == nil {
		ino, err := inotify.Open()
		if err != nil {
			// Not supported, or the user's instances ran out: walk.
			c.watchOn, c.watchEmpty = false, false
			return false
		}
		c.ino = ino
	}
	return true
}

// drainLocked applies the events queued so far. c.mu is held.
func (c *Cache) drainLocked() {
	if c.ino == nil {
		return
	}
	if err := c.ino.Read(c.handleLocked); err != nil {
		c.stopWatchingLocked()
	}
}

// handleLocked applies one event: the path it names is written, or the
// watched workspace it concerns must be walked. c.mu is held.
func (c *Cache) handleLocked(ev inotify.Event) {
	if ev.Overflow {
		for _, s := range c.roots {
			if s.watching {
				c.forgetLocked(s)
			}
		}
		return
	}
	locs, known := c.watches[ev.Wd]
	if ev.Ignored && known {
		delete(c.watches, ev.Wd)
		c.nWatches--
	}
	for _, loc := range locs {
		s := c.roots[loc.root]
		if s == nil || !s.watching {
			continue
		}
		if ev.Ignored || ev.SelfGone {
			// A subdirectory's removal or move is also reported by its
			// parent, by name; the workspace directory's only here.
			if loc.rel == "." {
				c.forgetLocked(s)
			}
			continue
		}
		if ev.DirMoved {
			c.forgetLocked(s)
			continue
		}
		if ev.Name == "" {
			continue
		}
		if len(s.dirty) >= maxDirtyPaths {
			c.forgetLocked(s)
			continue
		}
		p := joinRel(loc.rel, ev.Name)
		s.dirty[p] = s.dirty[p] // told by NoteWrites stays told
	}
}

// addWatch watches directory rel, open as dir, for the Take that started
// root's watching at generation gen, before the Take lists it. It reports
// false when the workspace is not (or no longer) watched.
func (c *Cache) addWatch(root string, gen uint64, dir *os.File, rel string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.roots[root]
	if s == nil || !s.watching || s.gen != gen || c.ino == nil {
		return false // another Take, or a Forget, took over
	}
	var wd int32
	var err error
	if c.nWatches >= c.maxWatches {
		err = errTooManyWatches
	} else {
		wd, err = c.ino.Add(dir)
	}
	if err != nil {
		// This workspace is walked after commands from now on. The
		// events so far are applied first: the record may be kept.
		if inotify.IsWatchLimit(err) || errors.Is(err, errTooManyWatches) {
			s.watchFailed = true
		}
		c.drainLocked()
		c.unwatchLocked(s)
		if s.unknown > 0 {
			c.forgetLocked(s)
		}
		return false
	}
	loc := watchLoc{root, rel}
	if !slices.Contains(c.watches[wd], loc) {
		if len(c.watches[wd]) == 0 {
			c.nWatches++
		}
		c.watches[wd] = append(c.watches[wd], loc)
	}
	return true
}

// stopEmptyWatch stops watching root, watched while empty by the Take that
// started at generation gen, which found it is not (or no longer) empty:
// before that Take looks below its directory, which no watch covers. The
// events so far are applied (they name what changed in the directory since
// it was listed); a writer the Cache was not told of, still writing, makes
// the Take's record go (as without watches).
func (c *Cache) stopEmptyWatch(root string, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.roots[root]
	if s == nil || s.gen != gen || !s.watching || !s.emptyOnly {
		return
	}
	c.drainLocked()
	c.unwatchLocked(s)
	if s.unknown > 0 {
		c.forgetLocked(s)
	}
}

// unwatchLocked stops watching s's workspace: its watches are removed,
// unless another workspace shares them. Events queued before that are
// dropped with them; a caller keeping s's record drains first. c.mu is
// held.
func (c *Cache) unwatchLocked(s *rootState) {
	if !s.watching {
		return
	}
	s.watching = false
	for wd, locs := range c.watches {
		kept := slices.DeleteFunc(locs, func(l watchLoc) bool { return l.root == s.key })
		if len(kept) > 0 {
			c.watches[wd] = kept
			continue
		}
		delete(c.watches, wd)
		c.nWatches--
		if c.ino != nil {
			c.ino.Remove(wd)
		}
	}
}

// stopWatchingLocked stops watching altogether (the events cannot be
// read): every watched workspace is walked at its next Take. c.mu is held.
func (c *Cache) stopWatchingLocked() {
	for _, s := range c.roots {
		if s.watching {
			c.forgetLocked(s)
		}
	}
	if c.ino != nil {
		c.ino.Close()
		c.ino = nil
	}
	clear(c.watches)
	c.nWatches = 0
	c.watchOn, c.watchEmpty = false, false
}

// Close stops watching workspaces (CacheConfig.Watch) and releases the
// inotify instance; the Cache stays usable, walking after unknown writes.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopWatchingLocked()
	return nil
}
