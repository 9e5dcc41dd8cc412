package server_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

const userHeader = "X-Forwarded-User"

// proxyUsers are the config file's users of the single sign-on tests.
var proxyUsers = []app.ProxyUser{
	{Name: "alice@example.com", Role: lt.RoleApprover, Project: "default"},
	{Name: "Bob@Example.com", Role: lt.RoleAdmin},
	{Name: "carol@example.com", Role: lt.RoleReader},
}

// ssoConfig is a server with a bootstrap key that believes userHeader from
// the networks trusted.
func ssoConfig(withKeys bool, trusted ...string) *server.Config {
	cfg := &server.Config{TrustedProxyHeader: userHeader, ProxyUsers: proxyUsers}
	if withKeys {
		cfg.APIKeys = []string{"boot-key"}
	}
	for _, p := range trusted {
		cfg.TrustedProxies = append(cfg.TrustedProxies, netip.MustParsePrefix(p))
	}
	return cfg
}

// serveFrom sends a request from the TCP peer remote straight to the
// handler (the address a real connection cannot choose).
func serveFrom(h *harness, method, path, remote string, header map[string]string) *response {
	req := httptest.NewRequest(method, path, nil)
	req.RemoteAddr = remote
	req.Host = "localhost"
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.srv.ServeHTTP(w, req)
	return &response{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

// TestProxySignIn: a request from a trusted proxy is the user its header
// names, with the role and project the config gives (names matched
// regardless of case, an admin of every project by default), recorded as
// "sso:" + the configured name; a user the config does not list is a 403
// that lists no user; a repeated header is refused; a bearer key wins
// over the header, and a bad one is a 401, never the user instead.
func TestProxySignIn(t *testing.T) {
	t.Parallel()
	// The harness's server listens on loopback, so loopback is the proxy.
	h, rec := newCallerHarness(t, ssoConfig(true, "127.0.0.0/8"))
	as := func(user string, extra ...string) *response {
		hdr := map[string]string{userHeader: user}
		for i := 0; i+1 < len(extra); i += 2 {
			hdr[extra[i]] = extra[i+1]
		}
		return h.do(http.MethodGet, "/v1/sessions", nil, hdr)
	}

	r := as("ALICE@example.com")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, app.Caller{KeyID: "sso:alice@example.com", Name: "alice@example.com", Role: lt.RoleApprover, Project: "default"}, rec.last())
	require.Equal(t, http.StatusOK, as(" bob@example.com ").status)
	require.Equal(t, app.Caller{KeyID: "sso:Bob@Example.com", Name: "Bob@Example.com", Role: lt.RoleAdmin}, rec.last())
	require.Equal(t, http.StatusOK, as("carol@example.com").status)
	require.Equal(t, app.Caller{KeyID: "sso:carol@example.com", Name: "carol@example.com", Role: lt.RoleReader, Project: "default"}, rec.last())

	// The role holds: a reader may not start work, an approver not mint keys.
	start := h.do(http.MethodPost, "/v1/sessions", []byte(scriptedSession("hi")), map[string]string{userHeader: "carol@example.com"})
	requireError(t, start, http.StatusForbidden, "forbidden", "")
	mint := h.do(http.MethodPost, "/v1/keys", []byte(`{"name":"x","role":"admin"}`), map[string]string{userHeader: "alice@example.com"})
	requireError(t, mint, http.StatusForbidden, "forbidden", "")
	mint = h.do(http.MethodPost, "/v1/keys", []byte(`{"name":"x","role":"reader"}`), map[string]string{userHeader: "bob@example.com"})
	require.Equal(t, http.StatusCreated, mint.status, "an admin user mints keys: %s", mint.body)

	e := requireError(t, as("mallory@example.com"), http.StatusForbidden, "forbidden", "")
	require.Contains(t, e.Message, `"mallory@example.com"`)
	require.Contains(t, e.Message, "config file's users")
	for _, u := range proxyUsers {
		require.NotContains(t, strings.ToLower(e.Message), strings.ToLower(u.Name), "the refusal lists no user")
	}

	// A header sent twice (a proxy that adds its value to the client's).
	req, err := http.NewRequest(http.MethodGet, h.ts.URL+"/v1/sessions", nil)
	require.NoError(t, err)
	req.Header.Add(userHeader, "mallory@example.com")
	req.Header.Add(userHeader, "alice@example.com")
	res, err := h.ts.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusForbidden, res.StatusCode)

	// A key wins over the header; a bad key is a 401, not the user.
	require.Equal(t, http.StatusOK, as("carol@example.com", "Authorization", "Bearer boot-key").status)
	require.Equal(t, app.BootstrapCaller, rec.last())
	requireError(t, as("bob@example.com", "Authorization", "Bearer not-a-key"), http.StatusUnauthorized, "unauthorized", "")
	// No user named: as without a proxy.
	requireError(t, as(""), http.StatusUnauthorized, "unauthorized", "")
	requireError(t, h.get("/v1/sessions"), http.StatusUnauthorized, "unauthorized", "")

	// Another trusted network than loopback: the peer's address counts.
	remote := newHarness(t, harnessOpts{cfg: ssoConfig(true, "10.0.0.0/8", "2001:db8::/32")})
	for _, peer := range []string{"10.1.2.3:4000", "[2001:db8::7]:443", "[::ffff:10.9.9.9]:1"} {
		r := serveFrom(remote, http.MethodGet, "/v1/sessions", peer, map[string]string{userHeader: "alice@example.com"})
		require.Equal(t, http.StatusOK, r.status, "%s: %s", peer, r.body)
	}
}

// TestProxyHeaderFromUntrustedPeer: the header from a peer outside the
// trusted networks is ignored: the request authenticates exactly as it
// would without it. Sent as an attacker would, from a real loopback
// connection, to servers that do not trust loopback.
func TestProxyHeaderFromUntrustedPeer(t *testing.T) {
	t.Parallel()
	withKeys, rec := newCallerHarness(t, ssoConfig(true, "10.0.0.0/8"))
	admin := map[string]string{userHeader: "bob@example.com"}
	r := withKeys.do(http.MethodGet, "/v1/sessions", nil, admin)
	without := withKeys.get("/v1/sessions")
	requireError(t, r, http.StatusUnauthorized, "unauthorized", "")
	require.Equal(t, string(without.body), string(r.body), "answered as without the header")
	r = withKeys.do(http.MethodPost, "/v1/keys", []byte(`{"name":"x","role":"admin"}`), admin)
	requireError(t, r, http.StatusUnauthorized, "unauthorized", "")
	reader := withKeys.createKey(`{"name": "dave", "role": "reader"}`)
	admin["Authorization"] = "Bearer " + reader.Key
	require.Equal(t, http.StatusOK, withKeys.do(http.MethodGet, "/v1/sessions", nil, admin).status)
	require.Equal(t, "dave", rec.last().Name, "the key's identity, not the header's")
	r = withKeys.do(http.MethodPost, "/v1/keys", []byte(`{"name":"x","role":"admin"}`), admin)
	requireError(t, r, http.StatusForbidden, "forbidden", "")

	// Without keys a loopback peer is the local admin, header or not; a
	// remote untrusted peer is refused, header or not.
	noKeys, rec := newCallerHarness(t, ssoConfig(false, "10.0.0.0/8"))
	require.Equal(t, http.StatusOK, noKeys.do(http.MethodGet, "/v1/sessions", nil, map[string]string{userHeader: "carol@example.com"}).status)
	require.Equal(t, app.LocalCaller, rec.last())
	r = serveFrom(noKeys, http.MethodGet, "/v1/sessions", "192.0.2.1:5", map[string]string{userHeader: "bob@example.com"})
	e := requireError(t, r, http.StatusForbidden, "forbidden", "")
	require.Contains(t, e.Message, "local machine only")
}

// TestTrustedProxyIsNotTheLocalUser: on a server without API keys, a
// request from a trusted proxy on loopback that names no user is refused,
// not the machine's local admin (the proxy forwards anyone's requests);
// one that names a user, or carries a stored key, passes.
func TestTrustedProxyIsNotTheLocalUser(t *testing.T) {
	t.Parallel()
	h, rec := newCallerHarness(t, ssoConfig(false, "127.0.0.1/32", "::1/128"))
	e := requireError(t, h.get("/v1/sessions"), http.StatusForbidden, "forbidden", "")
	require.Contains(t, e.Message, userHeader)
	requireError(t, h.listSessionsAs("not-a-key"), http.StatusForbidden, "forbidden", "")

	require.Equal(t, http.StatusOK, h.do(http.MethodGet, "/v1/sessions", nil, map[string]string{userHeader: "carol@example.com"}).status)
	require.Equal(t, "carol@example.com", rec.last().Name)

	r := h.post("/v1/keys", `{"name": "ci", "role": "reader"}`)
	requireError(t, r, http.StatusForbidden, "forbidden", "")
	r = h.do(http.MethodPost, "/v1/keys", []byte(`{"name": "ci", "role": "reader"}`), map[string]string{userHeader: "bob@example.com"})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	k := decode[lt.APIKey](t, r)
	require.Equal(t, http.StatusOK, h.listSessionsAs(k.Key).status)
	require.Equal(t, app.Caller{KeyID: k.ID, Name: "ci", Role: lt.RoleReader, Project: "default"}, rec.last())
}

// TestProxyConfigValidation: the single sign-on fields come together, and
// each mistake is an error naming the field.
func TestProxyConfigValidation(t *testing.T) {
	t.Parallel()
	lo := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	users := []app.ProxyUser{{Name: "alice", Role: lt.RoleReader}}
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"proxies without header", server.Config{TrustedProxies: lo}, "TrustedProxies is set without TrustedProxyHeader"},
		{"users without header", server.Config{ProxyUsers: users}, "ProxyUsers is set without TrustedProxyHeader"},
		{"header without proxies", server.Config{TrustedProxyHeader: userHeader, ProxyUsers: users}, "without TrustedProxies"},
		{"header without users", server.Config{TrustedProxyHeader: userHeader, TrustedProxies: lo}, "without ProxyUsers"},
		{"bad header", server.Config{TrustedProxyHeader: "X User", TrustedProxies: lo, ProxyUsers: users}, `TrustedProxyHeader "X User" is not a valid header name`},
		{"taken header", server.Config{TrustedProxyHeader: "authorization", TrustedProxies: lo, ProxyUsers: users}, "already means something else"},
		{"zero network", server.Config{TrustedProxyHeader: userHeader, TrustedProxies: []netip.Prefix{{}}, ProxyUsers: users}, "TrustedProxies[0] is not a valid network"},
		{"unknown role", server.Config{TrustedProxyHeader: userHeader, TrustedProxies: lo,
			ProxyUsers: []app.ProxyUser{{Name: "alice", Role: "boss"}}}, `ProxyUsers[0].role: role must be one of`},
		{"bad project", server.Config{TrustedProxyHeader: userHeader, TrustedProxies: lo,
			ProxyUsers: []app.ProxyUser{{Name: "alice", Role: lt.RoleReader, Project: "Support Team"}}}, `ProxyUsers[0].project: project must be`},
		{"no name", server.Config{TrustedProxyHeader: userHeader, TrustedProxies: lo,
			ProxyUsers: []app.ProxyUser{{Role: lt.RoleReader}}}, `ProxyUsers[0].name: name is required`},
		{"duplicate", server.Config{TrustedProxyHeader: userHeader, TrustedProxies: lo,
			ProxyUsers: []app.ProxyUser{{Name: "alice", Role: lt.RoleReader}, {Name: "ALICE", Role: lt.RoleAdmin}}}, `ProxyUsers[1]: the user "ALICE" is already ProxyUsers[0]`},
	} {
		err := tc.cfg.Validate()
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
	}
	ok := server.Config{TrustedProxyHeader: userHeader, TrustedProxies: lo, ProxyUsers: proxyUsers}
	require.NoError(t, ok.Validate())
}
