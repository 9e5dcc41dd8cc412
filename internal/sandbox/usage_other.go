//go:build !linux

package sandbox

import (
	"cmp"
	"io/fs"
	"path/filepath"
)

// minEntryBytes: see usage_linux.go.
const minEntryBytes = 4096

// ids is a uid and a gid (only a root server on Linux gives the workspace
// to the sandbox's user).
type ids struct{ uid, gid int }

// scanWorkspace returns the workspace's usage: for each entry the larger of
// its size and minEntryBytes. owner is ignored here.
func scanWorkspace(dir string, _ *ids) (int64, error) {
	var total int64
	var firstErr error
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			// Count the rest: the total stays a lower bound (usageBefore).
			firstErr = cmp.Or(firstErr, err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		total += max(fi.Size(), minEntryBytes)
		return nil
	})
	if err != nil {
		return total, err
	}
	return total, firstErr
}
