package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The HTTP API against a hostile client: a web page in the user's browser
// (cross-site requests, DNS rebinding), a slow or greedy client, and
// bodies crafted to be read two ways. Every case asserts from outside: the
// status, a loopback recorder that must receive nothing, and the server's
// own list of sessions, which must stay empty.

// httpCanaryEnv is a variable of the server's environment that an
// attacker's session would send out as a model key.
const (
	httpCanaryEnv   = "HTTP_ADVERSARY_CANARY_KEY"
	httpCanaryValue = "sk-http-canary-5be21d"
)

// httpRecorder starts a recorder that answers as a model API refusing the
// call: it must get nothing.
func httpRecorder(t *testing.T) *recorder {
	t.Helper()
	return newRecorder(t, replyWith(http.StatusBadRequest, `{"error":{"message":"recorder","type":"invalid_request_error"}}`))
}

// httpExfilSession is the body a hostile page posts: a session whose model
// is the recorder, keyed with the server's canary variable.
func httpExfilSession(t *testing.T, rec *recorder) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"agent_spec": map[string]any{
			"model": map[string]any{"provider": "openai-compatible", "name": "m", "base_url": rec.url() + "/v1", "api_key_env": httpCanaryEnv},
		},
		"input": "hello",
	})
	require.NoError(t, err)
	return b
}

// httpResult is a raw response.
type httpResult struct {
	status int
	body   []byte
	err    lt.Error
}

// httpSend sends one request as a hostile client would shape it: any Host,
// any headers, any body.
func httpSend(t *testing.T, srv *server, method, path, host string, body []byte, header map[string]string) httpResult {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.url+path, rd)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	out := httpResult{status: res.StatusCode, body: data}
	var e lt.ErrorResponse
	if json.Unmarshal(data, &e) == nil {
		out.err = e.Error
	}
	return out
}

// httpRequireNoSessions asserts the server holds no session at all.
func httpRequireNoSessions(t *testing.T, srv *server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := srv.api.ListSessions(ctx, client.ListSessionsParams{Limit: 500})
	require.NoError(t, err)
	require.Empty(t, list.Data, "a refused request created a session")
}

// httpRequireRefused asserts a 403 naming field, that nothing was created
// and that the recorder got nothing.
func httpRequireRefused(t *testing.T, srv *server, rec *recorder, r httpResult, field string) {
	t.Helper()
	require.Equal(t, http.StatusForbidden, r.status, "body: %s", r.body)
	require.Equal(t, lt.CodeForbidden, r.err.Code)
	require.Equal(t, field, r.err.Field, "body: %s", r.body)
	httpRequireNoSessions(t, srv)
	if rec != nil {
		rec.requireNone(t, "the recorder received a request")
	}
}

func TestAdversarialHTTP_CrossSite(t *testing.T) {
	t.Parallel()
	rec := httpRecorder(t)
	srv := startServerWithEnv(t, []string{httpCanaryEnv + "=" + httpCanaryValue})
	attack := httpExfilSession(t, rec)
	evil := "https://evil.example"

	// What a page's fetch(url, {method: "POST", mode: "no-cors", body})
	// sends: a simple request, no preflight.
	t.Run("TextPlainPostWithForeignOrigin", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", attack, map[string]string{
			"Content-Type": "text/plain;charset=UTF-8", "Origin": evil, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors",
		})
		httpRequireRefused(t, srv, rec, r, "Sec-Fetch-Site")
	})
	// An older browser: no Sec-Fetch-Site, only Origin.
	t.Run("ForeignOriginWithoutFetchMetadata", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", attack, map[string]string{"Content-Type": "text/plain", "Origin": evil})
		httpRequireRefused(t, srv, rec, r, "Origin")
	})
	// A form's POST, application/x-www-form-urlencoded.
	t.Run("FormURLEncodedPost", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", attack, map[string]string{
			"Content-Type": "application/x-www-form-urlencoded", "Origin": evil,
		})
		httpRequireRefused(t, srv, rec, r, "Origin")
		// Without an Origin (a client that strips it), the body type alone
		// refuses it.
		r = httpSend(t, srv, http.MethodPost, "/v1/sessions", "", attack, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		httpRequireRefused(t, srv, rec, r, "Content-Type")
	})
	t.Run("MultipartPost", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", attack, map[string]string{"Content-Type": "multipart/form-data; boundary=x"})
		httpRequireRefused(t, srv, rec, r, "Content-Type")
	})
	// A sandboxed iframe or a file: page sends Origin: null.
	t.Run("OriginNull", func(t *testing.T) {
		for _, ct := range []string{"text/plain", "application/json"} {
			r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", attack, map[string]string{"Content-Type": ct, "Origin": "null"})
			httpRequireRefused(t, srv, rec, r, "Origin")
		}
	})
	// Another port of localhost is another origin, though the same site.
	t.Run("SameSiteOtherPort", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", attack, map[string]string{
			"Content-Type": "text/plain", "Origin": "http://127.0.0.1:3000", "Sec-Fetch-Site": "same-site",
		})
		httpRequireRefused(t, srv, rec, r, "Sec-Fetch-Site")
	})
	// Deciding, cancelling or deleting is refused alike.
	t.Run("OtherStateChanges", func(t *testing.T) {
		for _, c := range []struct{ method, path string }{
			{http.MethodPost, "/v1/sessions/ses_any/actions/act_any"},
			{http.MethodPost, "/v1/sessions/ses_any/cancel"},
			{http.MethodDelete, "/v1/secrets/GITHUB_TOKEN"},
			{http.MethodPut, "/v1/secrets/GITHUB_TOKEN"},
			{http.MethodPost, "/v1/webhooks/endpoints"},
		} {
			r := httpSend(t, srv, c.method, c.path, "", []byte(`{"decision":"approve"}`), map[string]string{"Content-Type": "text/plain", "Origin": evil})
			httpRequireRefused(t, srv, rec, r, "Origin")
		}
	})
}

func TestAdversarialHTTP_DNSRebinding(t *testing.T) {
	t.Parallel()
	rec := httpRecorder(t)
	srv := startServerWithEnv(t, []string{httpCanaryEnv + "=" + httpCanaryValue})
	port := srv.addr[strings.LastIndex(srv.addr, ":")+1:]
	rebound := "evil.example:" + port

	// A page at http://evil.example:PORT whose name now resolves to
	// 127.0.0.1: to the browser its requests are same-origin.
	t.Run("ReadWithForeignHost", func(t *testing.T) {
		for _, path := range []string{"/v1/sessions", "/v1/secrets", "/v1/actions", "/v1/webhooks/endpoints"} {
			r := httpSend(t, srv, http.MethodGet, path, rebound, nil, map[string]string{"Sec-Fetch-Site": "same-origin"})
			require.Equal(t, http.StatusForbidden, r.status, "%s: %s", path, r.body)
			require.Equal(t, "Host", r.err.Field)
			require.NotContains(t, string(r.body), "data", "%s: nothing of the API's data", path)
		}
	})
	t.Run("SameOriginWriteWithForeignHost", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", rebound, httpExfilSession(t, rec), map[string]string{
			"Content-Type": "application/json", "Origin": "http://" + rebound, "Sec-Fetch-Site": "same-origin",
		})
		httpRequireRefused(t, srv, rec, r, "Host")
	})
	t.Run("NamesThatOnlyLookLocal", func(t *testing.T) {
		for _, host := range []string{"127.0.0.1.nip.io:" + port, "localhost.evil.example:" + port, "evil.example", "127.0.0.1:1"} {
			r := httpSend(t, srv, http.MethodGet, "/v1/sessions", host, nil, nil)
			require.Equal(t, http.StatusForbidden, r.status, "Host %s: %s", host, r.body)
		}
	})
	// The server's own names keep working.
	for _, host := range []string{srv.addr, "localhost:" + port} {
		require.Equal(t, http.StatusOK, httpSend(t, srv, http.MethodGet, "/v1/sessions", host, nil, nil).status, host)
	}
}

func TestAdversarialHTTP_PageHoldingAKey(t *testing.T) {
	t.Parallel()
	rec := httpRecorder(t)
	const key = "lh-http-adversary-key"
	srv := startServerWithEnv(t, []string{httpCanaryEnv + "=" + httpCanaryValue}, "--api-key", key)
	// A page that got hold of a key (pasted into it, or stored by it) still
	// cannot use it across sites: the cross-site rule holds with keys too.
	r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", httpExfilSession(t, rec), map[string]string{
		"Authorization": "Bearer " + key, "Content-Type": "application/json", "Origin": "https://evil.example",
	})
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	require.Equal(t, "Origin", r.err.Field)
	r = httpSend(t, srv, http.MethodPost, "/v1/sessions", "", httpExfilSession(t, rec), map[string]string{
		"Authorization": "Bearer " + key, "Content-Type": "text/plain",
	})
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	require.Equal(t, "Content-Type", r.err.Field)
	list := httpSend(t, srv, http.MethodGet, "/v1/sessions", "", nil, map[string]string{"Authorization": "Bearer " + key})
	require.Equal(t, http.StatusOK, list.status)
	require.JSONEq(t, `{"data":[],"next_cursor":null}`, string(list.body))
	rec.requireNone(t)
}

func TestAdversarialHTTP_CraftedBodies(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	asJSON := map[string]string{"Content-Type": "application/json"}
	spec := `"agent_spec":{"model":{"provider":"scripted","script":[{"text":"done"}]}}`

	// A proxy or a policy that reads the first "input" sees another request
	// than a reader that keeps the last.
	t.Run("DuplicateKeys", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", []byte(`{`+spec+`,"input":"a","input":"b"}`), asJSON)
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		require.Equal(t, "input", r.err.Field)
		require.Contains(t, r.err.Message, `duplicate key "input"`)
		httpRequireNoSessions(t, srv)
	})
	t.Run("DuplicateKeysNested", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", []byte(`{`+spec+`,"input":"a","budget":{"max_cost_usd":1,"max_cost_usd":1000}}`), asJSON)
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		require.Equal(t, "budget.max_cost_usd", r.err.Field)
		httpRequireNoSessions(t, srv)
	})
	t.Run("DuplicateKeysByCase", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", []byte(`{`+spec+`,"input":"a","INPUT":"b"}`), asJSON)
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		require.Equal(t, "INPUT", r.err.Field)
		httpRequireNoSessions(t, srv)
	})
	t.Run("InvalidUTF8", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", []byte("{"+spec+",\"input\":\"a\xff\xfeb\"}"), asJSON)
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		require.Equal(t, "input", r.err.Field)
		require.Contains(t, r.err.Message, "UTF-8")
		httpRequireNoSessions(t, srv)
	})
	t.Run("EscapedLoneSurrogate", func(t *testing.T) {
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", []byte(`{`+spec+`,"input":"a\udc00"}`), asJSON)
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		require.Equal(t, "input", r.err.Field)
		httpRequireNoSessions(t, srv)
	})
	t.Run("OversizedBody", func(t *testing.T) {
		big := `{` + spec + `,"input":"` + strings.Repeat("a", 2<<20) + `"}`
		r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", []byte(big), asJSON)
		require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "%s", r.body)
		require.Equal(t, lt.CodePayloadTooLarge, r.err.Code)
		httpRequireNoSessions(t, srv)
	})
}

// httpTight are the limits of the slow-client cases: short, so that each
// case takes about a second.
var httpTight = []string{"--read-header-timeout", "1s", "--read-timeout", "1s", "--idle-timeout", "1s", "--max-conns-per-ip", "4"}

// httpDial opens a raw connection to srv from the local address from.
func httpDial(t *testing.T, srv *server, from string) (net.Conn, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", srv.addr)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// httpRequireClosed reads conn until the server closes it, within limit.
func httpRequireClosed(t *testing.T, conn net.Conn, limit time.Duration) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(limit)))
	_, err := io.Copy(io.Discard, conn)
	if err != nil {
		require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the connection was still open after %s", limit)
		require.Contains(t, err.Error(), "connection reset")
	}
}

func TestAdversarialHTTP_SlowClients(t *testing.T) {
	t.Parallel()
	srv := startServer(t, httpTight...)

	// Slowloris: one byte of a 100-byte body, then silence.
	t.Run("SlowBody", func(t *testing.T) {
		conn, err := httpDial(t, srv, "127.0.0.1")
		require.NoError(t, err)
		start := time.Now()
		_, err = io.WriteString(conn, "POST /v1/sessions HTTP/1.1\r\nHost: "+srv.addr+"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
		require.NoError(t, err)
		httpRequireClosed(t, conn, 15*time.Second)
		require.Less(t, time.Since(start), 10*time.Second)
		httpRequireNoSessions(t, srv)
	})
	t.Run("SlowHeader", func(t *testing.T) {
		conn, err := httpDial(t, srv, "127.0.0.1")
		require.NoError(t, err)
		_, err = io.WriteString(conn, "GET /v1/sessions HTTP/1.1\r\nHost: "+srv.addr+"\r\nX-Slow: ")
		require.NoError(t, err)
		httpRequireClosed(t, conn, 15*time.Second)
	})
	t.Run("IdleKeepAlive", func(t *testing.T) {
		conn, err := httpDial(t, srv, "127.0.0.1")
		require.NoError(t, err)
		_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: "+srv.addr+"\r\n\r\n")
		require.NoError(t, err)
		rd := bufio.NewReader(conn)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(15*time.Second)))
		res, err := http.ReadResponse(rd, nil)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, res.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode)
		// Kept alive, then idle: closed after --idle-timeout.
		_, err = rd.ReadByte()
		require.ErrorIs(t, err, io.EOF)
	})
}

func TestAdversarialHTTP_ConnectionFlood(t *testing.T) {
	t.Parallel()
	const capPerIP = 4
	srv := startServer(t, "--max-conns-per-ip", "4", "--read-header-timeout", "1m", "--read-timeout", "1m", "--idle-timeout", "1m")
	// try opens a connection from 127.0.0.1 and asks on it, keeping it
	// open (keep-alive) when it is served: 200 when served, 429 when past
	// the cap.
	try := func() int {
		c, err := httpDial(t, srv, "127.0.0.1")
		require.NoError(t, err)
		require.NoError(t, c.SetDeadline(time.Now().Add(15*time.Second)))
		_, err = io.WriteString(c, "GET /v1/sessions HTTP/1.1\r\nHost: "+srv.addr+"\r\n\r\n")
		require.NoError(t, err)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, res.Body)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		if res.StatusCode != http.StatusOK {
			_ = c.Close()
		}
		return res.StatusCode
	}
	// Connections that are served stay open and idle, taking 127.0.0.1's
	// share; then every further one is answered 429 and closed.
	served := 0
	for try() == http.StatusOK {
		served++
		require.LessOrEqual(t, served, capPerIP, "more than the cap were served at once")
	}
	// The harness's readiness probe may still have held a connection of
	// its own, which it may close meanwhile: one slot may free up once.
	freed := 0
	for range 20 {
		switch status := try(); status {
		case http.StatusTooManyRequests:
		case http.StatusOK:
			freed++
			require.LessOrEqual(t, freed+served, capPerIP, "a connection past the cap was served")
		default:
			t.Fatalf("status %d", status)
		}
	}

	// Another client address is served meanwhile.
	c, err := httpDial(t, srv, "127.0.0.2")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine: %v", err)
	}
	require.NoError(t, c.SetDeadline(time.Now().Add(15*time.Second)))
	_, err = io.WriteString(c, "GET /v1/sessions HTTP/1.1\r\nHost: "+srv.addr+"\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", body)
	require.JSONEq(t, `{"data":[],"next_cursor":null}`, string(body))
}
