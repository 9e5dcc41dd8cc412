package server_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// doHost sends a request with the given Host header (the URL still
// reaches the harness's listener) and extra headers; no Content-Type
// unless header sets one.
func (h *harness) doHost(method, path, host string, body []byte, header map[string]string) *response {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.ts.URL+path, rd)
	require.NoError(h.t, err)
	if host != "" {
		req.Host = host
	}
	if h.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.apiKey)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := h.ts.Client().Do(req)
	require.NoError(h.t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(h.t, err)
	return &response{status: res.StatusCode, header: res.Header, body: data}
}

// port is the harness listener's port.
func (h *harness) port() string {
	u, err := url.Parse(h.ts.URL)
	require.NoError(h.t, err)
	return u.Port()
}

// otherPort is a port that is not the listener's.
func otherPort(port string) string {
	if port == "8081" {
		return "8082"
	}
	return "8081"
}

func TestHostRuleWithoutKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	port := h.port()
	cases := []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:" + port, true},
		{"localhost:" + port, true},
		{"LocalHost:" + port, true},
		{"localhost.:" + port, true},
		{"[::1]:" + port, true},
		{"127.0.0.2:" + port, true}, // a loopback IP: no page is served from it by another site
		{"evil.example", false},
		{"evil.example:" + port, false},
		{"127.0.0.1.nip.io:" + port, false},
		{"localhost.evil.example:" + port, false},
		{"127.0.0.1:" + otherPort(port), false},
		{"localhost", false}, // port 80 is not this server's
		{"192.0.2.7:" + port, false},
	}
	for _, tc := range cases {
		r := h.doHost(http.MethodGet, "/v1/sessions", tc.host, nil, nil)
		if tc.ok {
			require.Equal(t, http.StatusOK, r.status, "Host %s: %s", tc.host, r.body)
			continue
		}
		e := requireError(t, r, http.StatusForbidden, "forbidden", "Host")
		require.Contains(t, e.Message, "does not name this server", "Host %s", tc.host)
	}
	// The probes and the web UI hold no data: any Host gets them.
	require.Equal(t, http.StatusOK, h.doHost(http.MethodGet, "/healthz", "evil.example", nil, nil).status)
	require.Equal(t, http.StatusOK, h.doHost(http.MethodGet, "/", "evil.example", nil, nil).status)
	// A state change under a foreign Host creates nothing.
	r := h.doHost(http.MethodPost, "/v1/sessions", "evil.example:"+port, []byte(scriptedSession("rebound")),
		map[string]string{"Content-Type": "application/json"})
	requireError(t, r, http.StatusForbidden, "forbidden", "Host")
	list := decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Empty(t, list.Data)

	// Outside an http.Server (no local address) loopback names pass and
	// others do not; a request without Host is refused.
	serve := func(host string) int {
		req := httptest.NewRequest(http.MethodGet, "/v1/sessions", nil)
		req.RemoteAddr = "127.0.0.1:5000"
		req.Host = host
		rec := httptest.NewRecorder()
		h.srv.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusOK, serve("localhost:9999"))
	require.Equal(t, http.StatusOK, serve("[::1]"))
	require.Equal(t, http.StatusForbidden, serve("example.com"))
	require.Equal(t, http.StatusForbidden, serve(""))
}

func TestHostRuleAllowedHosts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{cfg: &server.Config{AllowedHosts: []string{"Longhaul.Example", "proxy.example:8443", "[2001:db8::1]"}}})
	port := h.port()
	for host, ok := range map[string]bool{
		"longhaul.example":         true,
		"longhaul.example:1234":    true, // a name without a port allows every port
		"LONGHAUL.EXAMPLE:" + port: true,
		"proxy.example:8443":       true,
		"proxy.example":            false,
		"proxy.example:8444":       false,
		"[2001:db8::1]:80":         true,
		"other.example":            false,
		"127.0.0.1:" + port:        true, // the listener's own address stays allowed
	} {
		r := h.doHost(http.MethodGet, "/v1/sessions", host, nil, nil)
		if ok {
			require.Equal(t, http.StatusOK, r.status, "Host %s: %s", host, r.body)
		} else {
			requireError(t, r, http.StatusForbidden, "forbidden", "Host")
		}
	}
}

func TestHostRuleWithKeys(t *testing.T) {
	t.Parallel()
	// With keys and no list of names, the key is the credential: a server
	// listening on every interface is reached under names it cannot know.
	h := newHarness(t, harnessOpts{cfg: &server.Config{APIKeys: []string{"k1"}}})
	h.apiKey = "k1"
	require.Equal(t, http.StatusOK, h.doHost(http.MethodGet, "/v1/sessions", "longhaul.internal:8080", nil, nil).status)

	// Once the operator lists names, they are checked with keys too.
	listed := newHarness(t, harnessOpts{cfg: &server.Config{APIKeys: []string{"k1"}, AllowedHosts: []string{"longhaul.internal"}}})
	listed.apiKey = "k1"
	require.Equal(t, http.StatusOK, listed.doHost(http.MethodGet, "/v1/sessions", "longhaul.internal:8080", nil, nil).status)
	requireError(t, listed.doHost(http.MethodGet, "/v1/sessions", "evil.example", nil, nil), http.StatusForbidden, "forbidden", "Host")
	// The key is checked first: without it, 401 whatever the Host.
	listed.apiKey = ""
	requireError(t, listed.doHost(http.MethodGet, "/v1/sessions", "evil.example", nil, nil), http.StatusUnauthorized, "unauthorized", "")
}

func TestCrossSiteRule(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		cfg  *server.Config
		key  string
	}{
		{"without keys", nil, ""},
		{"with keys", &server.Config{APIKeys: []string{"k1"}}, "k1"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{cfg: mode.cfg})
			h.apiKey = mode.key
			self := h.ts.URL // http://127.0.0.1:PORT
			port := h.port()
			cases := []struct {
				name   string
				host   string
				header map[string]string
				field  string // "": passes the rule
			}{
				{"no Origin (curl, the CLI)", "", nil, ""},
				{"same origin", "", map[string]string{"Origin": self}, ""},
				{"same origin by name", "localhost:" + port, map[string]string{"Origin": "http://localhost:" + port}, ""},
				{"Sec-Fetch-Site same-origin", "", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": self}, ""},
				{"Sec-Fetch-Site none (typed by the user)", "", map[string]string{"Sec-Fetch-Site": "none"}, ""},
				{"foreign Origin", "", map[string]string{"Origin": "https://evil.example"}, "Origin"},
				{"Origin null (sandboxed frame, file:)", "", map[string]string{"Origin": "null"}, "Origin"},
				{"another port of localhost", "", map[string]string{"Origin": "http://127.0.0.1:" + otherPort(port)}, "Origin"},
				{"the same host without the port", "", map[string]string{"Origin": "http://127.0.0.1"}, "Origin"},
				{"Sec-Fetch-Site cross-site", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, "Sec-Fetch-Site"},
				{"Sec-Fetch-Site same-site", "", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://localhost:3000"}, "Sec-Fetch-Site"},
				{"Sec-Fetch-Site cross-site with a same Origin", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": self}, "Sec-Fetch-Site"},
			}
			for _, tc := range cases {
				header := map[string]string{"Content-Type": "application/json"}
				for k, v := range tc.header {
					header[k] = v
				}
				r := h.doHost(http.MethodPost, "/v1/sessions", tc.host, []byte(scriptedSession(tc.name)), header)
				if tc.field == "" {
					require.Equal(t, http.StatusCreated, r.status, "%s: %s", tc.name, r.body)
					continue
				}
				e := requireError(t, r, http.StatusForbidden, "forbidden", tc.field)
				require.Contains(t, e.Message, "cross-site request refused", tc.name)
				// Other state-changing methods are refused alike.
				requireError(t, h.doHost(http.MethodPatch, "/v1/sessions/ses_x/budget", tc.host, []byte(`{"max_tokens":1}`), header),
					http.StatusForbidden, "forbidden", tc.field)
				requireError(t, h.doHost(http.MethodDelete, "/v1/secrets/NAME", tc.host, nil, tc.header),
					http.StatusForbidden, "forbidden", tc.field)
			}
			list := decode[lt.List[lt.Session]](t, h.doHost(http.MethodGet, "/v1/sessions?limit=500", "", nil, nil))
			require.Len(t, list.Data, 5, "one session per accepted case, none for a refused one")

			// Reads are not state changes: a foreign Origin may ask (the
			// browser withholds the answer from the page: no CORS headers).
			r := h.doHost(http.MethodGet, "/v1/sessions", "", nil, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			require.Empty(t, r.header.Get("Access-Control-Allow-Origin"))
		})
	}
}

func TestTrustedOrigins(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{cfg: &server.Config{
		AllowedHosts:   []string{"longhaul.example.com"},
		TrustedOrigins: []string{"https://longhaul.example.com"},
	}})
	// A proxy that forwards Host as 127.0.0.1:PORT: the public origin is
	// trusted by name.
	header := map[string]string{"Content-Type": "application/json", "Origin": "https://longhaul.example.com", "Sec-Fetch-Site": "same-origin"}
	r := h.doHost(http.MethodPost, "/v1/sessions", "", []byte(scriptedSession("public")), header)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	delete(header, "Sec-Fetch-Site") // an older browser
	r = h.doHost(http.MethodPost, "/v1/sessions", "", []byte(scriptedSession("old browser")), header)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	header["Origin"] = "https://evil.example.com"
	requireError(t, h.doHost(http.MethodPost, "/v1/sessions", "", []byte(scriptedSession("evil")), header),
		http.StatusForbidden, "forbidden", "Origin")
}

func TestContentTypeRule(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		cfg  *server.Config
		key  string
	}{
		{"without keys", nil, ""},
		{"with keys", &server.Config{APIKeys: []string{"k1"}}, "k1"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{cfg: mode.cfg})
			h.apiKey = mode.key
			cases := []struct {
				contentType string
				ok          bool
			}{
				{"application/json", true},
				{"application/json; charset=utf-8", true},
				{"Application/JSON;charset=UTF-8", true},
				{"", false},
				{"text/plain", false},
				{"text/plain;charset=UTF-8", false},
				{"application/x-www-form-urlencoded", false},
				{"multipart/form-data; boundary=xyz", false},
				{"application/jsonp", false},
				{"application/json-patch+json", false},
				{"not a media type;;", false},
			}
			created := 0
			for _, tc := range cases {
				header := map[string]string{}
				if tc.contentType != "" {
					header["Content-Type"] = tc.contentType
				}
				r := h.doHost(http.MethodPost, "/v1/sessions", "", []byte(scriptedSession("ct "+tc.contentType)), header)
				if tc.ok {
					require.Equal(t, http.StatusCreated, r.status, "%q: %s", tc.contentType, r.body)
					created++
					continue
				}
				e := requireError(t, r, http.StatusForbidden, "forbidden", "Content-Type")
				require.Contains(t, e.Message, "application/json", tc.contentType)
			}
			list := decode[lt.List[lt.Session]](t, h.doHost(http.MethodGet, "/v1/sessions?limit=500", "", nil, nil))
			require.Len(t, list.Data, created)

			// A state change without a body needs no Content-Type (curl -X
			// POST .../cancel); one of unknown length (chunked) does.
			sess := list.Data[0]
			r := h.doHost(http.MethodPost, "/v1/sessions/"+sess.ID+"/cancel", "", nil, nil)
			require.NotEqual(t, http.StatusForbidden, r.status, "%s", r.body)
			req, err := http.NewRequest(http.MethodPost, h.ts.URL+"/v1/sessions/"+sess.ID+"/cancel", io.NopCloser(strings.NewReader(`{}`)))
			require.NoError(t, err)
			require.EqualValues(t, 0, req.ContentLength) // unknown: sent chunked
			if h.apiKey != "" {
				req.Header.Set("Authorization", "Bearer "+h.apiKey)
			}
			res, err := h.ts.Client().Do(req)
			require.NoError(t, err)
			require.NoError(t, res.Body.Close())
			require.Equal(t, http.StatusForbidden, res.StatusCode)
		})
	}
}

func TestMetricsFollowTheHostRule(t *testing.T) {
	t.Parallel()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") })
	h := newHarness(t, harnessOpts{cfg: &server.Config{Metrics: metrics}})
	require.Equal(t, http.StatusOK, h.get("/metrics").status)
	requireError(t, h.doHost(http.MethodGet, "/metrics", "evil.example", nil, nil), http.StatusForbidden, "forbidden", "Host")

	public := newHarness(t, harnessOpts{cfg: &server.Config{Metrics: metrics, MetricsPublic: true}})
	require.Equal(t, http.StatusOK, public.doHost(http.MethodGet, "/metrics", "evil.example", nil, nil).status)
}

func TestConfigValidatesHostsAndOrigins(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg   server.Config
		field string
	}{
		{server.Config{AllowedHosts: []string{""}}, "AllowedHosts[0]"},
		{server.Config{AllowedHosts: []string{"ok.example", "https://x.example"}}, "AllowedHosts[1]"},
		{server.Config{AllowedHosts: []string{"*.example"}}, "AllowedHosts[0]"},
		{server.Config{AllowedHosts: []string{"x.example:0"}}, "AllowedHosts[0]"},
		{server.Config{AllowedHosts: []string{"x.example:http"}}, "AllowedHosts[0]"},
		{server.Config{TrustedOrigins: []string{"longhaul.example"}}, "TrustedOrigins[0]"},
		{server.Config{TrustedOrigins: []string{"https://longhaul.example/ui"}}, "TrustedOrigins[0]"},
		{server.Config{TrustedOrigins: []string{"ftp://longhaul.example"}}, "TrustedOrigins[0]"},
	} {
		err := c.cfg.Validate()
		require.Error(t, err, "%+v", c.cfg)
		require.Contains(t, err.Error(), c.field)
	}
	ok := server.Config{AllowedHosts: []string{"longhaul.example", "10.0.0.5:8080", "[::1]:8080"}, TrustedOrigins: []string{"https://longhaul.example", "http://10.0.0.5:8080"}}
	require.NoError(t, ok.Validate())
}
