package app_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine running: a
// stream's watch forwarder that outlives its stream is a leak in the App,
// not in the test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
