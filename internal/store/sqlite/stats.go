package sqlite

// Stats counts the driver's work since Open, for benchmarks and metrics.
type Stats struct {
	// Commits is the number of committed write transactions: one fsync each,
	// however many appends group commit put in it.
	Commits int64
	// Writes is the number of write requests (appends, claims, ...) committed.
	Writes int64
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.w.commits.Load(), Writes: s.w.executed.Load()}
}
