package main

import (
	"os"
	"runtime/debug"
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
// keeps its limit with this percent.

// defaultGCPercent is the GOGC a longhaul process runs with when its
// environment sets none. 400 took most of what the collector gave back in
// measurements (200 about half of it, 800 little more than 400).
const defaultGCPercent = 400

// gcSettings is what tuneGC changes: a zero field is left as the runtime
// read it from the environment.
type gcSettings struct {
	percent int   // GOGC
	limit   int64 // GOMEMLIMIT, bytes
}

// gcDefaults decides the collector's settings from the environment (read
// through getenv) and the memory available to the process (bytes, 0 when
// unknown). Without a known bound (neither GOMEMLIMIT nor the machine's
// memory) it changes nothing: a higher percent is only safe with a limit.
func gcDefaults(getenv func(string) string, memory int64) gcSettings {
	if getenv("GOGC") != "" {
		return gcSettings{}
	}
	if getenv("GOMEMLIMIT") != "" {
		return gcSettings{percent: defaultGCPercent}
	}
	if memory <= 0 {
		return gcSettings{}
	}
	// Half the memory: while the live heap is under a quarter of it, the
	// heap's goal stays at least twice the live heap, so the collector runs
	// no more often than with GOGC=100; past that the process was near the
	// memory's end with Go's default too. The other half is for what the
	// node runs beside it (sandboxes, browsers, a database).
	return gcSettings{percent: defaultGCPercent, limit: memory / 2}
}

// tuneGC applies gcDefaults to this process. It is main's (a process-wide
// setting): tests and embedders keep the runtime's defaults.
func tuneGC() {
	s := gcDefaults(os.Getenv, availableMemory())
	if s.percent > 0 {
		debug.SetGCPercent(s.percent)
	}
	if s.limit > 0 {
		debug.SetMemoryLimit(s.limit)
	}
}
