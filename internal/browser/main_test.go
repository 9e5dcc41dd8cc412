package browser_test

import (
	"os"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

// TestMain lets the test binary stand in for the longhaul binary inside a
// bwrap sandbox: the proxy forwarder the sandbox runs (a server run as root
// also enters its sandboxes through it, which the sandbox package's init
// handles).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ForwardCommand {
		os.Exit(sandbox.ForwardMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}
