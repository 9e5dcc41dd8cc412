package server

import "time"

// SetTicker replaces the ping ticker of s's event streams (tests send ticks
// on demand instead of waiting for PingInterval).
func SetTicker(s *Server, newTicker func(d time.Duration) (<-chan time.Time, func())) {
	s.newTicker = newTicker
}

// LimiterCount is how many rate-limit buckets s holds.
func LimiterCount(s *Server) int {
	if s.limits == nil {
		return 0
	}
	return s.limits.size()
}
