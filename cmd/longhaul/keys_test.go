package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestKeysCommands(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	run := func(args ...string) result {
		t.Helper()
		return cliRunIn(t, strings.NewReader(""), nil, append(args, "--server", s.url)...)
	}
	ok := func(args ...string) string {
		t.Helper()
		r := run(args...)
		require.NoError(t, r.err, "longhaul %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
		return r.stdout
	}

	require.Equal(t, "No API keys. Create one with 'longhaul keys create NAME --role ROLE'.\n", ok("keys", "ls"))

	out := ok("keys", "create", "alice", "--role", "approver", "--project", "default")
	m := regexp.MustCompile(`^Key (key_[a-z0-9]+) created for alice \(approver, project default\)\.\n` +
		`Keep it now: it is shown only this once \(the server stores only its hash\)\.\n\n(lh_[a-z2-7]{52})\n$`).FindStringSubmatch(out)
	require.NotNil(t, m, "output:\n%s", out)
	aliceID, aliceKey := m[1], m[2]

	token := strings.TrimSpace(ok("keys", "create", "ci", "--role", "operator", "--expires-in", "720h", "-q"))
	require.Regexp(t, `^lh_[a-z2-7]{52}$`, token, "--quiet prints the key alone")
	k := decodeStrict[lt.APIKey](t, ok("keys", "create", "auditor", "--role", "reader", "--expires-at", "2999-01-31T00:00:00Z", "--json"))
	require.Equal(t, lt.RoleReader, k.Role)
	require.Equal(t, lt.DefaultProject, k.Project)
	require.NotEmpty(t, k.Key)

	out = ok("keys", "ls")
	require.Contains(t, out, "ID")
	require.Contains(t, out, aliceID)
	require.Contains(t, out, aliceKey[:11], "the prefix")
	require.Contains(t, out, "active until", "ci's expiry")
	for _, key := range []string{aliceKey, token, k.Key} {
		require.NotContains(t, out, key, "a list never shows a key")
	}

	require.Equal(t, "Key "+aliceID+" revoked.\n", ok("keys", "revoke", aliceID))
	keys := decodeStrict[[]lt.APIKey](t, ok("keys", "ls", "--json"))
	require.Len(t, keys, 3)
	require.Equal(t, aliceID, keys[0].ID)
	require.NotNil(t, keys[0].RevokedAt)
	require.Contains(t, ok("keys", "ls"), "revoked ")

	r := run("keys", "revoke", "key_nope")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "code:    not_found (HTTP 404)")
	r = run("keys", "create", "x", "--role", "root")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "field:   role")
	r = run("keys", "create", "x", "--role", "reader", "--expires-at", "2001-01-01T00:00:00Z")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "field:   expires_at")

	// No key is in the database, in any file of it: only its hash.
	requireNotInFiles(t, filepath.Dir(s.dbPath), aliceKey, token, k.Key)
}

func TestKeysUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"keys", "create", "x"}, "give the key's --role (admin, operator, approver, reader, runner)"},
		{[]string{"keys", "create", "x", "--role", "reader", "-q", "--json"}, "one of --quiet and --json"},
		{[]string{"keys", "create", "x", "--role", "reader", "--expires-in", "1h", "--expires-at", "2999-01-01T00:00:00Z"}, "one of --expires-in and --expires-at"},
		{[]string{"keys", "create", "x", "--role", "reader", "--expires-at", "tomorrow"}, "not an RFC 3339 time"},
		{[]string{"keys", "create", "x", "--role", "reader", "--expires-in", "-1h"}, "must be positive"},
		{[]string{"keys", "create"}, "accepts 1 arg"},
		{[]string{"keys", "revoke"}, "accepts 1 arg"},
		{[]string{"keys", "whoami", "alice"}, "unknown command"},
		{[]string{"keys", "nope"}, "unknown"},
	} {
		r := cliRunIn(t, strings.NewReader(""), nil, append(tc.args, "--server", "http://127.0.0.1:1")...)
		require.Equal(t, exitUsage, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.msg, "%v", tc.args)
	}
}

func TestKeysHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"keys", "--help"}, {"keys", "create", "--help"}, {"keys", "ls", "--help"}, {"keys", "revoke", "--help"}, {"keys", "whoami", "--help"}} {
		r := cliRunIn(t, strings.NewReader(""), nil, args...)
		require.NoError(t, r.err, "%v", args)
		require.Contains(t, r.stdout, "Examples:", "%v", args)
		require.Contains(t, r.stdout, "longhaul keys", "%v", args)
	}
}

// TestKeysWhoami: a local request to a server without keys is the admin
// "local" of every project, which may call everything, as text and as the
// API object. (What a stored key's role may call is the server's
// TestMeEndpoint.)
func TestKeysWhoami(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	ok := func(args ...string) string {
		t.Helper()
		r := cliRunIn(t, strings.NewReader(""), nil, append(args, "--server", s.url)...)
		require.NoError(t, r.err, "longhaul %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
		return r.stdout
	}
	out := ok("keys", "whoami")
	require.True(t, strings.HasPrefix(out, "local (admin), every project, no stored key\nMay call: AddConstraint, "), out)
	require.Contains(t, out, ", CreateKey, ")
	me := decodeStrict[lt.Identity](t, ok("keys", "whoami", "--json"))
	require.Equal(t, lt.Identity{Name: "local", Role: lt.RoleAdmin, Permissions: me.Permissions}, me)
	require.Contains(t, me.Permissions, "DecideAction")
}
