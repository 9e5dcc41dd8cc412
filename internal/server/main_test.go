package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine running: a
// stream handler, a follow or an engine that outlives its test is a leak in
// the server, not in the test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
