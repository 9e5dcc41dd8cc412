package egress_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/egress"
)

// fakeResolver answers from a table; names not in it do not exist.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]string
	// next, if set for a name, is answered instead from the second lookup
	// on: a rebinding DNS server.
	next    map[string][]string
	lookups map[string]int
}

func (r *fakeResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lookups == nil {
		r.lookups = make(map[string]int)
	}
	r.lookups[host]++
	ans, ok := r.answers[host]
	if n, rebind := r.next[host]; rebind && r.lookups[host] > 1 {
		ans, ok = n, true
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, len(ans))
	for i, a := range ans {
		out[i] = net.IPAddr{IP: net.ParseIP(a)}
	}
	return out, nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

// fakeDialer records the addresses dialled; an address in fail fails.
type fakeDialer struct {
	mu     sync.Mutex
	dialed []string
	fail   map[string]error
}

func (d *fakeDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	err := d.fail[addr]
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

func (d *fakeDialer) addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

func TestNewPolicyRejectsInvalidEntries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		entry, want string
	}{
		{"", "is empty"},
		{" api.example.com", "space"},
		{"https://api.example.com", "not a URL"},
		{"10.0.0.0/8", "ranges are not supported"},
		{"api.example.com:443", "must not have a port"},
		{"*", "wildcard"},
		{"*.com", "at least two labels"},
		{"api.*.example.com", `leading "*."`},
		{"a..example.com", "empty label"},
		{"-a.example.com", "starts or ends with '-'"},
		{"exa mple.com", "invalid character"},
		{"bücher.example", "xn--"},
		{"127.1", "looks like an IP address"},
		{"fe80::1%eth0", "zone"},
		{"[::1", "not a valid IP address"},
		{"[api.example.com]", "not a valid IP address"},
	}
	for _, tc := range tests {
		t.Run(tc.entry, func(t *testing.T) {
			t.Parallel()
			_, err := egress.NewPolicy([]string{"ok.example.com", tc.entry})
			require.Error(t, err)
			require.Contains(t, err.Error(), `allow[1] "`+tc.entry+`"`)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestNewPolicyAcceptsEntries(t *testing.T) {
	t.Parallel()
	_, err := egress.NewPolicy([]string{"API.Example.com.", "*.example.org", "1.1.1.1", "2606:4700::1111", "[2001:4860::8888]", "_svc.example.net", "xn--bcher-kva.example"})
	require.NoError(t, err)
	_, err = egress.NewPolicy(nil)
	require.NoError(t, err)
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	p, err := egress.NewPolicy(nil)
	require.NoError(t, err)
	_, err = p.WithConfig(egress.Config{Ports: []int{443, 0}})
	require.ErrorContains(t, err, "Ports[1]")
	_, err = p.WithConfig(egress.Config{IdleTimeout: -1})
	require.ErrorContains(t, err, "IdleTimeout")
	_, err = p.WithConfig(egress.Config{MaxHeaderBytes: -1})
	require.ErrorContains(t, err, "MaxHeaderBytes")
}

func TestPolicyDial(t *testing.T) {
	t.Parallel()
	allow := []string{
		"api.example.com", "*.example.org", "1.1.1.1", "2606:4700::1111",
		"rebind.example.com", "mixed.example.com", "v6.example.com", "optin.example.com", "10.9.9.9",
		"dual.example.com", "gone.example.com", "empty.example.com",
	}
	answers := map[string][]string{
		"api.example.com":    {"93.184.216.34"},
		"a.example.org":      {"93.184.216.35"},
		"a.b.example.org":    {"93.184.216.36"},
		"example.org":        {"93.184.216.37"},
		"mixed.example.com":  {"93.184.216.34", "127.0.0.1"},
		"v6.example.com":     {"2606:2800:220:1:248:1893:25c8:1946"},
		"optin.example.com":  {"10.9.9.9"},
		"dual.example.com":   {"2606:2800:220:1:248:1893:25c8:1946", "93.184.216.34"},
		"empty.example.com":  {},
		"unlisted.example":   {"93.184.216.34"},
		"rebind.example.com": nil, // filled per case
	}
	type tc struct {
		name    string
		network string
		host    string
		port    int
		rebind  []string // answers for rebind.example.com
		allowed bool
		reason  string // substring of Event.Reason
		dialed  string // the address the dialer got
		evHost  string // Event.Host when it differs from host
	}
	tests := []tc{
		{name: "exact name", host: "api.example.com", port: 443, allowed: true, dialed: "93.184.216.34:443"},
		{name: "exact name any case, trailing dot", host: "API.Example.COM.", port: 80, allowed: true, dialed: "93.184.216.34:80", evHost: "api.example.com"},
		{name: "unlisted name", host: "unlisted.example", port: 443, reason: "not in the allowlist"},
		{name: "suffix without the dot", host: "evilapi.example.com", port: 443, reason: "not in the allowlist"},
		{name: "wildcard subdomain", host: "a.example.org", port: 443, allowed: true, dialed: "93.184.216.35:443"},
		{name: "wildcard deeper subdomain", host: "a.b.example.org", port: 443, allowed: true, dialed: "93.184.216.36:443"},
		{name: "wildcard not the apex", host: "example.org", port: 443, reason: "not in the allowlist"},
		{name: "wildcard not a lookalike", host: "badexample.org", port: 443, reason: "not in the allowlist"},
		{name: "listed public literal", host: "1.1.1.1", port: 443, allowed: true, dialed: "1.1.1.1:443"},
		{name: "unlisted public literal", host: "9.9.9.9", port: 443, reason: "IP address is not in the allowlist"},
		{name: "listed IPv6 literal bracketed", host: "[2606:4700::1111]", port: 443, allowed: true, dialed: "[2606:4700::1111]:443", evHost: "2606:4700::1111"},
		{name: "unlisted loopback literal", host: "127.0.0.1", port: 80, reason: "not in the allowlist"},
		{name: "unlisted IPv6 loopback", host: "::1", port: 80, reason: "not in the allowlist"},
		{name: "unlisted mapped loopback", host: "::ffff:127.0.0.1", port: 80, reason: "not in the allowlist"},
		{name: "unlisted private literal", host: "10.0.0.1", port: 80, reason: "not in the allowlist"},
		{name: "unlisted metadata literal", host: "169.254.169.254", port: 80, reason: "not in the allowlist"},
		{name: "listed private literal is the operator's opt-in", host: "10.9.9.9", port: 80, allowed: true, dialed: "10.9.9.9:80"},
		{name: "mapped form of a listed literal", host: "::ffff:10.9.9.9", port: 80, allowed: true, dialed: "10.9.9.9:80", evHost: "::ffff:10.9.9.9"},
		{name: "zone", host: "fe80::1%eth0", port: 80, reason: "zone"},
		{name: "port not allowed", host: "api.example.com", port: 8080, reason: "port 8080 is not allowed (allowed: 80, 443)"},
		{name: "port zero", host: "api.example.com", port: 0, reason: "port 0"},
		{name: "udp", network: "udp", host: "api.example.com", port: 443, reason: `network "udp"`},
		{name: "invalid name", host: "a b.example.com", port: 443, reason: "invalid host name"},
		{name: "empty host", host: "", port: 443, reason: "invalid host name"},
		{name: "IPv6 answer", host: "v6.example.com", port: 443, allowed: true, dialed: "[2606:2800:220:1:248:1893:25c8:1946]:443"},
		{name: "tcp4 picks the IPv4 answer", network: "tcp4", host: "dual.example.com", port: 443, allowed: true, dialed: "93.184.216.34:443"},
		{name: "tcp4 without IPv4 answer", network: "tcp4", host: "v6.example.com", port: 443, reason: "has no IPv4 address"},
		{name: "listed private address a name may resolve to", host: "optin.example.com", port: 443, allowed: true, dialed: "10.9.9.9:443"},
		{name: "mixed answers refused whole", host: "mixed.example.com", port: 443, reason: "resolves to 127.0.0.1 (loopback)"},
		{name: "no answers", host: "empty.example.com", port: 443, reason: "resolves to no address"},
		{name: "lookup failure", host: "gone.example.com", port: 443, reason: "resolve: "},
	}
	for _, addr := range []struct{ ip, class string }{
		{"127.0.0.1", "loopback"},
		{"127.8.9.10", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"169.254.169.254", "169.254.169.254 (metadata)"},
		{"169.254.1.1", "link-local"},
		{"100.64.0.1", "CGNAT"},
		{"100.100.100.200", "CGNAT"},
		{"0.0.0.0", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"192.0.0.192", "reserved"},
		{"::1", "loopback"},
		{"::", "unspecified"},
		{"fe80::1", "link-local"},
		{"fc00::1", "unique-local"},
		{"fd00:ec2::254", "fd00:ec2::254 (metadata)"},
		{"ff02::1", "multicast"},
		{"::ffff:127.0.0.1", "127.0.0.1 (loopback)"},
		{"::ffff:169.254.169.254", "169.254.169.254 (metadata)"},
		{"64:ff9b::a9fe:a9fe", "metadata (embedded 169.254.169.254)"},
		{"2002:7f00:1::", "loopback (embedded 127.0.0.1)"},
		{"::127.0.0.1", "reserved"},
		{"2001::1", "reserved"},
	} {
		tests = append(tests, tc{
			name: "rebinding to " + addr.ip, host: "rebind.example.com", port: 443,
			rebind: []string{addr.ip}, reason: addr.class,
		})
	}
	// Only the literal opt-in lets a name resolve to a special address.
	tests = append(tests, tc{name: "rebinding to the listed 10.9.9.9", host: "rebind.example.com", port: 443, rebind: []string{"10.9.9.9"}, allowed: true, dialed: "10.9.9.9:443"})

	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ans := make(map[string][]string, len(answers))
			for k, v := range answers {
				ans[k] = v
			}
			ans["rebind.example.com"] = c.rebind
			res := &fakeResolver{answers: ans}
			dialer := &fakeDialer{}
			p, err := egress.NewPolicy(allow)
			require.NoError(t, err)
			p, err = p.WithConfig(egress.Config{Resolver: res, Dialer: dialer})
			require.NoError(t, err)
			network := c.network
			if network == "" {
				network = "tcp"
			}
			conn, ev, err := p.Dial(t.Context(), network, c.host, c.port)
			wantHost := c.evHost
			if wantHost == "" {
				wantHost = c.host
			}
			require.Equal(t, wantHost, ev.Host)
			require.Equal(t, c.port, ev.Port)
			require.Equal(t, c.allowed, ev.Allowed, "reason: %s", ev.Reason)
			require.Empty(t, ev.Via, "the caller names the path")
			if c.allowed {
				require.NoError(t, err)
				require.NotNil(t, conn)
				conn.Close()
				require.Equal(t, []string{c.dialed}, dialer.addrs())
				host, _, _ := net.SplitHostPort(c.dialed)
				require.Equal(t, host, ev.Address)
				require.Empty(t, ev.Reason)
				return
			}
			require.Error(t, err)
			require.Nil(t, conn)
			require.Contains(t, ev.Reason, c.reason)
			require.Empty(t, dialer.addrs(), "a refused destination is never dialled")
			require.Empty(t, ev.Address)
			if c.reason != "resolve: " {
				var refused *egress.RefusedError
				require.ErrorAs(t, err, &refused)
				require.Equal(t, ev.Reason, refused.Reason)
			}
		})
	}
}

func TestPolicyDialUnlistedNameIsNeverResolved(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{answers: map[string][]string{"evil.example": {"93.184.216.34"}}}
	p, err := egress.NewPolicy([]string{"api.example.com"})
	require.NoError(t, err)
	p, err = p.WithConfig(egress.Config{Resolver: res, Dialer: &fakeDialer{}})
	require.NoError(t, err)
	_, _, err = p.Dial(t.Context(), "tcp", "evil.example", 443)
	require.Error(t, err)
	require.Zero(t, res.count("evil.example"), "looking a name up leaks it to DNS")
}

// A rebinding DNS server answers a public address to the check and a
// private one afterwards: the dial must use the checked address and never
// look the name up again.
func TestPolicyDialNeverReResolves(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{
		answers: map[string][]string{"api.example.com": {"93.184.216.34"}},
		next:    map[string][]string{"api.example.com": {"127.0.0.1"}},
	}
	dialer := &fakeDialer{}
	p, err := egress.NewPolicy([]string{"api.example.com"})
	require.NoError(t, err)
	p, err = p.WithConfig(egress.Config{Resolver: res, Dialer: dialer})
	require.NoError(t, err)

	conn, ev, err := p.Dial(t.Context(), "tcp", "api.example.com", 443)
	require.NoError(t, err)
	conn.Close()
	require.True(t, ev.Allowed)
	require.Equal(t, 1, res.count("api.example.com"))
	require.Equal(t, []string{"93.184.216.34:443"}, dialer.addrs())

	// The second lookup rebinds: refused, nothing dialled.
	_, ev, err = p.Dial(t.Context(), "tcp", "api.example.com", 443)
	require.Error(t, err)
	require.False(t, ev.Allowed)
	require.Contains(t, ev.Reason, "resolves to 127.0.0.1 (loopback)")
	require.Equal(t, []string{"93.184.216.34:443"}, dialer.addrs())
}

func TestPolicyDialTriesEveryCheckedAddress(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{answers: map[string][]string{"api.example.com": {"93.184.216.34", "93.184.216.35"}}}
	refused := errors.New("connection refused")
	dialer := &fakeDialer{fail: map[string]error{"93.184.216.34:443": refused}}
	p, err := egress.NewPolicy([]string{"api.example.com"})
	require.NoError(t, err)
	p, err = p.WithConfig(egress.Config{Resolver: res, Dialer: dialer})
	require.NoError(t, err)
	conn, ev, err := p.Dial(t.Context(), "tcp", "api.example.com", 443)
	require.NoError(t, err)
	conn.Close()
	require.Equal(t, "93.184.216.35", ev.Address)
	require.Equal(t, []string{"93.184.216.34:443", "93.184.216.35:443"}, dialer.addrs())

	// All fail: allowed by the policy, the failure in Reason and the error.
	dialer.fail["93.184.216.35:443"] = refused
	_, ev, err = p.Dial(t.Context(), "tcp", "api.example.com", 443)
	require.ErrorIs(t, err, refused)
	var refusal *egress.RefusedError
	require.False(t, errors.As(err, &refusal), "a failed connection is not a policy refusal")
	require.True(t, ev.Allowed)
	require.Equal(t, "connect: connection refused", ev.Reason)
}

// Listing the metadata address literally is the explicit opt-in for it, and
// then for names that resolve to it.
func TestPolicyMetadataOptIn(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{answers: map[string][]string{"meta.example.com": {"169.254.169.254"}}}
	dialer := &fakeDialer{}
	p, err := egress.NewPolicy([]string{"169.254.169.254", "meta.example.com"})
	require.NoError(t, err)
	p, err = p.WithConfig(egress.Config{Resolver: res, Dialer: dialer})
	require.NoError(t, err)
	for _, host := range []string{"169.254.169.254", "meta.example.com"} {
		conn, ev, err := p.Dial(t.Context(), "tcp", host, 80)
		require.NoError(t, err, host)
		conn.Close()
		require.True(t, ev.Allowed)
		require.Equal(t, "169.254.169.254", ev.Address)
	}
	require.Equal(t, []string{"169.254.169.254:80", "169.254.169.254:80"}, dialer.addrs())
}

func TestPolicyPorts(t *testing.T) {
	t.Parallel()
	p, err := egress.NewPolicy([]string{"1.1.1.1"})
	require.NoError(t, err)
	p, err = p.WithConfig(egress.Config{Dialer: &fakeDialer{}, Ports: []int{8443}})
	require.NoError(t, err)
	conn, _, err := p.Dial(t.Context(), "tcp", "1.1.1.1", 8443)
	require.NoError(t, err)
	conn.Close()
	_, ev, err := p.Dial(t.Context(), "tcp", "1.1.1.1", 443)
	require.Error(t, err)
	require.Equal(t, "port 443 is not allowed (allowed: 8443)", ev.Reason)
}

func TestZeroPolicyRefuses(t *testing.T) {
	t.Parallel()
	var p egress.Policy
	_, ev, err := p.Dial(t.Context(), "tcp", "api.example.com", 443)
	var refused *egress.RefusedError
	require.ErrorAs(t, err, &refused)
	require.False(t, ev.Allowed)
}
