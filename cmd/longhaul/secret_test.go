package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// cliCanary must never be printed by any command.
const cliCanary = "cli-canary-4d2b8e61f0a7"

// cliRunIn runs the command line in-process with stdin and an environment.
func cliRunIn(t *testing.T, stdin io.Reader, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	stdout, stderr := newOutBuffer(), newOutBuffer()
	c := &cli{stdout: stdout, stderr: stderr, getenv: func(k string) string { return env[k] }, now: time.Now}
	root := c.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(stdin)
	err := root.ExecuteContext(ctx)
	code := reportError(ctx, stderr, err)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err, code: code}
}

func TestSecretCommands(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	var outputs []string
	run := func(stdin string, env map[string]string, args ...string) result {
		t.Helper()
		r := cliRunIn(t, strings.NewReader(stdin), env, append(args, "--server", s.url)...)
		outputs = append(outputs, r.stdout, r.stderr)
		return r
	}
	ok := func(stdin string, env map[string]string, args ...string) string {
		t.Helper()
		r := run(stdin, env, args...)
		require.NoError(t, r.err, "longhaul %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
		return r.stdout
	}

	require.Equal(t, "No secrets. Add one with 'longhaul secret set NAME --host HOST --bearer < file'.\n", ok("", nil, "secret", "ls"))

	// From standard input, its trailing line break dropped.
	out := ok(cliCanary+"\n", nil, "secret", "set", "GITHUB_TOKEN", "--host", "api.github.com", "--host", "*.githubusercontent.com", "--bearer")
	require.Equal(t, "Secret GITHUB_TOKEN created in project default: sent as Authorization: Bearer VALUE to api.github.com, *.githubusercontent.com.\n", out)
	// From the environment; replacing says so.
	out = ok("", map[string]string{"TOKEN_VAR": cliCanary}, "secret", "set", "GITHUB_TOKEN", "--host", "api.github.com",
		"--header", "Authorization", "--format", "token {value}", "--from-env", "TOKEN_VAR")
	require.Equal(t, "Secret GITHUB_TOKEN replaced in project default: sent as Authorization: token VALUE to api.github.com.\n", out)
	out = ok("registry-password\r\n", nil, "secret", "set", "REGISTRY_PASSWORD", "--host", "registry.example.com", "--basic-user", "ci", "--json")
	meta := decodeStrict[lt.Secret](t, out)
	require.Equal(t, lt.SecretInjection{Header: "Authorization", Basic: &lt.SecretBasicAuth{Username: "ci"}}, meta.Inject)

	out = ok("", nil, "secret", "ls")
	require.Contains(t, out, "NAME")
	require.Contains(t, out, "default  GITHUB_TOKEN       api.github.com        Authorization: token VALUE")
	require.Contains(t, out, "default  REGISTRY_PASSWORD  registry.example.com  Authorization: Basic base64(ci:VALUE)")
	list := decodeStrict[[]lt.Secret](t, ok("", nil, "secrets", "list", "--json"))
	require.Len(t, list, 2)
	require.Equal(t, "GITHUB_TOKEN", list[0].Name)

	// The same name in another project is another secret; --project
	// keeps ls and rm to one project.
	out = ok("support-token-value\n", nil, "secret", "set", "GITHUB_TOKEN", "--host", "api.github.com", "--bearer", "--project", "support")
	require.Equal(t, "Secret GITHUB_TOKEN created in project support: sent as Authorization: Bearer VALUE to api.github.com.\n", out)
	support := decodeStrict[[]lt.Secret](t, ok("", nil, "secret", "ls", "--project", "support", "--json"))
	require.Len(t, support, 1)
	require.Equal(t, "support", support[0].Project)
	require.Len(t, decodeStrict[[]lt.Secret](t, ok("", nil, "secret", "ls", "--json")), 3, "every project's")
	require.Equal(t, "Secret GITHUB_TOKEN deleted from project support.\n", ok("", nil, "secret", "rm", "GITHUB_TOKEN", "--project", "support"))
	r := run("", nil, "secret", "rm", "GITHUB_TOKEN", "--project", "support")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "code:    not_found (HTTP 404)")
	r = run("", nil, "secret", "ls", "--project", "Not A Project")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "field:   project")
	// A web site's login, for the browser: no header.
	out = ok("shop-password-1\n", nil, "secret", "set", "SHOP_LOGIN", "--host", "shop.example.com", "--login-user", "alice@example.com", "--project", "support")
	require.Equal(t, "Secret SHOP_LOGIN created in project support: sent as a login form (user alice@example.com) to shop.example.com.\n", out)

	// The server's refusal names the field.
	r = run(cliCanary, nil, "secret", "set", "BAD", "--host", "https://api.example.com/", "--bearer")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "field:   hosts[0]")
	r = run(cliCanary, nil, "secret", "set", "lower", "--host", "api.example.com", "--bearer")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "field:   name")
	r = run("short", nil, "secret", "set", "SHORT", "--host", "api.example.com", "--bearer")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "field:   value")

	require.Equal(t, "Secret GITHUB_TOKEN deleted from project default.\n", ok("", nil, "secret", "rm", "GITHUB_TOKEN"))
	r = run("", nil, "secret", "rm", "GITHUB_TOKEN")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "code:    not_found (HTTP 404)")
	require.Len(t, decodeStrict[[]lt.Secret](t, ok("", nil, "secret", "ls", "--json")), 2)

	for i, o := range outputs {
		require.NotContains(t, o, cliCanary, "output %d", i)
	}
	// Nor is it in the database, in any file of it.
	requireNotInFiles(t, filepath.Dir(s.dbPath), cliCanary)
}

// requireNotInFiles fails if a file of dir (not of its subdirectories)
// holds one of the needles.
func requireNotInFiles(t *testing.T, dir string, needles ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		for _, n := range needles {
			require.False(t, bytes.Contains(data, []byte(n)), "%s holds %q", e.Name(), n)
		}
	}
}

func TestSecretSetUsageErrors(t *testing.T) {
	t.Parallel()
	devNull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	t.Cleanup(func() { _ = devNull.Close() })
	for _, tc := range []struct {
		name  string
		stdin io.Reader
		env   map[string]string
		args  []string
		want  string
	}{
		{"no injection", strings.NewReader(cliCanary), nil, []string{"--host", "a.example.com"}, "say how to inject the secret"},
		{"bearer and basic", strings.NewReader(cliCanary), nil, []string{"--host", "a.example.com", "--bearer", "--basic-user", "u"}, "give one of --bearer and --basic-user"},
		{"login and bearer", strings.NewReader(cliCanary), nil, []string{"--host", "a.example.com", "--bearer", "--login-user", "u"}, "--login-user goes alone"},
		{"format with bearer", strings.NewReader(cliCanary), nil, []string{"--host", "a.example.com", "--bearer", "--format", "x {value}"}, "--format goes with --header alone"},
		{"no host", strings.NewReader(cliCanary), nil, []string{"--bearer"}, "give at least one --host"},
		{"empty stdin", strings.NewReader("\n"), nil, []string{"--host", "a.example.com", "--bearer"}, "standard input is empty"},
		{"value too long", strings.NewReader(strings.Repeat("x", maxSecretValue+1)), nil, []string{"--host", "a.example.com", "--bearer"}, "longer than 8192 bytes"},
		{"unset variable", strings.NewReader(""), nil, []string{"--host", "a.example.com", "--bearer", "--from-env", "NOPE"}, "--from-env NOPE: the variable is not set or empty"},
		{"character device", devNull, nil, []string{"--host", "a.example.com", "--bearer"}, "standard input, which is a terminal"},
		{"value as an argument", strings.NewReader(""), nil, []string{cliCanary, "--host", "a.example.com", "--bearer"}, "accepts 1 arg(s), received 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"secret", "set", "TOKEN", "--server", "http://127.0.0.1:1"}, tc.args...)
			r := cliRunIn(t, tc.stdin, tc.env, args...)
			require.Equal(t, exitUsage, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stderr, tc.want)
			require.NotContains(t, r.stdout+r.stderr, cliCanary)
		})
	}
}

// decodeStrict decodes a command's JSON output, refusing unknown fields.
func decodeStrict[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "output:\n%s", out)
	return v
}
