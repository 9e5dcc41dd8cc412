package tool_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// loopbackResolver answers 127.0.0.1 for the names it knows.
type loopbackResolver map[string]bool

func (r loopbackResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	if !r[host] {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}}, nil
}

// hostSecrets binds credentials to hosts and records which hosts were asked.
type hostSecrets struct {
	mu     sync.Mutex
	byHost map[string][]tool.Credential
	asked  []string
}

func (s *hostSecrets) ForHost(host string) []tool.Credential {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, host)
	// Bound by name here; the port binding is the vault's (internal/vault
	// tests it).
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		return nil
	}
	return s.byHost[name]
}

const (
	canaryToken = "canary-0123456789abcdef"
	canaryKey   = "canary-key-fedcba9876543210"
)

func newSecrets() *hostSecrets {
	return &hostSecrets{byHost: map[string][]tool.Credential{
		"api.example.com": {
			{Name: "API_TOKEN", Header: "Authorization", Value: "Bearer " + canaryToken},
			{Name: "API_KEY", Header: "X-Api-Key", Value: canaryKey},
		},
	}}
}

// echoed is what /echo answers: the request as the server saw it.
type echoed struct {
	Method  string              `json:"method"`
	Host    string              `json:"host"`
	Path    string              `json:"path"`
	Body    string              `json:"body"`
	Headers map[string][]string `json:"headers"`
}

// httpHarness is an HTTP server that api.example.com and other.example.net
// resolve to (127.0.0.1, listed literally: the explicit opt-in that lets the
// test reach loopback), and a tool configured to reach it.
type httpHarness struct {
	mu       sync.Mutex
	received map[string]echoed // by the request's id query parameter

	srv   *httptest.Server
	port  int
	tool  *tool.HTTPRequest
	allow []string
	slow  chan struct{}
}

func newHTTPHarness(t *testing.T) *httpHarness {
	t.Helper()
	h := &httpHarness{slow: make(chan struct{}), received: make(map[string]echoed)}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e := echoed{Method: r.Method, Host: r.Host, Path: r.URL.Path, Body: string(body), Headers: r.Header}
		h.mu.Lock()
		h.received[r.URL.Query().Get("id")] = e
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Set-Cookie", "session=abc")
		w.Header().Set("X-Ratelimit-Remaining", "41")
		w.Header().Set("X-Internal", "hidden")
		_ = json.NewEncoder(w).Encode(e)
	})
	mux.HandleFunc("/reflect", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/seen/"+r.Header.Get("X-Api-Key"))
		fmt.Fprintf(w, "you sent %q and %q", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		http.Redirect(w, r, r.URL.Query().Get("to"), code)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		if ra := r.URL.Query().Get("retry_after"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(code)
		io.WriteString(w, "status body")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("a", 99)+"é"+strings.Repeat("b", 1000))
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0xff, 0xfe, 0x00, 0x01})
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-h.slow:
		}
	})
	h.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(h.slow)
		h.srv.Close()
	})
	_, p, err := net.SplitHostPort(h.srv.Listener.Addr().String())
	require.NoError(t, err)
	h.port, err = strconv.Atoi(p)
	require.NoError(t, err)
	h.tool = &tool.HTTPRequest{Egress: egress.Config{
		Resolver: loopbackResolver{"api.example.com": true, "other.example.net": true, "unlisted.example.org": true},
		Ports:    []int{80, h.port},
	}}
	h.allow = []string{"api.example.com", "other.example.net", "127.0.0.1"}
	return h
}

// receivedBy returns the request /echo?id=id got, as the server saw it
// (the tool's output masks injected credentials).
func (h *httpHarness) receivedBy(t *testing.T, id string) echoed {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.received[id]
	require.True(t, ok, "no request with id %s", id)
	return e
}

func (h *httpHarness) url(host, path string) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(h.port)) + path
}

type httpCall struct {
	call   *tool.Call
	mu     sync.Mutex
	events []tool.NetworkEvent
}

func (h *httpHarness) newCall(t *testing.T, args map[string]any) *httpCall {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	c := &httpCall{}
	c.call = &tool.Call{
		SessionID: "ses_test", Arguments: raw, IdempotencyKey: "idem_ses_test_1_0",
		Network: &tool.NetworkPolicy{Allow: h.allow},
		OnNetwork: func(ev tool.NetworkEvent) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.events = append(c.events, ev)
		},
	}
	return c
}

func (c *httpCall) networkEvents() []tool.NetworkEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]tool.NetworkEvent(nil), c.events...)
}

func (h *httpHarness) run(t *testing.T, c *httpCall) (*tool.Result, *tool.HTTPRequestOutput) {
	t.Helper()
	res, err := h.tool.Run(t.Context(), c.call)
	require.NoError(t, err)
	out, _ := res.Output.(*tool.HTTPRequestOutput)
	return res, out
}

func decodeEcho(t *testing.T, out *tool.HTTPRequestOutput) echoed {
	t.Helper()
	require.NotNil(t, out)
	var e echoed
	require.NoError(t, json.Unmarshal([]byte(out.Body), &e), out.Body)
	return e
}

func TestHTTPRequestEffect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args       string
		idempotent bool
		want       lt.EffectClass
	}{
		{`{"method":"GET","url":"https://api.example.com/"}`, false, lt.EffectRead},
		{`{"method":"HEAD","url":"https://api.example.com/"}`, true, lt.EffectRead},
		{`{"method":"POST","url":"https://api.example.com/"}`, false, lt.EffectIrreversible},
		{`{"method":"POST","url":"https://api.example.com/"}`, true, lt.EffectIdempotent},
		{`{"method":"PUT"}`, true, lt.EffectIdempotent},
		{`{"method":"DELETE"}`, false, lt.EffectIrreversible},
		{`{"method":"get"}`, false, lt.EffectIrreversible},
		{`{"method":"TRACE"}`, true, lt.EffectIrreversible},
		{`not json`, true, lt.EffectIrreversible},
		{``, false, lt.EffectIrreversible},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, tool.HTTPRequestEffect(json.RawMessage(tc.args), tc.idempotent), "%s idempotent=%v", tc.args, tc.idempotent)
	}
	require.Equal(t, lt.EffectIrreversible, (&tool.HTTPRequest{}).Effect())
}

func TestHTTPRequestGet(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)
	c := h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/echo"), "headers": map[string]string{"Accept": "application/json"}})
	res, out := h.run(t, c)
	require.Empty(t, res.Error)
	require.Equal(t, http.StatusOK, out.Status)
	require.Equal(t, h.url("api.example.com", "/echo"), out.URL)
	require.False(t, out.Truncated)
	e := decodeEcho(t, out)
	require.Equal(t, "GET", e.Method)
	require.Equal(t, []string{"application/json"}, e.Headers["Accept"])
	require.Equal(t, []string{"longhaul-http_request"}, e.Headers["User-Agent"])
	require.Empty(t, e.Headers["Idempotency-Key"], "a read sends no idempotency key")
	// A safe subset of the response headers.
	require.Equal(t, "application/json", out.Headers["Content-Type"])
	require.Equal(t, "41", out.Headers["X-Ratelimit-Remaining"])
	require.NotContains(t, out.Headers, "Set-Cookie")
	require.NotContains(t, out.Headers, "X-Internal")
	require.Equal(t, []tool.NetworkEvent{{Via: "http_request", Host: "api.example.com", Port: h.port, Address: "127.0.0.1", Allowed: true}}, c.networkEvents())
}

func TestHTTPRequestIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)
	for _, tc := range []struct {
		effect lt.EffectClass
		want   []string
	}{
		{lt.EffectIdempotent, []string{"idem_ses_test_1_0"}},
		{lt.EffectIrreversible, nil},
		{"", nil},
	} {
		c := h.newCall(t, map[string]any{
			"method": "POST", "url": h.url("api.example.com", "/echo"), "body": `{"amount":5}`,
			// The model cannot choose the key of an idempotent call.
			"headers": map[string]string{"Idempotency-Key": "model-chosen"},
		})
		c.call.Effect = tc.effect
		res, out := h.run(t, c)
		require.Empty(t, res.Error)
		e := decodeEcho(t, out)
		require.Equal(t, "POST", e.Method)
		require.Equal(t, `{"amount":5}`, e.Body)
		require.Equal(t, []string{"application/json"}, e.Headers["Content-Type"])
		want := tc.want
		if want == nil {
			want = []string{"model-chosen"}
		}
		require.Equal(t, want, e.Headers["Idempotency-Key"], "effect %q", tc.effect)
	}
}

func TestHTTPRequestInjectsSecretsForBoundHostOnly(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)
	secrets := newSecrets()

	c := h.newCall(t, map[string]any{"method": "GET", "url": h.url("API.example.com", "/echo?id=bound"), "headers": map[string]string{"authorization": "Bearer model-guess", "X-Trace": "1"}})
	c.call.Secrets = secrets
	res, out := h.run(t, c)
	require.Empty(t, res.Error)
	require.NotContains(t, out.Body, "canary", "the echoed credentials are masked in the output")
	e := h.receivedBy(t, "bound")
	require.Equal(t, []string{"Bearer " + canaryToken}, e.Headers["Authorization"], "the secret overrides the model's header")
	require.Equal(t, []string{canaryKey}, e.Headers["X-Api-Key"])
	require.Equal(t, []string{"1"}, e.Headers["X-Trace"])
	require.Equal(t, []string{"API_TOKEN", "API_KEY"}, out.Credentials)

	c = h.newCall(t, map[string]any{"method": "GET", "url": h.url("other.example.net", "/echo?id=other")})
	c.call.Secrets = secrets
	res, out = h.run(t, c)
	require.Empty(t, res.Error)
	e = h.receivedBy(t, "other")
	require.Empty(t, e.Headers["Authorization"])
	require.Empty(t, e.Headers["X-Api-Key"])
	require.Empty(t, out.Credentials)
	port := ":" + strconv.Itoa(h.port)
	require.Equal(t, []string{"api.example.com" + port, "other.example.net" + port}, secrets.asked, "asked with the port")
}

func TestHTTPRequestRedirects(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)
	redirect := func(host string, code int, to string) string {
		return h.url(host, "/redirect?code="+strconv.Itoa(code)+"&to="+url.QueryEscape(to))
	}

	t.Run("same host keeps credentials", func(t *testing.T) {
		t.Parallel()
		c := h.newCall(t, map[string]any{"method": "POST", "url": redirect("api.example.com", 307, "/echo?id=same"), "body": "hello"})
		c.call.Secrets = newSecrets()
		res, out := h.run(t, c)
		require.Empty(t, res.Error)
		require.Equal(t, 1, out.Redirects)
		e := h.receivedBy(t, "same")
		require.Equal(t, "POST", e.Method, "307 repeats the method")
		require.Equal(t, "hello", e.Body)
		require.Equal(t, []string{"Bearer " + canaryToken}, e.Headers["Authorization"])
	})

	t.Run("cross host drops credentials", func(t *testing.T) {
		t.Parallel()
		c := h.newCall(t, map[string]any{
			"method": "POST", "url": redirect("api.example.com", 302, h.url("other.example.net", "/echo?id=cross")), "body": "hello",
			"headers": map[string]string{"Cookie": "a=b", "X-Trace": "1"},
		})
		secrets := newSecrets()
		// Even a secret bound to the new host is not sent on a redirect.
		secrets.byHost["other.example.net"] = []tool.Credential{{Name: "OTHER", Header: "X-Other", Value: "canary-other-0000"}}
		c.call.Secrets = secrets
		res, out := h.run(t, c)
		require.Empty(t, res.Error)
		require.Equal(t, h.url("other.example.net", "/echo?id=cross"), out.URL)
		e := h.receivedBy(t, "cross")
		require.Equal(t, "GET", e.Method, "302 turns a POST into a GET")
		require.Empty(t, e.Body)
		require.Equal(t, "other.example.net:"+strconv.Itoa(h.port), e.Host)
		for _, name := range []string{"Authorization", "X-Api-Key", "X-Other", "Cookie"} {
			require.Empty(t, e.Headers[name], name)
		}
		require.Equal(t, []string{"1"}, e.Headers["X-Trace"])
		require.Equal(t, []string{"api.example.com:" + strconv.Itoa(h.port)}, secrets.asked)
		evs := c.networkEvents()
		require.Len(t, evs, 2)
		require.Equal(t, "api.example.com", evs[0].Host)
		require.Equal(t, "other.example.net", evs[1].Host)
	})

	t.Run("coming back does not restore credentials", func(t *testing.T) {
		t.Parallel()
		back := redirect("other.example.net", 303, h.url("api.example.com", "/echo?id=back"))
		c := h.newCall(t, map[string]any{"method": "GET", "url": redirect("api.example.com", 302, back)})
		c.call.Secrets = newSecrets()
		res, out := h.run(t, c)
		require.Empty(t, res.Error)
		require.Equal(t, 2, out.Redirects)
		e := h.receivedBy(t, "back")
		require.Empty(t, e.Headers["Authorization"])
		require.Empty(t, e.Headers["X-Api-Key"])
	})

	t.Run("redirect to a refused host", func(t *testing.T) {
		t.Parallel()
		c := h.newCall(t, map[string]any{"method": "GET", "url": redirect("api.example.com", 302, "http://169.254.169.254/latest/meta-data/")})
		res, out := h.run(t, c)
		require.Nil(t, out)
		require.Contains(t, res.Error, "169.254.169.254:80 refused: IP address is not in the allowlist")
		require.False(t, res.Transient)
		evs := c.networkEvents()
		require.Len(t, evs, 2)
		require.True(t, evs[0].Allowed)
		require.False(t, evs[1].Allowed)
	})

	t.Run("too many", func(t *testing.T) {
		t.Parallel()
		c := h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/loop")})
		res, _ := h.run(t, c)
		require.Contains(t, res.Error, "stopped after 5 redirects")
	})
}

func TestHTTPRequestMasksInjectedSecrets(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)
	c := h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/reflect")})
	c.call.Secrets = newSecrets()
	res, out := h.run(t, c)
	require.Empty(t, res.Error)
	require.NotContains(t, out.Body, "canary")
	require.Contains(t, out.Body, "[REDACTED]")
	require.Equal(t, "/seen/[REDACTED]", out.Headers["Location"])

	// A body cut inside a secret does not keep its beginning.
	c = h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/reflect")})
	c.call.Secrets = newSecrets()
	c.call.MaxOutputBytes = len(`you sent "Bearer canary-01234`)
	res, out = h.run(t, c)
	require.Empty(t, res.Error)
	require.True(t, out.Truncated)
	require.Equal(t, `you sent "`, out.Body, "the cut-off header value goes whole")
}

func TestHTTPRequestRefused(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)
	for _, tc := range []struct {
		url, reason string
	}{
		{h.url("unlisted.example.org", "/echo"), "unlisted.example.org:" + strconv.Itoa(h.port) + " refused: host is not in the allowlist"},
		{"http://169.254.169.254/latest/meta-data/", "IP address is not in the allowlist"},
		{"http://[::1]:" + strconv.Itoa(h.port) + "/", "IP address is not in the allowlist"},
		{"https://api.example.com:8443/", "port 8443 is not allowed"},
	} {
		c := h.newCall(t, map[string]any{"method": "GET", "url": tc.url})
		res, out := h.run(t, c)
		require.Nil(t, out)
		require.Contains(t, res.Error, tc.reason)
		require.False(t, res.Transient, "a refusal does not go away by retrying")
		evs := c.networkEvents()
		require.Len(t, evs, 1)
		require.False(t, evs[0].Allowed)
		require.Equal(t, "http_request", evs[0].Via)
	}
}

func TestHTTPRequestNoNetwork(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)
	c := h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/echo")})
	c.call.Network = nil
	res, out := h.run(t, c)
	require.Nil(t, out)
	require.Equal(t, "no network: the agent's environment lists no hosts", res.Error)
	require.False(t, res.Transient)
	require.Equal(t, []tool.NetworkEvent{{Via: "http_request", Host: "api.example.com", Port: h.port, Reason: "no network"}}, c.networkEvents())
}

func TestHTTPRequestTransientStatuses(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	h.tool.Now = func() time.Time { return now }
	for _, tc := range []struct {
		code       int
		retryAfter string
		transient  bool
		wait       time.Duration
	}{
		{503, "3", true, 3 * time.Second},
		{429, "7", true, 7 * time.Second},
		{429, now.Add(90 * time.Second).Format(http.TimeFormat), true, 90 * time.Second},
		{429, now.Add(-time.Minute).Format(http.TimeFormat), true, 0},
		{502, "", true, 0},
		{504, "soon", true, 0},
		{500, "", false, 0},
		{404, "", false, 0},
	} {
		q := "/status?code=" + strconv.Itoa(tc.code) + "&retry_after=" + url.QueryEscape(tc.retryAfter)
		c := h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", q)})
		res, out := h.run(t, c)
		require.Equal(t, tc.code, out.Status)
		require.Equal(t, "status body", out.Body)
		require.Equal(t, tc.transient, res.Transient, "%d", tc.code)
		require.Equal(t, tc.wait, res.RetryAfter, "%d %s", tc.code, tc.retryAfter)
		if tc.transient {
			require.Equal(t, fmt.Sprintf("HTTP %d %s", tc.code, http.StatusText(tc.code)), res.Error)
		} else {
			require.Empty(t, res.Error, "a response is an output")
		}
	}
}

// timeoutError is a dial timeout.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

type failingDialer struct{ err error }

func (d failingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return nil, &net.OpError{Op: "dial", Net: network, Err: d.err}
}

func TestHTTPRequestTransientNetworkFailures(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)

	t.Run("dial timeout", func(t *testing.T) {
		t.Parallel()
		tl := *h.tool
		tl.Egress.Dialer = failingDialer{err: timeoutError{}}
		c := h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/echo")})
		res, err := tl.Run(t.Context(), c.call)
		require.NoError(t, err)
		require.True(t, res.Transient)
		require.Contains(t, res.Error, "i/o timeout")
		evs := c.networkEvents()
		require.Len(t, evs, 1)
		require.True(t, evs[0].Allowed, "the policy allowed it; the connection failed")
		require.Contains(t, evs[0].Reason, "connect: ")
	})

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		_, p, _ := net.SplitHostPort(ln.Addr().String())
		ln.Close()
		port, _ := strconv.Atoi(p)
		tl := *h.tool
		tl.Egress.Ports = []int{port}
		c := h.newCall(t, map[string]any{"method": "GET", "url": "http://api.example.com:" + p + "/"})
		res, err := tl.Run(t.Context(), c.call)
		require.NoError(t, err)
		require.True(t, res.Transient)
		require.Contains(t, res.Error, "connection refused")
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		c := h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/slow")})
		c.call.Timeout = 100 * time.Millisecond
		res, _ := h.run(t, c)
		require.True(t, res.Transient)
		require.Equal(t, "request timed out after 0.1s", res.Error)
	})

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		c := h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/echo")})
		res, err := h.tool.Run(ctx, c.call)
		require.NoError(t, err)
		require.False(t, res.Transient)
		require.Contains(t, res.Error, "request cancelled")
	})
}

func TestHTTPRequestBody(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)

	c := h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/big")})
	c.call.MaxOutputBytes = 100
	res, out := h.run(t, c)
	require.Empty(t, res.Error)
	require.True(t, out.Truncated)
	// 100 bytes would cut "é" in two: the text ends before it.
	require.Equal(t, strings.Repeat("a", 99), out.Body)
	require.Empty(t, out.Encoding)

	c = h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/big")})
	res, out = h.run(t, c)
	require.Empty(t, res.Error)
	require.False(t, out.Truncated)
	require.Len(t, out.Body, 1101)

	c = h.newCall(t, map[string]any{"method": "GET", "url": h.url("api.example.com", "/binary")})
	res, out = h.run(t, c)
	require.Empty(t, res.Error)
	require.Equal(t, "base64", out.Encoding)
	raw, err := base64.StdEncoding.DecodeString(out.Body)
	require.NoError(t, err)
	require.Equal(t, []byte{0xff, 0xfe, 0x00, 0x01}, raw)

	c = h.newCall(t, map[string]any{"method": "HEAD", "url": h.url("api.example.com", "/big")})
	res, out = h.run(t, c)
	require.Empty(t, res.Error)
	require.Equal(t, http.StatusOK, out.Status)
	require.Empty(t, out.Body)
}

func TestHTTPRequestHTTPS(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls %s", r.TLS.ServerName)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted case fails its handshake on purpose
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, p, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	// The test certificate is for example.com; the name resolves to the
	// server's loopback address, which is listed literally.
	egressCfg := egress.Config{Resolver: loopbackResolver{"example.com": true}, Ports: []int{port}}
	allow := []string{"example.com", "127.0.0.1"}
	args, err := json.Marshal(map[string]any{"method": "GET", "url": "https://example.com:" + p + "/"})
	require.NoError(t, err)

	tl := &tool.HTTPRequest{Egress: egressCfg, TLSConfig: &tls.Config{RootCAs: roots}}
	res, err := tl.Run(t.Context(), &tool.Call{Arguments: args, Network: &tool.NetworkPolicy{Allow: allow}})
	require.NoError(t, err)
	require.Empty(t, res.Error)
	require.Equal(t, "tls example.com", res.Output.(*tool.HTTPRequestOutput).Body, "SNI is the URL's host")

	// Without the test CA the certificate is not trusted: verification is on.
	tl = &tool.HTTPRequest{Egress: egressCfg}
	res, err = tl.Run(t.Context(), &tool.Call{Arguments: args, Network: &tool.NetworkPolicy{Allow: allow}})
	require.NoError(t, err)
	require.Contains(t, res.Error, "certificate")
	require.False(t, res.Transient)
}

func TestHTTPRequestArgumentErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args string
		want string
	}{
		{`{"url":"https://api.example.com/"}`, "arguments"},
		{`{"method":"TRACE","url":"https://api.example.com/"}`, "arguments.method"},
		{`{"method":"GET","url":"ftp://api.example.com/"}`, "arguments.url: must be an http:// or https:// URL"},
		{`{"method":"GET","url":"/relative"}`, "arguments.url: must be an http:// or https:// URL"},
		{`{"method":"GET","url":"https://user:pw@api.example.com/"}`, "arguments.url: must not contain user information"},
		{`{"method":"GET","url":"https:///path"}`, "arguments.url: has no host"},
		{`{"method":"GET","url":"https://api.example.com:99999/"}`, "arguments.url: has an invalid port"},
		{`{"method":"GET","url":"https://api.example.com/","headers":{"Host":"evil.example"}}`, "arguments.headers.Host: is set by the tool"},
		{`{"method":"GET","url":"https://api.example.com/","headers":{"content-length":"5"}}`, "arguments.headers.content-length: is set by the tool"},
		{`{"method":"GET","url":"https://api.example.com/","headers":{"X-A":"a\r\nX-B: b"}}`, "arguments.headers.X-A: must not contain CR, LF or NUL"},
		{`{"method":"GET","url":"https://api.example.com/","headers":{"Bad Name":"x"}}`, "arguments.headers.Bad Name: is not a valid header name"},
		{`{"method":"GET","url":"https://api.example.com/","headers":{"X-A":"1","x-a":"2"}}`, "is given twice"},
		{`{"method":"GET","url":"https://api.example.com/","headers":{"X-A":1}}`, "arguments.headers"},
		{`{"method":"GET","url":"https://api.example.com/","timeout_seconds":601}`, "arguments.timeout_seconds"},
	}
	for _, tc := range tests {
		res, err := (&tool.HTTPRequest{}).Run(t.Context(), &tool.Call{Arguments: json.RawMessage(tc.args), Network: &tool.NetworkPolicy{Allow: []string{"api.example.com"}}})
		require.NoError(t, err, tc.args)
		require.Contains(t, res.Error, tc.want, tc.args)
		require.Nil(t, res.Output)
	}

	// An invalid allowlist is the server's configuration problem, not the
	// model's: a Go error naming the entry.
	_, err := (&tool.HTTPRequest{}).Run(t.Context(), &tool.Call{
		Arguments: json.RawMessage(`{"method":"GET","url":"https://api.example.com/"}`),
		Network:   &tool.NetworkPolicy{Allow: []string{"https://api.example.com"}},
	})
	require.ErrorContains(t, err, `allow[0] "https://api.example.com"`)
}

// TestHTTPRequestRefusesTheControlPlane: the server's own address is
// refused although the agent lists it, written as a literal or as a name
// that resolves to it, with an error that says whose it is; nothing (and
// no credential) reaches it.
func TestHTTPRequestRefusesTheControlPlane(t *testing.T) {
	t.Parallel()
	h := newHTTPHarness(t)
	cp := &egress.ControlPlane{}
	require.NoError(t, cp.Add(egress.GroupListen, "the server's own API", "0.0.0.0:"+strconv.Itoa(h.port)))
	for _, u := range []string{
		h.url("127.0.0.1", "/echo?id=cp1"),
		h.url("api.example.com", "/echo?id=cp2"), // resolves to 127.0.0.1
	} {
		c := h.newCall(t, map[string]any{"method": "POST", "url": u, "body": `{"decision":"approve"}`})
		c.call.Network.ControlPlane = cp
		c.call.Secrets = newSecrets()
		res, err := h.tool.Run(t.Context(), c.call)
		require.NoError(t, err)
		require.Contains(t, res.Error, "is the server's own API: an agent may not reach its own control plane", u)
		require.False(t, res.Transient, "a refusal is not retried")
		evs := c.networkEvents()
		require.NotEmpty(t, evs)
		require.False(t, evs[len(evs)-1].Allowed)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, h.received, "nothing reached the control plane")
}
