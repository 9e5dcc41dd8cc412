package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// maxSessionIDLen keeps a session directory name well below the 255-byte
// file name limit of common file systems.
const maxSessionIDLen = 128

// Manager creates, finds and removes session workspaces under one root
// directory. Any number of Managers on the same root (one per process, say)
// agree: the only state one keeps is its copy of the snapshot lists beside
// the workspaces, trusted only while their files are as it last saw them
// (versions.go).
type Manager struct {
	root string
	// listLocks serialise the reads and updates of each snapshot list
	// (sub-agents sharing a workspace record at the same time): one lock
	// per workspace id's stripe, so that a thousand sessions' checkpoints
	// do not queue on one another's file writes.
	listLocks [listLockStripes]sync.Mutex
	mu        sync.Mutex // guards lists
	// lists holds the snapshot lists last read or written, by workspace id,
	// up to maxLists of those that have a file.
	lists    map[string]*versionList
	maxLists int
}

// New returns a Manager for root, creating the directory (0700) if needed.
// root may be relative; the Manager keeps its absolute form.
func New(root string) (*Manager, error) {
	if root == "" {
		return nil, errors.New("new workspace manager: root is empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("new workspace manager: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("new workspace manager: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("new workspace manager: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("new workspace manager: %s is not a directory", abs)
	}
	return &Manager{root: abs, maxLists: maxCachedLists}, nil
}

// Root returns the absolute root directory.
func (m *Manager) Root() string { return m.root }

// ValidateSessionID reports whether id may name a workspace directory: 1 to
// 128 characters from [A-Za-z0-9_-]. Those characters cannot form a path
// separator or "..", so a valid id never escapes the root.
func ValidateSessionID(id string) error {
	if id == "" {
		return errors.New("session id is empty")
	}
	if len(id) > maxSessionIDLen {
		return fmt.Errorf("session id is longer than %d characters", maxSessionIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("session id %q contains %q: only letters, digits, '_' and '-' are allowed", id, rune(c))
		}
	}
	return nil
}

// Ensure creates the workspace of sessionID (0700) if it does not exist and
// returns its absolute path. It refuses an existing entry that is not a
// directory, including a symlink, so a workspace is always a real directory
// under the root.
//
// A new copy contains no snapshot: it has no list (versions.go), which
// means just that. A list left beside a directory that is gone (a removal
// cut short, a record after it) is removed before the directory is made,
// so that no crash leaves a new copy with an old list.
func (m *Manager) Ensure(sessionID string) (string, error) {
	dir, _, err := m.Create(sessionID)
	return dir, err
}

// Create is Ensure, telling also whether the directory was made by this
// call (made: a new copy) rather than found.
func (m *Manager) Create(sessionID string) (dir string, made bool, err error) {
	const op = "ensure workspace"
	dir, exists, err := m.lookup(op, sessionID)
	if err != nil || exists {
		return dir, false, err
	}
	switch err := os.Mkdir(dir, 0o700); {
	case err == nil:
		dirsMade.Add(1)       // after the directory exists: see DirsMade
		return dir, true, nil // made here: a directory, not a link
	case !errors.Is(err, fs.ErrExist):
		return "", false, fmt.Errorf("%s %s: %w", op, sessionID, err)
	}
	// Made meanwhile by another caller: looked at as any existing one.
	dir, exists, err = m.lookup(op, sessionID)
	if err == nil && !exists {
		err = fmt.Errorf("%s %s: %w", op, sessionID, fs.ErrNotExist) // and gone again
	}
	if err != nil {
		return "", false, err
	}
	return dir, false, nil
}

// dirsMade counts the workspace directories made by the Managers of this
// process (Create), counted once each exists.
var dirsMade atomic.Uint64

// DirsMade is how many workspace directories the Managers of this process
// have made. A directory found missing after a read of it stays missing
// while it does not change: only Create makes a workspace's directory (a
// node's data directory is its process's alone), and it counts the
// directory once made. An Untouched copy's environment, whose directory
// may stay unmade for its whole life, looks at the disk only when it has
// changed (environment.localEnv.dirMissing).
func DirsMade() uint64 { return dirsMade.Load() }

// Find returns the path of the workspace of sessionID and whether its
// directory exists, without making it: a copy whose directory is made only
// when something needs it (an Environment's of a session whose tools never
// reach the workspace). As in Create, an existing entry that is not a
// directory is refused, and the list of a directory that is gone is
// removed, so that a copy missing is a copy that holds no snapshot but the
// empty one.
func (m *Manager) Find(sessionID string) (dir string, exists bool, err error) {
	return m.lookup("find workspace", sessionID)
}

// lookup is Find, its errors beginning with op: the path of the workspace
// of sessionID, whether its directory exists (an entry that is not a
// directory is refused), its list removed when it does not.
func (m *Manager) lookup(op, sessionID string) (dir string, exists bool, err error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return "", false, fmt.Errorf("%s: %w", op, err)
	}
	dir = filepath.Join(m.root, sessionID)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := m.dropVersions(sessionID); err != nil {
			return "", false, fmt.Errorf("%s %s: %w", op, sessionID, err)
		}
		return dir, false, nil
	case err != nil:
		return "", false, fmt.Errorf("%s %s: %w", op, sessionID, err)
	case !fi.IsDir():
		return "", false, fmt.Errorf("%s %s: %s exists and is not a directory", op, sessionID, dir)
	}
	return dir, true, nil
}

// Path returns the absolute path the workspace of sessionID has (or would
// have), or "" if sessionID is not valid (see ValidateSessionID). It does not
// touch the file system.
func (m *Manager) Path(sessionID string) string {
	if ValidateSessionID(sessionID) != nil {
		return ""
	}
	return filepath.Join(m.root, sessionID)
}

// Open ensures the workspace of sessionID exists and opens it.
func (m *Manager) Open(sessionID string) (*Dir, error) {
	dir, err := m.Ensure(sessionID)
	if err != nil {
		return nil, err
	}
	return Open(dir)
}

// Remove deletes the workspace of sessionID and everything in it. Removing a
// workspace that does not exist is not an error. Symlinks inside are removed,
// never followed. Its list goes first: a removal cut short leaves a copy
// that holds nothing it is known to (restored if used again), never a list
// without its copy.
func (m *Manager) Remove(sessionID string) error {
	if err := ValidateSessionID(sessionID); err != nil {
		return fmt.Errorf("remove workspace: %w", err)
	}
	if err := m.dropVersions(sessionID); err != nil {
		return fmt.Errorf("remove workspace %s: %w", sessionID, err)
	}
	if err := os.RemoveAll(filepath.Join(m.root, sessionID)); err != nil {
		return fmt.Errorf("remove workspace %s: %w", sessionID, err)
	}
	return nil
}
