//go:build linux && !race

package sandbox

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// TestCommandsRunWhileOrphansAreWoken: commands of the local backend run
// while another server of the machine wakes orphaned reapers over and over
// (each restarted server or runner does once, at its first local backend).
// None of them is killed before it starts. On the code before
// orphanedReaper's check of the parent (TestReapersCommandBeforeItsExecIsNoOrphan),
// about one command in fifteen was ("local exec: exit status -1"). Not
// under the race detector, where the waking loop's scans of /proc make each
// command take a second: CI runs the unit test of the check instead.
func TestCommandsRunWhileOrphansAreWoken(t *testing.T) {
	if reaperPath() == "" {
		t.Skip("no reaper on this system")
	}
	ex := NewLocal().Exec(Spec{Workspace: t.TempDir()})
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			wakeOrphanedReapers()
		}
	}()
	defer func() {
		stop.Store(true)
		<-done
	}()
	for i := range 200 {
		res, err := ex.Run(t.Context(), &tool.ExecRequest{Command: "echo ran"})
		require.NoError(t, err, "command %d", i)
		require.Equal(t, "ran\n", res.Stdout, "command %d", i)
	}
}
