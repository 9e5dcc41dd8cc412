//go:build unix

package snapshot

import (
	"os"
	"syscall"
)

// readFlags opens files for reading without blocking on a FIFO that
// replaced a regular file after it was listed; for regular files
// O_NONBLOCK has no effect.
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK
