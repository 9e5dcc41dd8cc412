package main

import (
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// The collector's defaults for a longhaul process.
//
// A node allocates about 100 KB per agent step (the journal's encoding,
// the store driver's parameters and messages) and keeps a small live heap
// (tens of MiB), so with Go's GOGC=100 it collects many times a second under
// load: a fifth of the process's CPU with 64 sessions on PostgreSQL went to
// marking. A higher percent collects less often for the same live heap, at
// the price of a larger heap between collections; the memory limit keeps
// that price bounded by the machine, so a large live heap is collected as
// often as it must be rather than grown fivefold.
//
// The operator's settings win: a GOGC in the environment leaves both as the
// runtime read them (GOGC=100 is Go's own default back), and a GOMEMLIMIT
// keeps its limit with this percent. AUTOMEMLIMIT (the library's) changes
// the limit's share of the memory, or turns it off ("off"), and with it the
// higher percent.

// defaultGCPercent is the GOGC a longhaul process runs with when its
// environment sets none. 400 took most of what the collector gave back in
// measurements (200 about half of it, 800 little more than 400).
const defaultGCPercent = 400

// memoryLimitShare is the share of the memory available to the process
// that the collector's limit is set to. While the live heap is under a
// quarter of the memory the heap's goal stays at least twice the live heap,
// so the collector runs no more often than with GOGC=100; past that the
// process was near the memory's end with Go's default too. The other half
// is for what the node runs beside it (sandboxes, browsers, a database).
const memoryLimitShare = 0.5

// gcPlan is what tuneGC changes, decided from the environment alone.
type gcPlan struct {
	percent bool // set GOGC to defaultGCPercent
	limit   bool // set a memory limit; the percent only if one was set
}

// planGC decides from the environment read through getenv. An empty
// variable is unset, as the runtime reads it.
func planGC(getenv func(string) string) gcPlan {
	switch {
	case getenv("GOGC") != "":
		return gcPlan{}
	case getenv("GOMEMLIMIT") != "":
		return gcPlan{percent: true}
	default:
		return gcPlan{percent: true, limit: true}
	}
}

// tuneGC applies planGC to this process. It is main's (a process-wide
// setting): tests and embedders keep the runtime's defaults. Without a
// known bound (the memory unknown, or AUTOMEMLIMIT=off) it changes
// nothing: a higher percent is only safe with a limit.
func tuneGC() {
	p := planGC(os.Getenv)
	if p.limit {
		limit, err := memlimit.Set(memlimit.WithRatio(memoryLimitShare), memlimit.WithProvider(availableMemory))
		if err != nil || limit == math.MaxInt64 {
			return
		}
	}
	if p.percent {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// availableMemory is the memory this process may use, in bytes: the
// machine's, or its memory cgroup's limit when that is lower (a container;
// a cgroup may be given more than the machine has).
func availableMemory() (uint64, error) {
	machine, err := memlimit.FromSystem()
	if err != nil {
		return 0, err
	}
	if cgroup, err := memlimit.FromCgroup(); err == nil && cgroup < machine {
		return cgroup, nil
	}
	return machine, nil
}
