package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestSandboxNetworkThroughTheProxy: with the real binary and bubblewrap, a
// shell command reaches a listed host only through the server's egress
// proxy; the metadata address, an unlisted host and the server's own API
// port are refused; every decision is in the journal.
func TestSandboxNetworkThroughTheProxy(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bwrap", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required in CI (.ci/run installs it)", tool)
			}
			t.Skipf("%s is not installed: the sandbox's network is not tested", tool)
		}
	}
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the listed service")
	}))
	defer svc.Close()
	u, err := url.Parse(svc.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)

	srv := startServer(t, "--sandbox", "bwrap")
	apiPort := srv.addr[strings.LastIndexByte(srv.addr, ':')+1:]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Through the proxy the sandbox is given ($HTTP_PROXY; the sandbox's
	// NO_PROXY exempts loopback, where the listed service happens to live,
	// hence --noproxy ''), and directly, which must fail: the sandbox has
	// no network of its own.
	curl := func(target string) string {
		return `curl -s -S -m 5 --noproxy '' -x "$HTTP_PROXY" -w ' status=%{http_code}' ` + target + ` 2>&1; echo; curl -s -S -m 2 --noproxy '*' -w ' direct=%{http_code}' ` + target + ` 2>&1; true`
	}
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": curl(svc.URL + "/")}}}},
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": curl("http://169.254.169.254/latest/meta-data/")}}}},
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": curl("http://unlisted.example/")}}}},
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": curl("http://127.0.0.1:" + apiPort + "/v1/sessions")}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:       lt.ModelSpec{Provider: "scripted", Script: script},
			Tools:       []lt.ToolSpec{{Name: "shell"}},
			Environment: &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{port}}},
		},
		Input: "reach out",
	})
	require.NoError(t, err)
	s := waitTerminal(ctx, t, srv, sess.ID, 45*time.Second)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", deref(s.StopReason))

	var outputs []string
	var allowed, refused []string
	for _, ev := range journal(ctx, t, srv.api, s.ID) {
		switch ev.Type {
		case lt.EventToolCompleted, lt.EventToolFailed:
			outputs = append(outputs, string(ev.Data))
		case lt.EventNetworkConnection:
			var d struct {
				Via     string `json:"via"`
				Host    string `json:"host"`
				Port    int    `json:"port"`
				Allowed bool   `json:"allowed"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			require.Equal(t, "proxy", d.Via)
			if d.Allowed {
				allowed = append(allowed, fmt.Sprintf("%s:%d", d.Host, d.Port))
			} else {
				refused = append(refused, fmt.Sprintf("%s:%d", d.Host, d.Port))
			}
		}
	}
	require.Len(t, outputs, 4)
	require.Contains(t, outputs[0], "hello from the listed service")
	require.Contains(t, outputs[0], "status=200")
	for i, o := range outputs {
		require.Contains(t, o, "direct=000", "request %d went out without the proxy: %s", i+1, o)
	}
	for i, o := range outputs[1:] {
		require.NotContains(t, o, "status=200", "request %d must be refused: %s", i+2, o)
	}
	require.Equal(t, []string{fmt.Sprintf("127.0.0.1:%d", port)}, allowed)
	require.Contains(t, refused, "169.254.169.254:80")
	require.Contains(t, refused, "unlisted.example:80")
	require.Contains(t, refused, "127.0.0.1:"+apiPort)
}
