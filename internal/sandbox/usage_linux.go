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

// maxDepth bounds the recursion (and the file descriptors held open).
const maxDepth = 256

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

// walkAt scans the directory fd, at rel in the workspace (and closes it).
func (s *scanner) walkAt(fd int, rel string, depth int) error {
	defer unix.Close(fd)
	if depth > maxDepth {
		return errors.New("workspace: directories nested too deep")
	}
	if s.opened != nil {
		s.opened(fd, rel)
	}
	names, err := readNames(fd)
	if err != nil {
		if depth > 0 && errors.Is(err, unix.ENOENT) {
			// Removed meanwhile: getdents on a directory deleted after
			// it was opened. A command removing a tree (the way out of
			// an unmeasurable workspace) must not be stopped for it.
			return nil
		}
		return fmt.Errorf("read workspace directory: %w", err)
	}
	var firstErr error
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed meanwhile
			}
			firstErr = cmp.Or(firstErr, fmt.Errorf("stat in workspace: %w", err))
			continue
		}
		if s.owner != nil && (int(st.Uid) != s.owner.uid || int(st.Gid) != s.owner.gid) {
			if err := unix.Fchownat(fd, name, s.owner.uid, s.owner.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.ENOENT) {
				firstErr = cmp.Or(firstErr, fmt.Errorf("give a workspace file to the sandbox user: %w", err))
			}
		}
		sub := ""
		if s.found != nil || s.opened != nil {
			sub = path.Join(rel, name)
		}
		if s.found != nil {
			s.found(sub, &st)
		}
		s.count(&st)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		subfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				continue // replaced meanwhile
			}
			firstErr = cmp.Or(firstErr, fmt.Errorf("open in workspace: %w", err))
			continue
		}
		// After an error the rest is still counted: the total stays a
		// lower bound of what the workspace holds (usageBefore).
		firstErr = cmp.Or(firstErr, s.walkAt(subfd, sub, depth+1))
	}
	return firstErr
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
