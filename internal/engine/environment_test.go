package engine_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/vault"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// fakeVault holds secrets bound to hosts, as the real vault does.
// Its secrets are the default project's: another project has none.
type fakeVault struct {
	secrets map[string]struct{ value, host string }
}

type unknownSecret string

func (u unknownSecret) Error() string         { return "secret " + string(u) + " does not exist" }
func (u unknownSecret) UnknownSecret() string { return string(u) }

func (v *fakeVault) Require(_ context.Context, project string, names []string) error {
	for _, n := range names {
		if _, ok := v.secrets[n]; !ok || (project != "" && project != lt.DefaultProject) {
			return unknownSecret(n)
		}
	}
	return nil
}

func (v *fakeVault) Redactor(context.Context) (*redact.Redactor, error) {
	values := map[string]string{}
	for n, s := range v.secrets {
		values[n] = s.value
	}
	return redact.New(values), nil
}

func (v *fakeVault) Invalidate() {}

type notBound string

func (n notBound) Error() string    { return "secret " + string(n) + " is not bound to that host" }
func (n notBound) NotBound() string { return string(n) }

func (v *fakeVault) CheckBound(ctx context.Context, project, name, dest string) error {
	if err := v.Require(ctx, project, []string{name}); err != nil {
		return err
	}
	if !vault.HostMatches([]string{v.secrets[name].host}, dest) {
		return notBound(name)
	}
	return nil
}

func (v *fakeVault) ValueFor(ctx context.Context, project, name, dest string) (string, error) {
	if err := v.CheckBound(ctx, project, name, dest); err != nil {
		return "", err
	}
	return v.secrets[name].value, nil
}

func (v *fakeVault) Source(ctx context.Context, project string, names []string) (tool.SecretSource, error) {
	if err := v.Require(ctx, project, names); err != nil {
		return nil, err
	}
	src := sourceFunc(func(host string) []tool.Credential {
		var out []tool.Credential
		for _, n := range names {
			if s := v.secrets[n]; vault.HostMatches([]string{s.host}, host) {
				out = append(out, tool.Credential{Name: n, Header: "Authorization", Value: "Bearer " + s.value})
			}
		}
		return out
	})
	return src, nil
}

// Login gives every secret as a login of the user "agent".
func (v *fakeVault) Login(ctx context.Context, project, name, dest string) (*tool.LoginSecret, error) {
	value, err := v.ValueFor(ctx, project, name, dest)
	if err != nil {
		return nil, err
	}
	host := v.secrets[name].host
	return &tool.LoginSecret{Name: name, Username: "agent", Password: value, Bound: func(d string) bool { return vault.HostMatches([]string{host}, d) }}, nil
}

type sourceFunc func(host string) []tool.Credential

func (f sourceFunc) ForHost(host string) []tool.Credential { return f(host) }

// TestHTTPRequestWithSecretsAndAllowlist: http_request reaches a listed host
// with the secret bound to it injected outside the sandbox, is refused for
// an unlisted one, and every connection decision is journaled; the class of
// a call follows its method.
func TestHTTPRequestWithSecretsAndAllowlist(t *testing.T) {
	const token = "canary-token-5d1e2a9f"
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		// A careless service echoes the credential back, plain and
		// base64-encoded: none of it may reach the journal.
		a := r.Header.Get("Authorization")
		fmt.Fprintf(w, `{"you_sent":%q,"b64":%q}`, a, base64.StdEncoding.EncodeToString([]byte(strings.TrimPrefix(a, "Bearer "))))
	}))
	defer srv.Close()
	p := &planProvider{plan: []model.Response{
		call("http_request", fmt.Sprintf(`{"method":"GET","url":%q}`, srv.URL+"/status")),
		call("http_request", `{"method":"POST","url":"http://unlisted.example/","body":"x"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	h.vault = &fakeVault{secrets: map[string]struct{ value, host string }{"API_TOKEN": {token, "127.0.0.1"}}}
	h.restart("node-a")
	ctx := context.Background()
	sp := &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "plan"},
		Tools: []lt.ToolSpec{{Name: "http_request"}},
		Environment: &lt.Environment{
			Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{srvPort(t, srv.URL)}},
			Secrets: []string{"API_TOKEN"},
		},
	}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	mu.Lock()
	require.Equal(t, []string{"Bearer " + token}, auth, "the secret went to its host, once")
	mu.Unlock()
	requested := events(t, h, s.ID, lt.EventToolRequested)
	require.Equal(t, lt.EffectRead, data[lt.ToolRequestedData](t, requested[0]).Class, "GET reads")
	require.Equal(t, lt.EffectIrreversible, data[lt.ToolRequestedData](t, requested[1]).Class, "POST is irreversible")
	conns := events(t, h, s.ID, lt.EventNetworkConnection)
	require.Len(t, conns, 2)
	allowed := data[lt.NetworkConnectionData](t, conns[0])
	require.True(t, allowed.Allowed)
	require.Equal(t, "http_request", allowed.Via)
	refused := data[lt.NetworkConnectionData](t, conns[1])
	require.False(t, refused.Allowed)
	require.Equal(t, "unlisted.example", refused.Host)
	b64 := base64.StdEncoding.EncodeToString([]byte(token))
	var sawRedacted bool
	for _, ev := range events(t, h, s.ID) {
		require.NotContains(t, string(ev.Data), token, "event %d %s", ev.Seq, ev.Type)
		require.NotContains(t, string(ev.Data), b64, "event %d %s", ev.Seq, ev.Type)
		sawRedacted = sawRedacted || strings.Contains(string(ev.Data), "[REDACTED:API_TOKEN]")
	}
	require.True(t, sawRedacted, "the echoed credential was redacted, not dropped silently")
	for _, r := range p.stepRequests() {
		for _, m := range r.msgs {
			require.NotContains(t, m.Text, token, "the model never sees the value")
		}
	}

	// An agent naming a secret the vault lacks, or a bad allowlist entry,
	// is refused when it is defined.
	bad := *sp
	bad.Environment = &lt.Environment{Secrets: []string{"NOPE"}}
	_, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &bad, Input: "go"})
	requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.environment.secrets[0]")
	bad.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"http://x.com/path"}}}
	_, err = h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &bad, Input: "go"})
	requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.environment.network.allow")
	require.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"))
}

func srvPort(t *testing.T, raw string) int {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	return port
}

// TestDeletedSecretFailsTheTurn: a secret the agent names is deleted after
// the agent was defined: the turn fails saying why (sandbox_error), rather
// than the session being claimed again and again.
func TestDeletedSecretFailsTheTurn(t *testing.T) {
	p := &planProvider{plan: []model.Response{{Text: "never"}}}
	v := &fakeVault{secrets: map[string]struct{ value, host string }{"API_TOKEN": {"v-123456789", "x"}}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	h.vault = v
	h.restart("node-a")
	ctx := context.Background()
	sp := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Environment: &lt.Environment{Secrets: []string{"API_TOKEN"}}}
	// Stop the worker, define the session, delete the secret, start again.
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"})
	require.NoError(t, err)
	delete(v.secrets, "API_TOKEN")
	h.start("node-a")
	s = h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopSandboxError, *s.StopReason)
	require.Empty(t, p.requests, "no model call without the environment")
}

// TestModelKeyFromTheVault: api_key_secret names a vault secret that holds
// a model's key: the provider gets it, and the journal never holds it.
func TestModelKeyFromTheVault(t *testing.T) {
	const key = "sk-vault-canary-0c7e51"
	p := &planProvider{plan: []model.Response{{Text: "echo: " + key}}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	h.vault = &fakeVault{secrets: map[string]struct{ value, host string }{"MODEL_KEY": {key, "api.example.com"}}}
	h.restart("node-a")
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan", APIKeySecret: "MODEL_KEY"}}, nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, key, p.requests[0].apiKey)
	for _, ev := range events(t, h, s.ID) {
		require.NotContains(t, string(ev.Data), key, "event %d %s: even a model that repeats its key", ev.Seq, ev.Type)
	}
	_, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan", APIKeySecret: "NOPE"}}, Input: "go",
	})
	requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.model.api_key_secret")
}

// TestRunnerSelectorIsValidated: environment.runner is a runner's name or
// a list of labels, exactly one, each a runner name; a bad one is refused
// when the agent is defined, naming the field.
func TestRunnerSelectorIsValidated(t *testing.T) {
	p := &planProvider{plan: []model.Response{{Text: "never"}}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	for field, sel := range map[string]*lt.RunnerSelector{
		"agent_spec.environment.runner":           {},
		"agent_spec.environment.runner.name":      {Name: "Box 1"},
		"agent_spec.environment.runner.labels[1]": {Labels: []string{"gpu", "-x"}},
	} {
		sp := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Environment: &lt.Environment{Runner: sel}}
		_, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"})
		requireAPIError(t, err, lt.CodeInvalidRequest, field)
	}
	both := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Environment: &lt.Environment{Runner: &lt.RunnerSelector{Name: "box1", Labels: []string{"gpu"}}}}
	_, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: both, Input: "go"})
	requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.environment.runner")
	require.ErrorContains(t, err, "either name or labels, not both")
	twice := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Environment: &lt.Environment{Runner: &lt.RunnerSelector{Labels: []string{"gpu", "gpu"}}}}
	_, err = h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: twice, Input: "go"})
	requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.environment.runner.labels[1]")
}
