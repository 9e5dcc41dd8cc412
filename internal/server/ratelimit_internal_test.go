package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// TestAddressBucket: an IPv6 host counts as its /64 (it may hold every
// address of it), an IPv4 one as its address, a mapped IPv4 as IPv4.
func TestAddressBucket(t *testing.T) {
	t.Parallel()
	require.Equal(t, "2001:db8:1:2::/64", addressBucket("2001:db8:1:2::1"))
	require.Equal(t, addressBucket("2001:db8:1:2::1"), addressBucket("2001:db8:1:2:ffff:ffff:ffff:ffff"))
	require.NotEqual(t, addressBucket("2001:db8:1:2::1"), addressBucket("2001:db8:1:3::1"))
	require.Equal(t, "2001:db8:1:2::/64", addressBucket("2001:db8:1:2::1%eth0"), "the zone does not make another bucket")
	require.Equal(t, "192.0.2.7", addressBucket("192.0.2.7"))
	require.Equal(t, "192.0.2.7", addressBucket("::ffff:192.0.2.7"))
	require.Equal(t, "not-an-ip", addressBucket("not-an-ip"))
}

// TestSweepKeepsDrainedKeyBuckets: past the bound, a flood from many
// addresses pushes out address buckets, never a drained key's: the key
// stays limited.
func TestSweepKeepsDrainedKeyBuckets(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	l := newLimiters(RateLimits{ClassRead: {Limit: rate.Every(time.Hour), Burst: 1}}, 8)
	require.Zero(t, l.take("key:key_1", ClassRead, now))
	require.NotZero(t, l.take("key:key_1", ClassRead, now), "drained")
	for i := range 100 {
		l.take(fmt.Sprintf("%s2001:db8:%x::/64", addressPrefix, i), ClassRead, now)
		require.LessOrEqual(t, l.size(), 8)
	}
	require.NotZero(t, l.take("key:key_1", ClassRead, now), "still drained after the flood")
}
