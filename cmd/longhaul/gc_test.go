package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/stretchr/testify/require"
)

func TestPlanGC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want gcPlan
	}{
		{"nothing set: a higher percent, bounded by a limit", nil, gcPlan{percent: true, limit: true}},
		{"the operator's GOGC wins, no limit added", map[string]string{"GOGC": "100"}, gcPlan{}},
		{"GOGC=off wins too", map[string]string{"GOGC": "off"}, gcPlan{}},
		{"GOGC and GOMEMLIMIT: both the operator's", map[string]string{"GOGC": "50", "GOMEMLIMIT": "1GiB"}, gcPlan{}},
		{"the operator's GOMEMLIMIT bounds the higher percent", map[string]string{"GOMEMLIMIT": "1GiB"}, gcPlan{percent: true}},
		{"an empty GOGC is unset, as the runtime reads it", map[string]string{"GOGC": ""}, gcPlan{percent: true, limit: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, planGC(func(k string) string { return tc.env[k] }))
		})
	}
}

// tunedGCEnv makes the test binary report, instead of running tests, the
// collector's settings after tuneGC in the environment it was given.
const tunedGCEnv = "LONGHAUL_TEST_TUNED_GC"

// TestTuneGC runs tuneGC in a process of its own for each environment (the
// settings are process-wide) and reads what the collector was left with.
func TestTuneGC(t *testing.T) {
	if os.Getenv(tunedGCEnv) != "" {
		tuneGC()
		// SetGCPercent(-1) returns the percent in effect (and turns the
		// collector off in this process, which exits at once).
		fmt.Printf("%d %d\n", debug.SetGCPercent(-1), debug.SetMemoryLimit(-1))
		os.Exit(0)
	}
	t.Parallel()
	memory, err := availableMemory()
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range []struct {
		name         string
		env          []string
		percent      int
		limit        int64
		limitDerived bool // the limit is a share of the memory
	}{
		{"nothing set", nil, defaultGCPercent, 0, true},
		{"the operator's GOGC", []string{"GOGC=100"}, 100, math.MaxInt64, false},
		{"the operator's GOMEMLIMIT", []string{"GOMEMLIMIT=1GiB"}, defaultGCPercent, 1 << 30, false},
		{"AUTOMEMLIMIT=off: no bound, Go's defaults", []string{"AUTOMEMLIMIT=off"}, 100, math.MaxInt64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(exe, "-test.run=^TestTuneGC$")
			cmd.Env = append(withoutGCEnv(os.Environ()), append(tc.env, tunedGCEnv+"=1")...)
			out, err := cmd.Output()
			require.NoError(t, err)
			var percent int
			var limit int64
			_, err = fmt.Sscan(string(out), &percent, &limit)
			require.NoError(t, err, "output %q", out)
			require.Equal(t, tc.percent, percent)
			want := tc.limit
			if tc.limitDerived {
				want = int64(float64(memory) * memoryLimitShare)
			}
			require.Equal(t, want, limit)
		})
	}
}

// withoutGCEnv drops the collector's variables from env, so each case
// sets only its own.
func withoutGCEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOGC", "GOMEMLIMIT", "AUTOMEMLIMIT", tunedGCEnv:
			continue
		}
		out = append(out, kv)
	}
	return out
}

// The memory available is at most the machine's, a cgroup's lower limit
// taken when there is one.
func TestAvailableMemoryAtMostTheMachines(t *testing.T) {
	t.Parallel()
	machine, err := memlimit.FromSystem()
	require.NoError(t, err)
	got, err := availableMemory()
	require.NoError(t, err)
	require.Positive(t, got)
	require.LessOrEqual(t, got, machine)
	if cgroup, err := memlimit.FromCgroup(); err == nil {
		require.LessOrEqual(t, got, cgroup)
	}
}
