package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func mustRateLimits(t *testing.T, spec string) server.RateLimits {
	t.Helper()
	l, err := server.ParseRateLimits(spec)
	require.NoError(t, err)
	return l
}

// TestRateLimitPerKey: a key past its class's limit is answered 429 with
// Retry-After (whole seconds, rounded up) and the error shape, until the
// clock has refilled its bucket; other keys and other classes are not
// touched; each 429 is in the audit log.
func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
	h, _, clock := auditHarness(t, server.Config{RateLimits: mustRateLimits(t, "write=1/m:2")})
	alice := h.createKey(`{"name": "alice", "role": "operator"}`)
	bob := h.createKey(`{"name": "bob", "role": "operator"}`)

	cancel := func(token string) *response {
		return h.as(token, http.MethodPost, "/v1/sessions/ses_nope/cancel", `{}`)
	}
	require.Equal(t, http.StatusNotFound, cancel(alice.Key).status)
	require.Equal(t, http.StatusNotFound, cancel(alice.Key).status, "the burst is 2")
	r := cancel(alice.Key)
	e := requireError(t, r, http.StatusTooManyRequests, lt.CodeRateLimited, "")
	require.Contains(t, e.Message, "rate limit")
	require.Equal(t, "60", r.header.Get("Retry-After"), "a token a minute")

	require.Equal(t, http.StatusNotFound, cancel(bob.Key).status, "another key has its own bucket")
	require.Equal(t, http.StatusOK, h.as(alice.Key, http.MethodGet, "/v1/sessions", "").status, "reads are not limited")

	clock.Advance(20*time.Second + time.Millisecond)
	r = cancel(alice.Key)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "40", r.header.Get("Retry-After"), "rounded up: 39.999 s")
	clock.Advance(40 * time.Second)
	require.Equal(t, http.StatusNotFound, cancel(alice.Key).status, "refilled")
	require.Equal(t, http.StatusTooManyRequests, cancel(alice.Key).status, "and spent again")

	var limited []lt.AuditEntry
	for _, e := range h.auditEntries("?actor=alice").Data {
		if e.Status == http.StatusTooManyRequests {
			limited = append(limited, e)
		}
	}
	require.Len(t, limited, 3, "every 429 is audited")
	require.Equal(t, "POST /v1/sessions/{id}/cancel", limited[0].Route)
	require.Equal(t, alice.ID, limited[0].Actor.KeyID)
}

// TestRateLimitBadKeys: requests that authenticate as no one count
// against their address: once its bucket is empty, more are 429 before
// their key is looked up, and are audited.
func TestRateLimitBadKeys(t *testing.T) {
	t.Parallel()
	h, _, clock := auditHarness(t, server.Config{RateLimits: mustRateLimits(t, "read=2/m")})
	for i := range 2 {
		r := h.as(fmt.Sprintf("lh_guess%d-aaaaaaaaaaaaaaaa", i), http.MethodGet, "/v1/sessions", "")
		require.Equal(t, http.StatusUnauthorized, r.status, "guess %d", i)
	}
	r := h.as("lh_guess2-aaaaaaaaaaaaaaaa", http.MethodGet, "/v1/sessions", "")
	requireError(t, r, http.StatusTooManyRequests, lt.CodeRateLimited, "")
	require.Equal(t, "30", r.header.Get("Retry-After"))
	clock.Advance(30 * time.Second)
	require.Equal(t, http.StatusUnauthorized, h.as("lh_guess3-aaaaaaaaaaaaaaaa", http.MethodGet, "/v1/sessions", "").status)
	// While the address's bucket is empty, its refused requests are 429s,
	// but a valid key from the same address (behind a proxy, every user's)
	// is served: the guesses do not lock it out.
	requireError(t, h.as("lh_guess4-aaaaaaaaaaaaaaaa", http.MethodGet, "/v1/sessions", ""), http.StatusTooManyRequests, lt.CodeRateLimited, "")
	require.Equal(t, http.StatusOK, h.as("boot-key", http.MethodGet, "/v1/sessions", "").status)
	clock.Advance(30 * time.Second)

	entries := h.auditEntries("?actor=lh_guess2-a").Data
	require.Len(t, entries, 1)
	require.Equal(t, http.StatusTooManyRequests, entries[0].Status)
	require.Nil(t, entries[0].Actor)
	require.Equal(t, "lh_guess2-a", entries[0].KeyPrefix, "a refused key's first characters")
}

// TestRateLimitStreams: the event streams are a class of their own.
func TestRateLimitStreams(t *testing.T) {
	t.Parallel()
	h, _, _ := auditHarness(t, server.Config{RateLimits: mustRateLimits(t, "stream=1/h")})
	// An unknown session's stream is a 404 before it opens, and spends a
	// token all the same.
	require.Equal(t, http.StatusNotFound, h.as("boot-key", http.MethodGet, "/v1/sessions/ses_nope/events/stream", "").status)
	r := h.as("boot-key", http.MethodGet, "/v1/sessions/ses_nope/events/stream", "")
	requireError(t, r, http.StatusTooManyRequests, lt.CodeRateLimited, "")
	require.Equal(t, "3600", r.header.Get("Retry-After"))
	require.Equal(t, http.StatusOK, h.as("boot-key", http.MethodGet, "/v1/sessions", "").status, "reads are another class")
}

// TestRateLimiterMemoryBounded: the buckets are at most MaxLimiters,
// however many callers come.
func TestRateLimiterMemoryBounded(t *testing.T) {
	t.Parallel()
	h, _, _ := auditHarness(t, server.Config{RateLimits: mustRateLimits(t, "read=1/h:5"), MaxLimiters: 4})
	for i := range 10 {
		k := h.createKey(fmt.Sprintf(`{"name": "k%d", "role": "reader"}`, i))
		require.Equal(t, http.StatusOK, h.as(k.Key, http.MethodGet, "/v1/sessions", "").status)
		require.LessOrEqual(t, server.LimiterCount(h.srv), 4)
	}
}

// TestParseRateLimits: the spec's syntax, and errors that say what is
// wrong.
func TestParseRateLimits(t *testing.T) {
	t.Parallel()
	l, err := server.ParseRateLimits("read=100/s, write=20/s:40,stream=6/m")
	require.NoError(t, err)
	require.Equal(t, server.RateLimits{
		"read":   {Limit: 100, Burst: 100},
		"write":  {Limit: 20, Burst: 40},
		"stream": {Limit: 0.1, Burst: 6},
	}, l)
	l, err = server.ParseRateLimits("")
	require.NoError(t, err)
	require.Empty(t, l)
	for spec, msg := range map[string]string{
		"read":              "want CLASS=N/UNIT",
		"reads=1/s":         "the class must be one of read, write, stream",
		"read=1/s,read=2/s": "given twice",
		"read=0/s":          "at least 1",
		"read=1/d":          "the unit must be s, m or h",
		"read=1":            "want N/UNIT",
		"read=1/s:0":        "the burst",
		"read=x/s":          "the count",
	} {
		_, err := server.ParseRateLimits(spec)
		require.ErrorContains(t, err, msg, spec)
	}
}
