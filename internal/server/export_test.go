package server

import (
	"net/http"
	"time"

	"github.com/longhaul-dev/longhaul/internal/app"
)

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

// Authorize applies s's access rule to r (the authentication every /v1
// request pays before its handler; benchmarks time it alone).
func Authorize(s *Server, w http.ResponseWriter, r *http.Request) (app.Caller, error) {
	return s.authorize(w, r)
}
