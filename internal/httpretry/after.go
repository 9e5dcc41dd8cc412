package httpretry

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// After is how long h asks to wait: retry-after-ms (milliseconds), else
// Retry-After (seconds, or an HTTP date measured from now). Absent,
// malformed, negative or past values are 0 (the caller's backoff applies);
// callers cap the result as their schedule requires.
func After(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	return Value(h.Get("Retry-After"), now)
}

// Value parses one Retry-After value: seconds (fractions accepted) or an
// HTTP date.
func Value(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e9 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
