package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const usersConfig = `users:
  - {name: alice@example.com, role: approver, project: default}
  - {name: ops@example.com, role: admin}
`

// TestServeSingleSignOn: serve with --trusted-proxy-header and
// --trusted-proxy maps the user the proxy names to the config file's
// identity (here the proxy is this machine); the banner says so.
func TestServeSingleSignOn(t *testing.T) {
	t.Parallel()
	cfg := writeFile(t, "longhaul.yaml", usersConfig)
	n := startServe(t, noEnv, "--data", t.TempDir(), "--sandbox", "local", "--config", cfg, "--api-key", "boot",
		"--trusted-proxy-header", "X-Forwarded-User", "--trusted-proxy", "127.0.0.1", "--trusted-proxy", "::1/128")
	require.Contains(t, n.stdout.String(), "sso:     2 user(s) named by X-Forwarded-User from 127.0.0.1/32, ::1/128")
	send := func(method, path, user, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, n.url+path, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if user != "" {
			req.Header.Set("X-Forwarded-User", user)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, send(http.MethodGet, "/v1/sessions", "alice@example.com", ""))
	require.Equal(t, http.StatusForbidden, send(http.MethodPost, "/v1/keys", "alice@example.com", `{"name":"x","role":"reader"}`), "an approver mints no key")
	require.Equal(t, http.StatusCreated, send(http.MethodPost, "/v1/keys", "OPS@example.com", `{"name":"x","role":"reader"}`), "an admin does")
	require.Equal(t, http.StatusForbidden, send(http.MethodGet, "/v1/sessions", "mallory@example.com", ""), "an unknown user")
	require.Equal(t, http.StatusUnauthorized, send(http.MethodGet, "/v1/sessions", "", ""), "no user, no key")
	require.Contains(t, cliOK(t, "ls", "--server", n.url, "--api-key", "boot"), "No sessions.", "a key still works through the proxy")
	require.NoError(t, n.stop())
}

// TestServeSingleSignOnUsage: the flags come together, with users in the
// config file, and every mistake is a usage error naming the flag, or the
// file, line and field.
func TestServeSingleSignOnUsage(t *testing.T) {
	t.Parallel()
	users := writeFile(t, "longhaul.yaml", usersConfig)
	noUsers := writeFile(t, "longhaul.yaml", "agents: []\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--trusted-proxy", "10.0.0.0/8"}, "--trusted-proxy needs --trusted-proxy-header"},
		{[]string{"--trusted-proxy-header", "X-Forwarded-User", "--config", users}, "--trusted-proxy-header needs --trusted-proxy CIDR"},
		{[]string{"--trusted-proxy-header", "X-Forwarded-User", "--trusted-proxy", "10.0.0.0/8", "--config", noUsers}, "--trusted-proxy-header needs users in the config file"},
		{[]string{"--trusted-proxy-header", "X-Forwarded-User", "--trusted-proxy", "10.0.0.0/8"}, "--trusted-proxy-header needs users in the config file"},
		{[]string{"--trusted-proxy-header", "X Forwarded User", "--trusted-proxy", "10.0.0.0/8", "--config", users}, `--trusted-proxy-header "X Forwarded User": want a header name`},
		{[]string{"--trusted-proxy-header", "X-Forwarded-User", "--trusted-proxy", "10.0.0.0/33", "--config", users}, `--trusted-proxy "10.0.0.0/33": want a network in CIDR notation`},
		{[]string{"--trusted-proxy-header", "X-Forwarded-User", "--trusted-proxy", "proxy.internal", "--config", users}, `--trusted-proxy "proxy.internal"`},
		{[]string{"--trusted-proxy-header", "X-Forwarded-User", "--trusted-proxy", "0.0.0.0/0", "--config", users}, `--trusted-proxy "0.0.0.0/0" trusts every address`},
		{[]string{"--trusted-proxy-header", "X-Forwarded-User", "--trusted-proxy", "::ffff:0:0/90", "--config", users}, `--trusted-proxy "::ffff:0:0/90": want a network`},
		{[]string{"--trusted-proxy-header", "X-Forwarded-User", "--trusted-proxy", "::/0", "--config", users}, `--trusted-proxy "::/0" trusts every address`},
		{[]string{"--config", users}, "the config file lists users, but --trusted-proxy-header is not set"},
	} {
		r := cliRun(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, tc.args...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
		require.NotContains(t, r.stdout, "listening")
	}
	// A header the server gives another meaning is refused when the node starts.
	r := cliRun(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--config", users,
		"--trusted-proxy-header", "Authorization", "--trusted-proxy", "10.0.0.0/8")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, `TrustedProxyHeader "Authorization" already means something else`)

	for _, tc := range []struct{ content, want string }{
		{"users:\n  - name: alice\n    role: boss\n", `:3: users[0].role: role must be one of admin, operator, approver, reader, runner, got "boss"`},
		{"users:\n  - role: reader\n", `:2: users[0].name: name is required`},
		{"users:\n  - {name: alice, role: reader, project: Support}\n", `:2: users[0].project: project must be`},
		{"users:\n  - {name: alice, role: reader}\n  - {name: ALICE, role: admin}\n", `:3: users[1].name: user "ALICE" is already defined by users[0]`},
		{"users:\n  - {name: alice, role: reader, team: x}\n", `:2: users[0].team: unknown field "team"`},
	} {
		cfg := writeFile(t, "longhaul.yaml", tc.content)
		r := cliRun(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--config", cfg,
			"--trusted-proxy-header", "X-Forwarded-User", "--trusted-proxy", "10.0.0.0/8")
		require.Equal(t, exitFailure, r.code, tc.content)
		require.Contains(t, r.stderr, cfg+tc.want, tc.content)
	}

	help := cliOK(t, "serve", "--help")
	require.Contains(t, help, "--trusted-proxy-header")
	require.Contains(t, help, "--trusted-proxy stringArray")
	require.Contains(t, help, "users:")
}

// TestParseNetwork: an address is the network of that one address, a
// network has its host bits cleared, an IPv4-mapped one is compared as
// IPv4 (as peers' addresses are).
func TestParseNetwork(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"127.0.0.1":              "127.0.0.1/32",
		"::1":                    "::1/128",
		"fe80::1%eth0":           "fe80::1/128",
		"::ffff:10.0.0.5":        "10.0.0.5/32",
		"10.1.2.3/8":             "10.0.0.0/8",
		"2001:db8::7/32":         "2001:db8::/32",
		"::ffff:192.168.0.0/112": "192.168.0.0/16",
	} {
		p, err := parseNetwork(in)
		require.NoError(t, err, in)
		require.Equal(t, want, p.String(), in)
	}
	for _, in := range []string{"", "proxy", "10.0.0.0/33", "::ffff:0:0/95", "10.0.0.0/8/8"} {
		_, err := parseNetwork(in)
		require.Error(t, err, in)
	}
}
