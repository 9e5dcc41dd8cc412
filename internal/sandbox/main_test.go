package sandbox

import (
	"os"
	"testing"
)

// TestMain lets the test binary stand in for the longhaul binary inside a
// sandbox: bwrap tests mount it (os.Executable) as the forwarder, and run it
// as `ForwarderPath __sandbox-forward --listen ... --socket ...`; a test run
// as root starts its sandboxes through it (EnterCommand).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ForwardCommand {
		os.Exit(ForwardMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == EnterCommand {
		os.Exit(EnterMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}
