package httpretry

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"30"}}, 30 * time.Second},
		{"fractional seconds", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{"date", http.Header{"Retry-After": {now.Add(2 * time.Minute).Format(http.TimeFormat)}}, 2 * time.Minute},
		{"past date", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"milliseconds win", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"30"}}, 250 * time.Millisecond},
		{"bad milliseconds fall back", http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"3"}}, 3 * time.Second},
		{"negative", http.Header{"Retry-After": {"-5"}}, 0},
		{"nonsense", http.Header{"Retry-After": {"tomorrow"}}, 0},
		{"absurd", http.Header{"Retry-After": {"1e12"}}, 0},
	} {
		require.Equal(t, tc.want, After(tc.header, now), tc.name)
	}
}
