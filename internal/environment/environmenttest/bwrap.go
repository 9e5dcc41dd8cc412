package environmenttest

import (
	"os"
	"sync"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

var (
	bwrapOnce    sync.Once
	bwrapBackend sandbox.Backend
	bwrapErr     error
)

// Bwrap returns the bwrap sandbox backend, probed once per test binary;
// without a working bubblewrap it skips, or fails under CI=true. The test
// binary's TestMain must handle sandbox.ForwardCommand (the egress
// forwarder runs it inside the sandbox).
func Bwrap(tb testing.TB) sandbox.Backend {
	tb.Helper()
	bwrapOnce.Do(func() { bwrapBackend, bwrapErr = sandbox.NewBwrap(sandbox.BwrapOptions{}) })
	if bwrapErr != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("bwrap must work under CI=true: %v", bwrapErr)
		}
		tb.Skipf("skipping: bubblewrap is not usable here: %v", bwrapErr)
	}
	return bwrapBackend
}

// Main is the TestMain of a backend's tests: the test binary stands in
// for the longhaul binary inside a bwrap sandbox (the egress forwarder).
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ForwardCommand {
		os.Exit(sandbox.ForwardMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}
