package egress_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/egress"
)

// A public policy allows any name and any public address, refuses the
// refused classes (also behind a name) unless the address is listed.
func TestPublicPolicy(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{answers: map[string][]string{
		"hooks.example.com": {"93.184.216.34"},
		"inner.example.com": {"10.0.0.5"},
		"local.example.com": {"127.0.0.1"},
	}}
	dial := &fakeDialer{}
	base, err := egress.NewPublicPolicy([]string{"127.0.0.1"})
	require.NoError(t, err)
	p, err := base.WithConfig(egress.Config{Resolver: res, Dialer: dial})
	require.NoError(t, err)

	for _, host := range []string{"hooks.example.com", "93.184.216.34", "local.example.com", "127.0.0.1"} {
		conn, ev, err := p.Dial(t.Context(), "tcp", host, 443)
		require.NoError(t, err, host)
		require.True(t, ev.Allowed)
		require.NoError(t, conn.Close())
	}
	for host, reason := range map[string]string{
		"inner.example.com": "resolves to 10.0.0.5 (private)",
		"169.254.169.254":   "169.254.169.254 is a metadata address",
		"10.1.2.3":          "10.1.2.3 is a private address",
		"::1":               "::1 is a loopback address",
	} {
		_, _, err := p.Dial(t.Context(), "tcp", host, 443)
		var refused *egress.RefusedError
		require.True(t, errors.As(err, &refused), host)
		require.Equal(t, reason, refused.Reason, host)
	}
	_, _, err = p.Dial(t.Context(), "tcp", "hooks.example.com", 8080)
	require.ErrorContains(t, err, "port 8080 is not allowed")

	_, err = egress.NewPublicPolicy([]string{"10.0.0.0/8"})
	require.ErrorContains(t, err, `allow private[0] "10.0.0.0/8"`)
}
