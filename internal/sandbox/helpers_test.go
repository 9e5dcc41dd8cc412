package sandbox

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

var (
	bwrapOnce    sync.Once
	bwrapShared  *bwrapBackend
	bwrapFailure error
)

// inCI is true under CI=true, where the bwrap tests must run, not skip.
func inCI() bool { return os.Getenv("CI") == "true" }

// testBwrap returns the bwrap backend, probed once per test binary. Without
// a working bubblewrap it skips the test, or fails it in CI.
func testBwrap(t *testing.T) *bwrapBackend {
	t.Helper()
	bwrapOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		bwrapShared, bwrapFailure = newBwrap(ctx, BwrapOptions{})
	})
	if bwrapFailure != nil {
		if inCI() {
			t.Fatalf("bwrap must work under CI=true (.ci/run installs bubblewrap): %v", bwrapFailure)
		}
		t.Skipf("skipping: bubblewrap is not usable on this machine (%v); install the Debian package bubblewrap to run the sandbox tests", bwrapFailure)
	}
	return bwrapShared
}

// requireTool skips (or fails in CI) when a program the test drives from
// inside the sandbox is missing.
func requireTool(t *testing.T, name string) {
	t.Helper()
	for _, dir := range strings.Split(DefaultPath, ":") {
		if fi, err := os.Stat(dir + "/" + name); err == nil && !fi.IsDir() {
			return
		}
	}
	if inCI() {
		t.Fatalf("%s must be installed under CI=true (.ci/run installs it)", name)
	}
	t.Skipf("skipping: %s is not installed", name)
}

// run runs command with the request's other fields from mod.
func run(t *testing.T, ex tool.Exec, command string, mod ...func(*tool.ExecRequest)) *tool.ExecResult {
	t.Helper()
	req := &tool.ExecRequest{Command: command, Timeout: 20 * time.Second}
	for _, m := range mod {
		m(req)
	}
	res, err := ex.Run(t.Context(), req)
	require.NoError(t, err)
	return res
}

func withTimeout(d time.Duration) func(*tool.ExecRequest) {
	return func(r *tool.ExecRequest) { r.Timeout = d }
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// noFile requires that path does not exist on the host.
func noFile(t *testing.T, path string) {
	t.Helper()
	_, err := os.Lstat(path)
	require.True(t, errors.Is(err, os.ErrNotExist), "%s must not exist on the host (err %v)", path, err)
}
