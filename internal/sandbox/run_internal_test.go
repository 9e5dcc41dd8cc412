package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunReadsStatusPastTheOutputGrace: a run whose output pipes are still
// held killGrace after its process exited stops reading them, but not the
// status pipe: an "ok" that comes after the output was cut is still read,
// so a command that ran is not reported as one that never started. The
// holder (it left the group with setsid) writes to stdout until the reader
// is gone, then writes "ok" to the status pipe (fd 3): no timing decides
// the order.
func TestRunReadsStatusPastTheOutputGrace(t *testing.T) {
	if !processGroupsSupported {
		t.Skip("no process groups on this system")
	}
	// The command exits once the holder, in a session of its own, says so
	// (the kill of the group that follows the exit must miss it).
	holder := `echo $$ > held; trap '' PIPE; while printf .; do sleep 0.05; done 2>/dev/null; printf ok >&3`
	command := `setsid /bin/sh -c "$1" </dev/null 2>/dev/null & until [ -s held ]; do sleep 0.01; done; exit 3`
	out, err := runProcess(context.Background(), &runSpec{
		argv:        []string{"/bin/sh", "-c", command, "sh", holder},
		env:         []string{"PATH=" + DefaultPath},
		dir:         t.TempDir(),
		timeout:     time.Minute,
		maxCapture:  1 << 10,
		outputLimit: 1 << 20,
	})
	require.NoError(t, err)
	require.True(t, out.started, "the status written after the output grace is read")
	require.Equal(t, 3, out.state.ExitCode())
	require.Contains(t, out.stdout, ".", "what the holder wrote before the cut is kept")
	require.False(t, out.timedOut || out.cancelled || out.outputLimited)
}
