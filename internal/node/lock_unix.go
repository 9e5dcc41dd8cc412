//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

var (
	heldMu sync.Mutex
	held   = map[string]bool{} // lock files this process holds
)

// LockDataDir takes an exclusive lock on the data directory, so that two
// processes never serve one database: the second would expire the first's
// leases at start (they share the node id) and both would run its sessions.
// The kernel releases the lock when the process dies.
//
// It is a POSIX record lock (fcntl), not flock: a flock belongs to the open
// file description, which a child forked for a shell command shares until it
// execs, so a restart right after a crash could find the dead server's lock
// still held by a half-started child. Record locks are not inherited by fork,
// but they do not exclude the process holding them, so locks taken in this
// process are also kept in a set.
func LockDataDir(dir string) (unlock func(), err error) {
	p, err := filepath.Abs(filepath.Join(dir, LockFile))
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	heldMu.Lock()
	defer heldMu.Unlock()
	if held[p] {
		return nil, fmt.Errorf("data directory %s is in use by another longhaul process (%s is locked)", dir, p)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		f.Close()
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
			return nil, fmt.Errorf("data directory %s is in use by another longhaul process (%s is locked)", dir, p)
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	held[p] = true
	return func() {
		heldMu.Lock()
		delete(held, p)
		heldMu.Unlock()
		unlock := syscall.Flock_t{Type: syscall.F_UNLCK}
		_ = syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &unlock)
		_ = f.Close()
	}, nil
}
