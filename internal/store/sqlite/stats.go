package sqlite

import "time"

// Stats counts the driver's work since Open, for benchmarks and metrics.
type Stats struct {
	// Commits is the number of committed write transactions: one fsync each,
	// however many appends group commit put in it.
	Commits int64
	// Writes is the number of write requests (appends, claims, ...) committed.
	Writes int64
	// Busy is the time the writer spent running batches, their commits
	// (and fsyncs) included: over a run's wall time, how close the single
	// writer came to being the bottleneck.
	Busy time.Duration
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.w.commits.Load(), Writes: s.w.executed.Load(), Busy: time.Duration(s.w.busy.Load())}
}
