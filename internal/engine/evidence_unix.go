//go:build unix

package engine

import (
	"os"
	"syscall"
)

// evidenceReadFlags open a workspace file for the evidence without blocking
// on a FIFO the agent made in place of a script (an open for reading would
// wait for a writer for ever, and hold the runner with it); for a regular
// file O_NONBLOCK changes nothing.
const evidenceReadFlags = os.O_RDONLY | syscall.O_NONBLOCK
