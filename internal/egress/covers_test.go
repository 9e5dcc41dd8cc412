package egress_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/egress"
)

// TestCovers: a child's allowlist entry is covered only when the parent's
// list allows every destination the entry would.
func TestCovers(t *testing.T) {
	parent, err := egress.NewPolicy([]string{"api.example.com", "*.corp.example", "127.0.0.1", "2001:4860::8888"})
	require.NoError(t, err)
	for _, tc := range []struct {
		entry string
		want  bool
	}{
		{"api.example.com", true},
		{"API.example.com.", true}, // the same name, written differently
		{"www.example.com", false},
		{"example.com", false},
		{"*.example.com", false}, // wider than one name
		{"a.corp.example", true},
		{"a.b.corp.example", true},
		{"corp.example", false}, // a wildcard is subdomains only
		{"*.corp.example", true},
		{"*.b.corp.example", true},
		{"*.xcorp.example", false},
		{"127.0.0.1", true},
		{"::ffff:127.0.0.1", true}, // the same address, mapped
		{"127.0.0.2", false},
		{"[2001:4860::8888]", true},
		{"8.8.8.8", false}, // a public literal must be listed too
		{"169.254.169.254", false},
		{"", false},
		{"http://api.example.com", false},
		{"*", false},
	} {
		require.Equal(t, tc.want, parent.Covers(tc.entry), "entry %q", tc.entry)
	}

	none, err := egress.NewPolicy(nil)
	require.NoError(t, err)
	require.False(t, none.Covers("127.0.0.1"), "no network covers nothing")
	require.False(t, none.Covers("api.example.com"))

	public, err := egress.NewPublicPolicy([]string{"127.0.0.1"})
	require.NoError(t, err)
	require.True(t, public.Covers("anything.example.org"))
	require.True(t, public.Covers("8.8.8.8"))
	require.True(t, public.Covers("127.0.0.1"))
	require.False(t, public.Covers("10.0.0.1"), "a refused class needs its literal listing")
}
