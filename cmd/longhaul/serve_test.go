package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// servingNode is a `longhaul serve` running in this process.
type servingNode struct {
	url    string
	stdout *outBuffer
	stderr *outBuffer
	stop   func() error // cancels serve's context (a signal) and waits for it
}

// startServe runs `serve --addr 127.0.0.1:0 ARGS...` until its banner is out.
func startServe(t *testing.T, getenv func(string) string, args ...string) *servingNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newOutBuffer(), newOutBuffer()
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-level", "warn"}, args...), stdout, stderr, getenv)
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(testTimeout):
			t.Fatalf("serve did not stop; stderr:\n%s", stderr.String())
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })

	deadline := time.After(testTimeout)
	for {
		stdout.mu.Lock()
		out, ch := stdout.buf.String(), stdout.changed
		stdout.mu.Unlock()
		if strings.Contains(out, "Press Ctrl-C") {
			m := listenRE.FindStringSubmatch(out)
			require.NotNil(t, m, out)
			return &servingNode{url: m[1], stdout: stdout, stderr: stderr, stop: stop}
		}
		select {
		case <-ch:
		case err := <-done:
			stopped = true
			t.Fatalf("serve ended before serving: %v\nstderr:\n%s", err, stderr.String())
		case <-deadline:
			t.Fatalf("serve never printed its banner; stderr:\n%s", stderr.String())
		}
	}
}

func noEnv(string) string { return "" }

func TestServeRegistersConfiguredAgentsOnlyWhenChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, "longhaul.yaml", goodConfig)

	n := startServe(t, noEnv, "--data", dir, "--config", cfg)
	out := n.stdout.String()
	require.Contains(t, out, "researcher v1 (registered), from "+cfg)
	require.Contains(t, out, "data:    "+dir)
	require.Contains(t, out, "accepting requests from loopback addresses only")
	nodeID, err := os.ReadFile(filepath.Join(dir, nodeIDFile))
	require.NoError(t, err)
	require.Contains(t, out, "node:    "+strings.TrimSpace(string(nodeID)))

	agents := cliJSON[[]lt.Agent](t, "agents", "ls", "--json", "--server", n.url)
	require.Len(t, agents, 1)
	require.Equal(t, 1, agents[0].Version)
	run := cliOK(t, "run", "--agent", "researcher", "--server", n.url, "find it")
	require.Contains(t, run, "Output:\nFound it.")

	// A second process on the same data directory is refused.
	r := cliRun(t, "serve", "--addr", "127.0.0.1:0", "--data", dir, "--config", cfg)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "in use by another longhaul process")

	// A busy port fails the start before a new data directory is created
	// (and so before any database is migrated).
	fresh := filepath.Join(t.TempDir(), "fresh")
	busy := strings.TrimPrefix(n.url, "http://")
	r = cliRun(t, "serve", "--addr", busy, "--data", fresh)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "listen on "+busy)
	require.NoDirExists(t, fresh)

	require.NoError(t, n.stop(), "a signal drains and exits 0")
	require.Contains(t, n.stdout.String(), "Longhaul stopped.")

	// Restart with the same config: nothing new, same node id, same data.
	n = startServe(t, noEnv, "--data", dir, "--config", cfg)
	require.Contains(t, n.stdout.String(), "researcher v1 (unchanged)")
	again, err := os.ReadFile(filepath.Join(dir, nodeIDFile))
	require.NoError(t, err)
	require.Equal(t, string(nodeID), string(again))
	require.Len(t, cliJSON[[]lt.Session](t, "ls", "--json", "--server", n.url), 1)
	require.NoError(t, n.stop())

	// A changed spec becomes version 2.
	changed := strings.Replace(goodConfig, "Be brief.", "Be thorough.", 1)
	require.NoError(t, os.WriteFile(cfg, []byte(changed), 0o600))
	n = startServe(t, noEnv, "--data", dir, "--config", cfg)
	require.Contains(t, n.stdout.String(), "researcher v2 (registered)")
	agents = cliJSON[[]lt.Agent](t, "agents", "ls", "--json", "--server", n.url)
	require.Equal(t, 2, agents[0].Version)
	require.Equal(t, "Be thorough.", agents[0].Spec.Instructions)
	require.NoError(t, n.stop())
}

// TestServeRegistersAgentsPerProject: an agent of the config file names
// its project (default: the default project); the same name in two
// projects is two agents, each at its version 1.
func TestServeRegistersAgentsPerProject(t *testing.T) {
	t.Parallel()
	cfg := writeFile(t, "longhaul.yaml", goodConfig+`  - name: researcher
    project: support
    spec:
      model: {provider: scripted, script: [{text: "Supported."}]}
`)
	n := startServe(t, noEnv, "--data", t.TempDir(), "--config", cfg)
	require.Contains(t, n.stdout.String(), "researcher v1 (registered), support/researcher v1 (registered), from "+cfg)
	agents := cliJSON[[]lt.Agent](t, "agents", "ls", "--json", "--server", n.url)
	require.Len(t, agents, 2)
	require.Equal(t, []string{lt.DefaultProject, "support"}, []string{agents[0].Project, agents[1].Project})
	support := cliJSON[[]lt.Agent](t, "agents", "ls", "--project", "support", "--json", "--server", n.url)
	require.Len(t, support, 1)
	require.Contains(t, string(support[0].Spec.Model.Script), "Supported.")
	require.NoError(t, n.stop())
}

func TestServeRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, content, want string }{
		{
			name:    "unknown field",
			content: "agents:\n  - name: a\n    spec:\n      model: {provider: scripted}\n      toolz: []\n",
			want:    `:5: agents[0].spec.toolz: unknown field "toolz" (did you mean "tools"?)`,
		},
		{
			name:    "refused by the engine",
			content: "agents:\n  - name: a\n    spec:\n      model: {provider: openai-ish}\n",
			want:    `:4: agents[0].spec.model.provider: unknown provider "openai-ish"`,
		},
		{
			name:    "bad agent name",
			content: "agents:\n  - name: Not A Name\n    spec: {model: {provider: scripted}}\n",
			want:    `:2: agents[0].name: must match`,
		},
		{
			name:    "bad project",
			content: "agents:\n  - name: a\n    project: Not A Project\n    spec: {model: {provider: scripted}}\n",
			want:    `:3: agents[0].project: project must be 1 to 63 lowercase letters`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := writeFile(t, "longhaul.yaml", tt.content)
			r := cliRun(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--config", cfg)
			require.Equal(t, exitFailure, r.code)
			require.Contains(t, r.stderr, cfg+tt.want)
			require.NotContains(t, r.stdout, "listening")
		})
	}

	r := cliRun(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "missing.yaml")
}

func TestServeWithAPIKeysFromEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LONGHAUL_API_KEYS": " k1 , k2,", "LONGHAUL_DATA": t.TempDir()}
	n := startServe(t, func(k string) string { return env[k] })
	require.Contains(t, n.stdout.String(), "2 API key(s)")
	require.Contains(t, n.stdout.String(), "data:    "+env["LONGHAUL_DATA"])

	r := cliRun(t, "ls", "--server", n.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "unauthorized")
	require.Contains(t, r.stderr, "Hint: pass the server's API key")

	require.Contains(t, cliOK(t, "ls", "--server", n.url, "--api-key", "k2"), "No sessions.")
	clientEnv := map[string]string{"LONGHAUL_SERVER": n.url, "LONGHAUL_API_KEY": "k1"}
	out := newOutBuffer()
	require.NoError(t, execute(context.Background(), []string{"agents", "ls", "--json"}, out, io.Discard, func(k string) string { return clientEnv[k] }))
	require.JSONEq(t, `[]`, out.String())
	require.NoError(t, n.stop())
}

// TestEventsFollowAcrossServerRestart follows a session while its server is
// drained and started again on the same address and data: the stream
// resumes where it stopped, without a gap or a duplicate, and the restarted
// node carries on with the session.
func TestEventsFollowAcrossServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startServe(t, noEnv, "--data", dir)
	spec := writeFile(t, "spec.json", functionSpec)
	id := strings.TrimSpace(cliOK(t, "run", "--server", n.url, "--agent-spec", spec, "--detach", "Look up c-7"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	follow := newOutBuffer()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"events", id, "--follow", "--json", "--server", n.url}, follow, newOutBuffer())
	}()
	follow.waitFor(t, `"type":"action.required"`)

	require.NoError(t, n.stop())
	n = startServe(t, noEnv, "--data", dir, "--addr", strings.TrimPrefix(n.url, "http://"))

	actions := cliJSON[[]lt.Action](t, "actions", id, "--status", "pending", "--json", "--server", n.url)
	require.Len(t, actions, 1)
	cliOK(t, "respond", id, actions[0].ID, "--output", `{"name": "ACME"}`, "--server", n.url)
	follow.waitFor(t, `"type":"turn.completed"`)
	cancel()
	require.NoError(t, <-done)

	events := parseJSONLines(t, follow.String())
	for i, ev := range events {
		require.EqualValues(t, i+1, ev.Seq, "no gap, no duplicate")
	}
	require.NoError(t, n.stop())
}

// TestServeModelKeyEnv: --model-key-env and the config file's
// model_key_env allow variables for model keys, each for its hosts; a bad
// entry, or the server's own configuration, is refused at start.
func TestServeModelKeyEnv(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--model-key-env", "MY_KEY"}, `--model-key-env "MY_KEY": want NAME=HOST[,HOST]`},
		{[]string{"--model-key-env", "MY_KEY="}, `want NAME=HOST[,HOST]`},
		{[]string{"--model-key-env", "LONGHAUL_API_KEYS=evil.example.com"}, "LONGHAUL_API_KEYS is the server's own configuration, never a model key"},
		{[]string{"--model-key-env", "MY_KEY=https://evil.example.com/"}, `MY_KEY`},
		{[]string{"--control-plane-addr", "10.0.0.8"}, `--control-plane-addr "10.0.0.8": want HOST:PORT`},
	} {
		r := cliRun(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, tt.args...)...)
		require.NotEqual(t, 0, r.code, tt.args)
		require.Contains(t, r.stderr, tt.want, tt.args)
		require.NotContains(t, r.stdout, "listening")
	}

	// From the config file: the agent's key would go to another host than
	// the one its variable is allowed for.
	cfg := writeFile(t, "longhaul.yaml", "model_key_env:\n  MY_KEY: [\"127.0.0.1:9\"]\nagents:\n  - name: a\n    spec:\n      model: {provider: openai-compatible, name: m, base_url: \"http://127.0.0.1:10/v1\", api_key_env: MY_KEY}\n")
	r := cliRun(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--config", cfg)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, cfg+":6: agents[0].spec.model.api_key_env: the key in MY_KEY goes only to 127.0.0.1:9, not to 127.0.0.1:10")
	// The flag replaces the file's hosts for the same name: the host now
	// matches, and what is left to say is that the variable is not set.
	r = cliRun(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--config", cfg, "--model-key-env", "MY_KEY=127.0.0.1:10")
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, cfg+":6: agents[0].spec.model.api_key_env: environment variable MY_KEY is not set on this server")
}

func TestServeHostsAndOrigins(t *testing.T) {
	t.Parallel()
	n := startServe(t, noEnv, "--data", t.TempDir(), "--sandbox", "local",
		"--allowed-host", "longhaul.test", "--public-url", "https://public.example")
	send := func(method, host string, header map[string]string, body string) int {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, n.url+"/v1/agents", rd)
		require.NoError(t, err)
		req.Host = host
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		return res.StatusCode
	}
	self := strings.TrimPrefix(n.url, "http://")
	require.Equal(t, http.StatusOK, send(http.MethodGet, self, nil, ""))
	require.Equal(t, http.StatusOK, send(http.MethodGet, "longhaul.test:443", nil, ""))
	require.Equal(t, http.StatusOK, send(http.MethodGet, "public.example", nil, ""))
	require.Equal(t, http.StatusForbidden, send(http.MethodGet, "evil.example", nil, ""))

	agent := `{"name": "notes", "spec": {"model": {"provider": "scripted", "script": [{"text": "done"}]}, "instructions": "Be brief."}}`
	asJSON := map[string]string{"Content-Type": "application/json"}
	require.Equal(t, http.StatusCreated, send(http.MethodPost, self, asJSON, agent))
	fromPublic := map[string]string{"Content-Type": "application/json", "Origin": "https://public.example"}
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, send(http.MethodPost, self, fromPublic, agent), "the public URL's origin is trusted")
	fromEvil := map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}
	require.Equal(t, http.StatusForbidden, send(http.MethodPost, self, fromEvil, agent))
	require.Equal(t, http.StatusForbidden, send(http.MethodPost, self, map[string]string{"Content-Type": "text/plain"}, agent))

	// The same from the environment.
	env := map[string]string{"LONGHAUL_ALLOWED_HOSTS": "a.test, b.test:8443", "LONGHAUL_PUBLIC_URL": "https://c.test"}
	fromEnv := startServe(t, func(k string) string { return env[k] }, "--data", t.TempDir(), "--sandbox", "local")
	for host, want := range map[string]int{"a.test": http.StatusOK, "b.test:8443": http.StatusOK, "b.test": http.StatusForbidden, "c.test:443": http.StatusOK, "d.test": http.StatusForbidden} {
		req, err := http.NewRequest(http.MethodGet, fromEnv.url+"/v1/agents", nil)
		require.NoError(t, err)
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		require.Equal(t, want, res.StatusCode, host)
	}

	r := cliRun(t, "serve", "--help")
	require.Contains(t, r.stdout, "--max-conns-per-ip")
	require.Contains(t, r.stdout, "--read-timeout")
}

func TestServeRefusesBadSandboxFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args []string }{
		{[]string{"--sandbox-user", "0"}},
		{[]string{"--sandbox-user", "1000:0"}},
		{[]string{"--sandbox-user", "nobody"}},
		{[]string{"--sandbox-disk-mb", "0"}},
	} {
		r := cliRun(t, append([]string{"serve", "--data", t.TempDir()}, tc.args...)...)
		require.Equal(t, exitUsage, r.code, "%v", tc.args)
		require.Contains(t, r.stderr, tc.args[0], "the error names the flag")
	}
	uid, gid, err := parseSandboxUser("2000")
	require.NoError(t, err)
	require.Equal(t, []int{2000, 2000}, []int{uid, gid})
	uid, gid, err = parseSandboxUser("2000:3000")
	require.NoError(t, err)
	require.Equal(t, []int{2000, 3000}, []int{uid, gid})
}

// TestServeLogFormatJSON: with --log-format json every log line on stderr
// is one JSON object (the "serving" line among them); a format it does not
// know is a usage error.
func TestServeLogFormatJSON(t *testing.T) {
	t.Parallel()
	n := startServe(t, noEnv, "--data", t.TempDir(), "--sandbox", "local", "--log-format", "json", "--log-level", "info")
	n.stderr.waitFor(t, `"msg":"serving"`)
	require.NoError(t, n.stop())
	lines := strings.Split(strings.TrimSpace(n.stderr.String()), "\n")
	require.NotEmpty(t, lines)
	for _, line := range lines {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &v), "not a JSON line: %s", line)
		require.Contains(t, v, "level")
	}

	r := cliRun(t, "serve", "--log-format", "xml")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `--log-format "xml": want text or json`)
}

// TestServeRunnerCapsUsage: the runner connection caps are flags, and a cap
// under 1 (which would refuse every runner) is a usage error naming the
// flag, before anything starts.
func TestServeRunnerCapsUsage(t *testing.T) {
	t.Parallel()
	r := cliRun(t, "serve", "--data", t.TempDir(), "--runner-max-conns-per-key", "0")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--runner-max-conns-per-key 0: want at least 1")
	r = cliRun(t, "serve", "--data", t.TempDir(), "--runner-max-conns", "-3")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--runner-max-conns -3: want at least 1")
	r = cliRun(t, "serve", "--help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "--runner-max-conns-per-key int")
	require.Contains(t, r.stdout, "--runner-max-conns int")
}
