package freespacetest

import (
	"os"
	"testing"
)

// skip skips a test that cannot mount a small file system, or fails it
// under CI=true, where every full-disk test must run.
func skip(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("a full disk cannot be tested: %s", why)
	}
	t.Skipf("a full disk cannot be tested: %s", why)
}
