//go:build unix

package snapshot

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// processCPU is the CPU time (user and system) the process used so far.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
