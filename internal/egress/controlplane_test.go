package egress_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/egress"
)

// TestControlPlaneRefusedEvenWhenListed: the server's own listeners and its
// database are refused by IP and port, whatever the allowlist says and
// however the address is written; other ports of the same address, and
// other addresses, are judged by the allowlist as before.
func TestControlPlaneRefusedEvenWhenListed(t *testing.T) {
	t.Parallel()
	cp := &egress.ControlPlane{}
	require.NoError(t, cp.Set(egress.GroupListen, "the server's own API", []string{"127.0.0.1:8080"}))
	require.NoError(t, cp.Set(egress.GroupDatabase, "the server's own database", []string{"db.internal:5432"}))
	require.NoError(t, cp.Set(egress.GroupNodes, "another node's API", []string{"[::]:9090", "10.0.0.9:8080"}))
	require.Equal(t, []string{"db.internal:5432", "127.0.0.1:8080", "[::]:9090", "10.0.0.9:8080"}, cp.Addresses())

	r := &fakeResolver{answers: map[string][]string{
		"localhost":    {"127.0.0.1", "::1"},
		"db.internal":  {"10.0.0.5"},
		"alias.corp":   {"10.0.0.5"},
		"public.corp":  {"203.0.114.7"},
		"rebound.corp": {"127.0.0.1"},
	}}
	allow := []string{"127.0.0.1", "::1", "0.0.0.0", "::", "10.0.0.5", "10.0.0.9", "localhost", "alias.corp", "rebound.corp", "127.0.0.2", "203.0.114.7"}
	p, err := egress.NewPolicy(allow)
	require.NoError(t, err)
	d := &fakeDialer{}
	p, err = p.WithConfig(egress.Config{Resolver: r, Dialer: d, Ports: []int{80, 5432, 8080, 9090}, ControlPlane: cp})
	require.NoError(t, err)

	for _, tc := range []struct {
		host string
		port int
		what string
	}{
		{"127.0.0.1", 8080, "the server's own API"},
		{"localhost", 8080, "the server's own API"},
		{"[::ffff:127.0.0.1]", 8080, "the server's own API"},
		{"0.0.0.0", 8080, "the server's own API"},
		{"127.0.0.2", 8080, "the server's own API"},
		{"rebound.corp", 8080, "the server's own API"},
		{"10.0.0.5", 5432, "the server's own database"},
		{"alias.corp", 5432, "the server's own database"},
		// A listener on [::] is on every local address at its port.
		{"127.0.0.1", 9090, "another node's API"},
		{"::1", 9090, "another node's API"},
		{"::", 9090, "another node's API"},
		{"0.0.0.0", 9090, "another node's API"},
		{"10.0.0.9", 8080, "another node's API"},
	} {
		_, ev, err := p.Dial(t.Context(), "tcp", tc.host, tc.port)
		var refused *egress.RefusedError
		require.True(t, errors.As(err, &refused), "%s:%d: %v", tc.host, tc.port, err)
		require.Contains(t, refused.Reason, tc.what, tc.host)
		require.Contains(t, refused.Reason, "may not reach its own control plane")
		require.False(t, ev.Allowed)
	}
	require.Empty(t, d.addrs(), "nothing of the control plane was dialled")

	// The same addresses at other ports, and a public address at a
	// control plane port, are not the control plane.
	for _, tc := range []struct {
		host string
		port int
	}{
		{"127.0.0.1", 80}, {"localhost", 80}, {"10.0.0.5", 8080}, {"10.0.0.9", 5432}, {"203.0.114.7", 8080},
	} {
		_, ev, err := p.Dial(t.Context(), "tcp", tc.host, tc.port)
		require.NoError(t, err, "%s:%d", tc.host, tc.port)
		require.True(t, ev.Allowed)
	}
}

// TestControlPlaneOnEveryInterface: a listener on 0.0.0.0 is reached on
// the host's own interface addresses too, which are not loopback.
func TestControlPlaneOnEveryInterface(t *testing.T) {
	t.Parallel()
	cp := egress.NewControlPlaneForTest(func() []string { return []string{"192.168.7.20", "2001:db8::20"} })
	require.NoError(t, cp.Set(egress.GroupListen, "the server's own API", []string{"0.0.0.0:8080"}))
	for _, tc := range []struct {
		host   string
		port   int
		reason string
	}{
		{"192.168.7.20", 8080, "the server's own API"},
		{"2001:db8::20", 8080, "the server's own API"},
		{"127.0.0.1", 8080, "the server's own API"},
		{"192.168.7.21", 8080, ""},
		{"192.168.7.20", 8081, ""},
	} {
		require.Contains(t, cp.Check(t.Context(), tc.host, tc.port), tc.reason, "%s:%d", tc.host, tc.port)
		if tc.reason == "" {
			require.Empty(t, cp.Check(t.Context(), tc.host, tc.port))
		}
	}
}

// TestControlPlaneKeptByWithConfig: a later WithConfig without a control
// plane does not drop it (the proxy re-applies its own Config).
func TestControlPlaneKeptByWithConfig(t *testing.T) {
	t.Parallel()
	cp := &egress.ControlPlane{}
	require.NoError(t, cp.Add(egress.GroupListen, "the server's own API", "127.0.0.1:8080"))
	p, err := egress.NewPolicy([]string{"127.0.0.1"})
	require.NoError(t, err)
	p, err = p.WithConfig(egress.Config{Ports: []int{8080}, ControlPlane: cp})
	require.NoError(t, err)
	p, err = p.WithConfig(egress.Config{Ports: []int{8080}, Dialer: &fakeDialer{}})
	require.NoError(t, err)
	_, _, err = p.Dial(t.Context(), "tcp", "127.0.0.1", 8080)
	var refused *egress.RefusedError
	require.ErrorAs(t, err, &refused)
}

func TestControlPlaneRejectsBadEntries(t *testing.T) {
	t.Parallel()
	cp := &egress.ControlPlane{}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "bad host:80", "http://x:80"} {
		require.Error(t, cp.Set(egress.GroupExtra, "x", []string{bad}), bad)
	}
	require.NoError(t, cp.Set(egress.GroupExtra, "x", []string{":8080", "localhost:8080", "[::1]:8080"}))
	require.Equal(t, []string{"[::]:8080", "localhost:8080", "[::1]:8080"}, cp.Addresses())
}

// TestProxyRefusesTheControlPlane: through the proxy, CONNECT and plain
// HTTP to the server's own address are a 403 saying so, and nothing reaches
// it.
func TestProxyRefusesTheControlPlane(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	ln := srv.Listener
	port := strconv.Itoa(listenerPort(t, ln))
	cp := &egress.ControlPlane{}
	require.NoError(t, cp.Add(egress.GroupListen, "the server's own API", "0.0.0.0:"+port))
	h := startProxy(t, []string{"127.0.0.1", "localhost", "::1", "0.0.0.0"}, egress.Config{Ports: []int{listenerPort(t, ln)}, ControlPlane: cp, Resolver: &fakeResolver{answers: map[string][]string{"localhost": {"127.0.0.1", "::1"}}}})
	for _, target := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "0.0.0.0:" + port} {
		resp, body, _ := h.roundTrip(t, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		require.Equal(t, http.StatusForbidden, resp.StatusCode, target)
		require.Contains(t, body, "the server's own API", target)
		resp, body, _ = h.roundTrip(t, "POST http://"+target+"/v1/actions/act_1/decide HTTP/1.1\r\nHost: "+target+"\r\nContent-Length: 2\r\n\r\n{}")
		require.Equal(t, http.StatusForbidden, resp.StatusCode, target)
		require.Contains(t, body, "may not reach its own control plane", target)
	}
	require.Zero(t, hits.Load(), "the control plane received nothing")
}

// TestControlPlaneRefresher: the refresher keeps a group current, called at
// most once per interval; a failed refresh keeps what was known.
func TestControlPlaneRefresher(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	cp := &egress.ControlPlane{}
	calls := 0
	nodes := []string{"10.0.0.7:8080"}
	var fail error
	cp.SetRefresher(5*time.Second, func() time.Time { return now }, func(context.Context) error {
		calls++
		if fail != nil {
			return fail
		}
		return cp.Set(egress.GroupNodes, "another node's API", nodes)
	})
	require.Contains(t, cp.Check(t.Context(), "10.0.0.7", 8080), "another node's API")
	require.Equal(t, 1, calls)
	nodes = []string{"10.0.0.8:8080"}
	require.Empty(t, cp.Check(t.Context(), "10.0.0.8", 8080), "not refreshed yet")
	require.Equal(t, 1, calls)
	now = now.Add(5 * time.Second)
	require.Contains(t, cp.Check(t.Context(), "10.0.0.8", 8080), "another node's API", "refreshed once due")
	require.Equal(t, 2, calls)
	fail = errors.New("database down")
	now = now.Add(time.Minute)
	require.Contains(t, cp.Check(t.Context(), "10.0.0.8", 8080), "another node's API", "kept after a failed refresh")
	require.Contains(t, cp.Check(t.Context(), "10.0.0.8", 8080), "another node's API")
	require.Equal(t, 4, calls, "a failed refresh is tried again at the next check")
}
