package server

import "time"

// SetTicker replaces the ping ticker of s's event streams (tests send ticks
// on demand instead of waiting for PingInterval).
func SetTicker(s *Server, newTicker func(d time.Duration) (<-chan time.Time, func())) {
	s.newTicker = newTicker
}
