package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAuditCommand: the audit log of a few allowed and refused requests,
// as a table, filtered, paged and as JSON; a reader may not read it.
func TestAuditCommand(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	run := func(args ...string) result { return cliRun(t, append(args, "--server", s.url)...) }
	ok := func(args ...string) string { return cliOK(t, append(args, "--server", s.url)...) }

	require.Equal(t, "No audit entries.\n", ok("audit"))

	// Without bootstrap keys a loopback request acts as the local admin,
	// or as the stored key its token names.
	reader := strings.TrimSpace(ok("keys", "create", "rita", "--role", "reader", "-q"))
	r := run("keys", "revoke", "key_nope", "--api-key", reader)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "forbidden (HTTP 403)")
	r = run("keys", "revoke", "key_nope")
	require.Equal(t, exitFailure, r.code, "an unknown key: 404, audited too")

	out := ok("audit")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, "a header and three entries:\n%s", out)
	require.Regexp(t, `^SEQ\s+TIME\s+WHO\s+METHOD\s+ROUTE\s+TARGETS\s+STATUS\s+REQUEST$`, lines[0])
	require.Regexp(t, `^1\s+\S+ \S+\s+local \(admin\)\s+POST\s+POST /v1/keys\s+-\s+201\s+[0-9a-f]{16}$`, lines[1])
	require.Regexp(t, `^2\s+\S+ \S+\s+rita \(reader\)\s+DELETE\s+DELETE /v1/keys/\{id\}\s+key=key_nope\s+403\s+[0-9a-f]{16}$`, lines[2])
	require.Regexp(t, `^3\s+.*local \(admin\)\s+DELETE\s+DELETE /v1/keys/\{id\}\s+key=key_nope\s+404\s+`, lines[3])
	require.NotContains(t, out, reader, "never a key")

	require.Len(t, strings.Split(strings.TrimSpace(ok("audit", "--actor", "rita")), "\n"), 2)
	out = ok("audit", "--limit", "1")
	require.Contains(t, out, "\nMore entries: longhaul audit --cursor 1 --limit 1\n")
	out = ok("audit", "--limit", "1", "--cursor", "1")
	require.Regexp(t, regexp.MustCompile(`(?m)^2\s+.*rita`), out)

	page := decodeStrict[lt.List[lt.AuditEntry]](t, ok("audit", "--since", "1h", "--json"))
	require.Len(t, page.Data, 3)
	require.Equal(t, &lt.Actor{Name: "rita", Role: lt.RoleReader, KeyID: page.Data[1].Actor.KeyID}, page.Data[1].Actor)
	require.Equal(t, map[string]string{"key": "key_nope"}, page.Data[1].Targets)

	r = run("audit", "--api-key", reader)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "forbidden (HTTP 403)")
	r = run("audit", "--since", "yesterday")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "field:   since")
}

func TestAuditUsageAndHelp(t *testing.T) {
	t.Parallel()
	r := cliRunIn(t, strings.NewReader(""), nil, "audit", "--limit", "0")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--limit 0: want 1 to 500")
	r = cliRunIn(t, strings.NewReader(""), nil, "audit", "extra")
	require.Equal(t, exitUsage, r.code)
	r = cliRunIn(t, strings.NewReader(""), nil, "audit", "--help")
	require.NoError(t, r.err)
	require.Contains(t, r.stdout, "Examples:")
	require.Contains(t, r.stdout, "longhaul audit --since 24h")
	require.Contains(t, r.stdout, "--actor")
}

// TestServeAuditAndRateLimit: serve records the audit log (stored, and a
// JSON line in its log whatever the log level) and applies --rate-limit;
// bad values of both flags are usage errors naming them.
func TestServeAuditAndRateLimit(t *testing.T) {
	t.Parallel()
	n := startServe(t, noEnv, "--data", t.TempDir(), "--api-key", "boot-key-1", "--rate-limit", "write=1/h", "--audit-retention", "24h")
	cliOK(t, "keys", "create", "alice", "--role", "reader", "--server", n.url, "--api-key", "boot-key-1")
	r := cliRun(t, "keys", "create", "bob", "--role", "reader", "--server", n.url, "--api-key", "boot-key-1")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "rate_limited (HTTP 429)")

	page := cliJSON[lt.List[lt.AuditEntry]](t, "audit", "--json", "--server", n.url, "--api-key", "boot-key-1")
	require.Len(t, page.Data, 2)
	require.Equal(t, 201, page.Data[0].Status)
	require.Equal(t, 429, page.Data[1].Status)
	require.Equal(t, "bootstrap", page.Data[1].Actor.Name)
	require.NoError(t, n.stop())
	log := n.stderr.String()
	require.Regexp(t, `\{"time":"[^"]+","level":"INFO","msg":"audit",.*"route":"POST /v1/keys","status":429,`, log)
	require.NotContains(t, log, "boot-key-1")

	for _, args := range [][]string{
		{"--rate-limit", "writes=1/s"},
		{"--rate-limit", "write=1/d"},
		{"--audit-retention", "-1h"},
		{"--idempotency-retention", "-1h"},
		{"--idempotency-retention", "10m"},
	} {
		r := cliRun(t, append([]string{"serve", "--data", t.TempDir()}, args...)...)
		require.Equal(t, exitUsage, r.code, "%v", args)
		require.Contains(t, r.stderr, args[0], "the error names the flag")
	}
}
