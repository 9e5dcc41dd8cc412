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

// EnterMain fails: sandboxes need Linux.
func EnterMain([]string) int {
	fmt.Fprintf(os.Stderr, "longhaul sandbox: %s needs Linux, not %s\n", EnterCommand, runtime.GOOS)
	return 125
}
