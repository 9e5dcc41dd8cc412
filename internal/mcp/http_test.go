package mcp_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/mcp"
	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// TestHTTPServerThroughThePolicy: a streamable HTTP server is reached only
// through the session's egress policy (each decision reported), with the
// vault's credential for its host added from outside the sandbox; a host
// the policy refuses is never connected to.
func TestHTTPServerThroughThePolicy(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var auth []string
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server {
		return mcptest.NewServer(mcptest.Options{Dir: t.TempDir()})
	}, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)

	dialVia := func(allow []string) (mcp.DialFunc, *[]egress.Event) {
		p, err := egress.NewPolicy(allow)
		require.NoError(t, err)
		p, err = p.WithConfig(egress.Config{Ports: []int{port}})
		require.NoError(t, err)
		var events []egress.Event
		return func(ctx context.Context, network, host string, port int) (net.Conn, error) {
			c, ev, err := p.Dial(ctx, network, host, port)
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
			return c, err
		}, &events
	}
	dial, events := dialVia([]string{"127.0.0.1"})
	d := &mcp.HTTP{URL: srv.URL + "/mcp", Network: dial, Headers: func(host string) []tool.Credential {
		if host == srv.Listener.Addr().String() { // with the port: a binding may name one
			return []tool.Credential{{Name: "DOCS_TOKEN", Header: "Authorization", Value: "Bearer test-token-123"}}
		}
		return nil
	}}
	m := newManager(t, d, &instantAfter{})
	res := m.Call(t.Context(), &mcp.CallRequest{Server: "test", Tool: "echo", Arguments: json.RawMessage(`{"text":"over http"}`)})
	require.Empty(t, res.Error)
	out, err := json.Marshal(res.Output)
	require.NoError(t, err)
	require.Contains(t, string(out), "echo: over http")
	mu.Lock()
	require.NotEmpty(t, auth)
	for _, a := range auth {
		require.Equal(t, "Bearer test-token-123", a)
	}
	require.NotEmpty(t, *events)
	require.True(t, (*events)[0].Allowed)
	mu.Unlock()

	// Not on the allowlist: refused, never connected.
	refusedDial, refused := dialVia([]string{"api.example.com"})
	m2 := newManager(t, &mcp.HTTP{URL: srv.URL + "/mcp", Network: refusedDial}, &instantAfter{})
	res = m2.Call(t.Context(), &mcp.CallRequest{Server: "test", Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	require.Contains(t, res.Error, "unavailable")
	require.False(t, res.Unknown)
	mu.Lock()
	require.NotEmpty(t, *refused)
	require.False(t, (*refused)[0].Allowed)
	require.Contains(t, (*refused)[0].Reason, "not in the allowlist")
	mu.Unlock()

	// No network at all.
	m3 := newManager(t, &mcp.HTTP{URL: srv.URL + "/mcp"}, &instantAfter{})
	_, err = m3.List(t.Context(), "test")
	require.ErrorContains(t, err, "the session has no network")
}
