//go:build unix

package workspace

import (
	"os"
	"syscall"
)

// readFlags opens files for reading without blocking on a FIFO; for regular
// files O_NONBLOCK has no effect.
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK
