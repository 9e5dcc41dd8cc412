//go:build !unix

package snapshot

import (
	"testing"
	"time"
)

// processCPU is not measured here: the benchmarks report 0.
func processCPU(testing.TB) time.Duration { return 0 }
