//go:build !linux

package sandbox

import (
	"fmt"
	"os"
	"runtime"
)

// EnterCommand is the hidden subcommand through which a root server starts
// bwrap sandboxes (Linux only).
const EnterCommand = "__sandbox-enter"

// StageDir is where the enter helper would mount a sandbox's sources (see
// enter_linux.go); declared here too so that the package builds elsewhere,
// where bwrap never runs.
const StageDir = "/tmp"

// EnterMain fails: sandboxes need Linux.
func EnterMain([]string) int {
	fmt.Fprintf(os.Stderr, "longhaul sandbox: %s needs Linux, not %s\n", EnterCommand, runtime.GOOS)
	return 125
}
