//go:build !(linux || darwin || freebsd)

package freespace

import "errors"

// statfsFree cannot read free space here: the monitor logs that and
// counts the volume as not full.
func statfsFree(string) (uint64, error) {
	return 0, errors.New("reading free space is not supported on this system")
}
