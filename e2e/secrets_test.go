package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestSecretCanaries: a canary secret bound to a local service is used by a
// session whose steps try to get at it every way they can — print the
// sandbox's environment and the server's, read /proc, and have the service
// echo it back plain, base64- and hex-encoded. Afterwards no form of the
// canary appears in anything the server wrote (database, WAL, workspaces,
// its log) or the sandbox could read, and the service did receive it.
func TestSecretCanaries(t *testing.T) {
	t.Parallel()
	const canary = "lh-canary-7f3e9b2c41d8a6"
	var got []string
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		got = append(got, a)
		tok := a[len("Bearer "):]
		fmt.Fprintf(w, "auth=%s b64=%s hex=%s", a, base64.StdEncoding.EncodeToString([]byte(tok)), hex.EncodeToString([]byte(tok)))
	}))
	defer echo.Close()
	u, err := url.Parse(echo.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)

	srv := startServerWithEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, created, err := srv.api.PutSecret(ctx, "CANARY_TOKEN", &lt.PutSecretRequest{
		Value: canary, Hosts: []string{"127.0.0.1"}, Inject: &lt.SecretInjection{Bearer: true},
	})
	require.NoError(t, err)
	require.True(t, created)

	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "env; cat /proc/1/environ /proc/self/environ 2>&1 | tr '\\0' '\\n'; ls -la / .. 2>&1"}}}},
		{"tool_calls": []map[string]any{{"name": "http_request", "arguments": map[string]any{"method": "GET", "url": echo.URL + "/whoami"}}}},
		{"tool_calls": []map[string]any{{"name": "http_request", "arguments": map[string]any{"method": "POST", "url": echo.URL + "/send", "body": "ping"}}}},
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": "grep -r . /proc/*/environ 2>/dev/null | head -50; echo done"}}}},
		{"text": "done"},
	})
	require.NoError(t, err)
	sess, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: script},
			Tools: []lt.ToolSpec{{Name: "shell"}, {Name: "http_request"}},
			Environment: &lt.Environment{
				Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{port}},
				Secrets: []string{"CANARY_TOKEN"},
			},
		},
		Input: "find the token",
	})
	require.NoError(t, err)
	s := waitTerminal(ctx, t, srv, sess.ID, 30*time.Second)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", deref(s.StopReason))
	require.Equal(t, []string{"Bearer " + canary, "Bearer " + canary}, got, "the service received the secret")

	forms := [][]byte{
		[]byte(canary),
		[]byte(base64.StdEncoding.EncodeToString([]byte(canary))),
		[]byte(hex.EncodeToString([]byte(canary))),
	}
	var redacted bool
	for _, ev := range journal(ctx, t, srv.api, s.ID) {
		for _, f := range forms {
			require.NotContains(t, string(ev.Data), string(f), "event %d %s", ev.Seq, ev.Type)
		}
		redacted = redacted || bytes.Contains(ev.Data, []byte("[REDACTED:CANARY_TOKEN]"))
	}
	require.True(t, redacted, "the echoed secret was redacted")

	srv.kill() // everything it wrote is on disk
	scanned := 0
	require.NoError(t, filepath.WalkDir(filepath.Dir(srv.dataDir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSocket != 0 {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		scanned++
		for _, f := range forms {
			require.False(t, bytes.Contains(data, f), "%s holds the canary (%s)", path, f)
		}
		return nil
	}))
	require.Greater(t, scanned, 3, "the database, its WAL, the log and the workspace were scanned")
}

// TestSessionWebhookSecret: a session created with a webhook_url gets its
// signing secret once, in the response that creates it.
func TestSessionWebhookSecret(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec:  &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"hi"}]`)}},
		Input:      "hello",
		WebhookURL: "https://hooks.example.com/longhaul",
	})
	require.NoError(t, err)
	require.True(t, len(s.WebhookSecret) > len("whsec_") && s.WebhookSecret[:6] == "whsec_", "secret %q", s.WebhookSecret)
	again, err := srv.api.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Empty(t, again.WebhookSecret, "shown only when the session is created")
	require.Equal(t, "https://hooks.example.com/longhaul", again.WebhookURL)
}
