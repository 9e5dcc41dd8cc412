package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Modes of what a node keeps in its data directory: the journal, the
// vault's key and the workspaces are the operator's alone.
const (
	privateFileMode fs.FileMode = 0o600
	privateDirMode  fs.FileMode = 0o700
)

// tightenDataDir gives the data directory and what a node keeps at its top
// (the database and its -wal and -shm, the lock, the node id, the
// workspaces' and the proxies' directories) modes no other user can read,
// whatever the umask was when they were made: a data directory created by
// an older longhaul (whose database was 0644) is fixed at its next start.
// The vault's key is not among them: the vault refuses a key file others
// could read, since the key may have been read already (its owner must
// know, and rotate it). Files inside the workspaces keep the modes the agent gave
// them (a script stays executable); the workspaces' directory being 0700
// keeps them from other users.
func tightenDataDir(dir string) error {
	if err := tighten(dir, privateDirMode); err != nil {
		return err
	}
	for _, name := range []string{DBFile, DBFile + "-wal", DBFile + "-shm", DBFile + "-journal", LockFile, NodeIDFile} {
		if err := tighten(filepath.Join(dir, name), privateFileMode); err != nil {
			return err
		}
	}
	for _, name := range []string{WorkspacesDir, RuntimeDir} {
		if err := tighten(filepath.Join(dir, name), privateDirMode); err != nil {
			return err
		}
	}
	return nil
}

// tighten removes the permission bits of p beyond max; a missing p is
// fine (it is created with max when first needed). Symbolic links are not
// followed: the data directory's own entries are what is tightened.
func tighten(p string, max fs.FileMode) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data directory permissions: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 || fi.Mode().Perm()&^max == 0 {
		return nil
	}
	if err := os.Chmod(p, fi.Mode().Perm()&max); err != nil {
		return fmt.Errorf("data directory permissions: %w", err)
	}
	return nil
}
