//go:build linux || darwin || freebsd

package freespace

import (
	"fmt"

	"syscall"
)

// statfsFree is the space statfs(2) says an unprivileged writer may still
// use (the blocks reserved for root are not counted: a server that depends
// on them has already run out).
func statfsFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs: %w", err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil //nolint:gosec // block counts and sizes are not negative
}
