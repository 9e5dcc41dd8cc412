package mcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// DialFunc opens a TCP connection to host:port if the session's network
// policy allows it (egress.Policy.Dial, reporting the decision).
type DialFunc func(ctx context.Context, network, host string, port int) (net.Conn, error)

// HTTP is the Dialer of a streamable HTTP server: each Dial is a new MCP
// session at URL. Every connection goes through Network, so the session's
// network allowlist applies to it as to everything else; the credentials
// Headers gives for a request's host are added to it, from outside the
// sandbox.
type HTTP struct {
	URL     string
	Network DialFunc
	// Headers returns the credentials to add to a request to host (the
	// vault secret of the tools entry, when it is bound to host). Nil:
	// none.
	Headers func(host string) []tool.Credential
}

// Dial implements Dialer.
func (d *HTTP) Dial(ctx context.Context) (*Link, error) {
	u, err := url.Parse(d.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url: %q is not an http(s) URL", d.URL)
	}
	if d.Network == nil {
		return nil, errors.New("the session has no network (environment.network.allow lists no host)")
	}
	transport := &http.Transport{
		Proxy: nil, // the policy decides where to connect; no proxy in between
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, portStr, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("dial %s: %w", addr, err)
			}
			port, err := strconv.Atoi(portStr)
			if err != nil {
				return nil, fmt.Errorf("dial %s: bad port", addr)
			}
			return d.Network(ctx, network, host, port)
		},
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  time.Minute,
		MaxResponseHeaderBytes: 64 << 10,
	}
	client := &http.Client{Transport: &credentials{next: transport, headers: d.Headers}}
	return &Link{
		Transport: &sdk.StreamableClientTransport{Endpoint: d.URL, HTTPClient: client, MaxRetries: -1, DisableStandaloneSSE: true},
		Close:     transport.CloseIdleConnections,
	}, nil
}

// credentials adds a host's credentials to each request to it (also after
// a redirect to another host, which gets that host's, if any).
type credentials struct {
	next    http.RoundTripper
	headers func(host string) []tool.Credential
}

func (c *credentials) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.headers != nil {
		creds := c.headers(hostPort(req.URL))
		if len(creds) > 0 {
			req = req.Clone(req.Context())
			for _, cr := range creds {
				req.Header.Set(cr.Header, cr.Value)
			}
		}
	}
	return c.next.RoundTrip(req)
}

// hostPort is a URL's host and port, the port filled in from the scheme:
// what a secret's host binding is matched against.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}
