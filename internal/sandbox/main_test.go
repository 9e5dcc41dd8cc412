package sandbox

import (
	"os"
	"testing"
)

// TestMain lets the test binary stand in for the longhaul binary inside a
// sandbox: bwrap tests mount it (os.Executable) as the forwarder, and run it
// as `ForwarderPath __sandbox-forward --listen ... --socket ...`. (A test
// run as root also starts its sandboxes through it: EnterCommand is handled
// by the package's init.)
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ForwardCommand {
		os.Exit(ForwardMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}
