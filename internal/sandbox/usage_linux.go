//go:build linux

package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"path"

	"golang.org/x/sys/unix"
)

// minEntryBytes is what each file, directory or link counts for at least
// in a workspace's usage: what a file system spends on an inode and its
// first block, so that a million empty files are not free.
const minEntryBytes = 4096

// scanWorkspace walks the workspace dir without following symbolic links,
// through file descriptors (a directory swapped for a link while it runs
// leads nowhere), and returns its usage in bytes: for each inode (hard
// links once) the larger of its size, its allocated blocks and
// minEntryBytes. With owner set, every entry not owned by owner's uid and
// gid is given to them (lchown): a server running as root gives the
// sandbox's user what the engine wrote (file tools, restores) before a
// command runs.
func scanWorkspace(dir string, owner *ids) (int64, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open workspace: %w", err)
	}
	s := &scanner{owner: owner, seen: map[[2]uint64]bool{}}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, fmt.Errorf("stat workspace: %w", err)
	}
	if owner != nil && (int(st.Uid) != owner.uid || int(st.Gid) != owner.gid) {
		if err := unix.Fchown(fd, owner.uid, owner.gid); err != nil {
			unix.Close(fd)
			return 0, fmt.Errorf("give the workspace to the sandbox user: %w", err)
		}
	}
	s.count(&st)
	err = s.walk(fd, 0)
	return s.total, err
}

// ids is a uid and a gid.
type ids struct{ uid, gid int }

type scanner struct {
	owner *ids
	seen  map[[2]uint64]bool
	total int64
	// opened, when set, is given each directory the walk opens, before it
	// is listed, with its workspace-relative path; found, each entry it
	// counts (usagetrack_linux.go keeps its record so).
	opened func(fd int, rel string)
	found  func(rel string, st *unix.Stat_t)
}

// maxDepth bounds the depth of a walk: a guard on its memory and time (a
// small frame a level), no longer on its file descriptors (maxOpenDirs).
// A tree nested deeper cannot be measured, and the quota fails closed on
// it; one as deep as common tools make (the old limit was 256 levels,
// which the removal of a deep tree could stay past long enough to be
// stopped) is measured whole.
const maxDepth = 1024

// maxOpenDirs bounds the directory file descriptors a walk holds at once,
// however deep the tree: the deepest ones (the walk's way back up), and the
// workspace's own.
const maxOpenDirs = 32

func (s *scanner) count(st *unix.Stat_t) {
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		k := [2]uint64{uint64(st.Dev), st.Ino}
		if s.seen[k] {
			return
		}
		s.seen[k] = true
	}
	s.total += entryBytes(st)
}

// walk scans the directory fd (and closes it).
func (s *scanner) walk(fd int, depth int) error { return s.walkAt(fd, ".", depth) }

// dirFrame is a directory a walk is in: its descriptor (-1 while closed to
// keep within maxOpenDirs), its name in its parent, its path in the
// workspace, its identity (to find it again) and the entries left to visit.
type dirFrame struct {
	fd       int
	name     string
	rel      string
	dev, ino uint64
	depth    int
	names    []string
}

// walkAt scans the directory fd, at rel in the workspace (and closes it).
// It walks depth first without recursion, holding at most maxOpenDirs
// directories open: a directory closed on the way down is opened again on
// the way back up, through ".." of the child just left (checked to be
// the same directory), or else by name from its nearest open ancestor
// (every step without following a link, each checked to be the same
// directory). A directory that cannot be found again (moved or removed
// meanwhile) is left, as one removed while it was read is.
func (s *scanner) walkAt(fd int, rel string, depth int) error {
	if depth > maxDepth {
		unix.Close(fd)
		return errors.New("workspace: directories nested too deep")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return fmt.Errorf("stat workspace directory: %w", err)
	}
	root := &dirFrame{fd: fd, rel: rel, dev: uint64(st.Dev), ino: st.Ino, depth: depth}
	if err := s.enter(root); err != nil {
		unix.Close(fd)
		if depth > 0 && errors.Is(err, unix.ENOENT) {
			// Removed meanwhile: getdents on a directory deleted after
			// it was opened. A command removing a tree (the way out of
			// an unmeasurable workspace) must not be stopped for it.
			return nil
		}
		return err
	}
	stack := []*dirFrame{root}
	open := 1
	defer func() {
		for _, f := range stack {
			if f.fd >= 0 {
				unix.Close(f.fd)
			}
		}
	}()
	var firstErr error
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		if len(top.names) == 0 {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				s.findAgain(stack, top, &open)
			}
			if top.fd >= 0 {
				unix.Close(top.fd)
				open--
			}
			continue
		}
		name := top.names[0]
		top.names = top.names[1:]
		if top.fd < 0 {
			top.names = nil // not found again: left
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(top.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed meanwhile
			}
			firstErr = cmp.Or(firstErr, fmt.Errorf("stat in workspace: %w", err))
			continue
		}
		if s.owner != nil && (int(st.Uid) != s.owner.uid || int(st.Gid) != s.owner.gid) {
			if err := unix.Fchownat(top.fd, name, s.owner.uid, s.owner.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.ENOENT) {
				firstErr = cmp.Or(firstErr, fmt.Errorf("give a workspace file to the sandbox user: %w", err))
			}
		}
		sub := ""
		if s.found != nil || s.opened != nil {
			sub = path.Join(top.rel, name)
		}
		if s.found != nil {
			s.found(sub, &st)
		}
		s.count(&st)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		if top.depth+1 > maxDepth {
			// After an error the rest is still counted: the total stays
			// a lower bound of what the workspace holds (usageBefore).
			firstErr = cmp.Or(firstErr, errors.New("workspace: directories nested too deep"))
			continue
		}
		subfd, err := unix.Openat(top.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				continue // replaced meanwhile
			}
			firstErr = cmp.Or(firstErr, fmt.Errorf("open in workspace: %w", err))
			continue
		}
		child := &dirFrame{fd: subfd, name: name, rel: sub, dev: uint64(st.Dev), ino: st.Ino, depth: top.depth + 1}
		if err := s.enter(child); err != nil {
			unix.Close(subfd)
			if !errors.Is(err, unix.ENOENT) {
				firstErr = cmp.Or(firstErr, err)
			}
			continue
		}
		stack = append(stack, child)
		open++
		if open > maxOpenDirs {
			// The shallowest open one but the walk's own root: the walk
			// comes back to it last.
			for _, f := range stack[1:] {
				if f.fd >= 0 {
					unix.Close(f.fd)
					f.fd = -1
					open--
					break
				}
			}
		}
	}
	return firstErr
}

// enter tells s.opened of the directory f and reads the names in it.
func (s *scanner) enter(f *dirFrame) error {
	if s.opened != nil {
		s.opened(f.fd, f.rel)
	}
	names, err := readNames(f.fd)
	if err != nil {
		return fmt.Errorf("read workspace directory: %w", err)
	}
	f.names = names
	return nil
}

// findAgain opens again, when it was closed and has entries left, the
// directory on top of stack, which the walk comes back to from child
// (still open, or closed too): through child's "..", else by name from its
// nearest open ancestor. Not found again, it stays closed (its entries are
// left).
func (s *scanner) findAgain(stack []*dirFrame, child *dirFrame, open *int) {
	top := stack[len(stack)-1]
	if top.fd >= 0 || len(top.names) == 0 {
		return
	}
	if child.fd >= 0 {
		if fd, ok := openSame(child.fd, "..", top); ok {
			top.fd = fd
			*open++
			return
		}
	}
	at := len(stack) - 1
	for stack[at].fd < 0 {
		at-- // the root of the walk is always open
	}
	cur := stack[at].fd
	for i := at + 1; i < len(stack); i++ {
		fd, ok := openSame(cur, stack[i].name, stack[i])
		if cur != stack[at].fd {
			unix.Close(cur)
		}
		if !ok {
			return
		}
		cur = fd
	}
	top.fd = cur
	*open++
}

// openSame opens name in the directory dirfd, without following a link,
// and reports whether it is the directory f (by device and inode).
func openSame(dirfd int, name string, f *dirFrame) (int, bool) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint64(st.Dev) != f.dev || st.Ino != f.ino {
		unix.Close(fd)
		return -1, false
	}
	return fd, true
}

// readNames returns the names in the directory fd, but . and ..
func readNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
