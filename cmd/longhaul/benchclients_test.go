package main

import (
	"context"
	"os"
	"testing"
)

// TestMain lets the test binary stand for the longhaul binary where a
// command re-executes it: `longhaul bench --watchers` runs its clients as
// `longhaul bench watcher-clients` (os.Executable is this binary in tests).
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "bench" && os.Args[2] == watcherClientsCommand {
		ctx := context.Background()
		os.Exit(reportError(ctx, os.Stderr, execute(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)))
	}
	os.Exit(m.Run())
}
