package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// newKeyHarness is an engine with the plan provider (whose API is
// api.example.com), an allowlist of one model key variable and a vault
// with one model key bound to api.example.com.
func newKeyHarness(t *testing.T, p *planProvider) *harness {
	t.Helper()
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, map[string]string{
		"PLAN_API_KEY":      "sk-plan-canary-51c2",
		"LONGHAUL_API_KEYS": "lh-admin-canary-77aa",
		"PATH":              "/usr/bin",
	})
	h.modelKeyEnv = map[string][]string{"PLAN_API_KEY": {"api.example.com"}, "PORT_KEY": {"api.example.com:8443"}, "UNSET_KEY": {"api.example.com"}}
	h.vault = &fakeVault{secrets: map[string]struct{ value, host string }{
		"MODEL_KEY": {"sk-vault-canary-9d0e", "api.example.com"},
		"PORT_KEY":  {"sk-port-canary-3b71", "api.example.com:8443"},
	}}
	h.restart("node-a")
	return h
}

// TestModelKeyEnvAllowlist: api_key_env names only variables the operator
// allowed, for their hosts; every other name gets the same message whether
// the server has such a variable or not, and no value is ever echoed.
func TestModelKeyEnvAllowlist(t *testing.T) {
	t.Parallel()
	h := newKeyHarness(t, &planProvider{plan: []model.Response{{Text: "ok"}}})
	ctx := context.Background()
	try := func(m lt.ModelSpec) error {
		_, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &lt.AgentSpec{Model: m}, Input: "go"})
		return err
	}

	var messages []string
	for _, name := range []string{"LONGHAUL_API_KEYS", "PATH", "HOME_NOT_SET_ANYWHERE", "lower_case_unset"} {
		err := try(lt.ModelSpec{Provider: "plan", APIKeyEnv: name, BaseURL: "http://127.0.0.1:9/v1"})
		requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.model.api_key_env")
		require.NotContains(t, err.Error(), "lh-admin-canary")
		require.NotContains(t, err.Error(), "/usr/bin")
		messages = append(messages, apiMessage(t, err))
	}
	for _, m := range messages[1:] {
		require.Equal(t, messages[0], m, "one message, set or not")
	}
	require.NotContains(t, messages[0], "LONGHAUL_API_KEYS", "the name is not echoed")

	// Allowed, but toward another host than its own.
	err := try(lt.ModelSpec{Provider: "plan", APIKeyEnv: "PLAN_API_KEY", BaseURL: "https://evil.example.net/v1"})
	requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.model.api_key_env")
	require.Contains(t, err.Error(), "goes only to api.example.com, not to evil.example.net:443")
	require.NotContains(t, err.Error(), "sk-plan-canary")
	// A port in the binding: that port only.
	requireAPIError(t, try(lt.ModelSpec{Provider: "plan", APIKeyEnv: "PORT_KEY"}), lt.CodeInvalidRequest, "not to api.example.com:443")
	// Allowed, for its host, but not set here: that may be said.
	requireAPIError(t, try(lt.ModelSpec{Provider: "plan", APIKeyEnv: "UNSET_KEY"}), lt.CodeInvalidRequest, "environment variable UNSET_KEY is not set on this server")

	// A configured agent: the field under "spec".
	_, err = h.eng.PutAgent(ctx, &lt.PutAgentRequest{Name: "leaky", Spec: lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan", APIKeyEnv: "LONGHAUL_API_KEYS"}}})
	requireAPIError(t, err, lt.CodeInvalidRequest, "spec.model.api_key_env")
	require.Equal(t, messages[0], apiMessage(t, err), "the same message for agents")

	// Its own host: accepted, by default URL or by base_url.
	_, err = h.eng.PutAgent(ctx, &lt.PutAgentRequest{Name: "ok", Spec: lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan", APIKeyEnv: "PLAN_API_KEY"}}})
	require.NoError(t, err)
	require.NoError(t, try(lt.ModelSpec{Provider: "plan", APIKeyEnv: "PLAN_API_KEY", BaseURL: "https://API.example.com./v2"}))
}

// apiMessage is the message of an API error, without its code and field.
func apiMessage(t *testing.T, err error) string {
	t.Helper()
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	return ae.Message
}

// TestModelKeySecretBinding: api_key_secret goes only to the secret's
// hosts, port included when the binding names one.
func TestModelKeySecretBinding(t *testing.T) {
	t.Parallel()
	h := newKeyHarness(t, &planProvider{plan: []model.Response{{Text: "ok"}}})
	ctx := context.Background()
	try := func(m lt.ModelSpec) error {
		_, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &lt.AgentSpec{Model: m}, Input: "go"})
		return err
	}
	err := try(lt.ModelSpec{Provider: "plan", APIKeySecret: "MODEL_KEY", BaseURL: "http://127.0.0.1:9/v1"})
	requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.model.api_key_secret")
	require.Contains(t, err.Error(), "not bound")
	require.NotContains(t, err.Error(), "sk-vault-canary")
	requireAPIError(t, try(lt.ModelSpec{Provider: "plan", APIKeySecret: "PORT_KEY"}), lt.CodeInvalidRequest, "agent_spec.model.api_key_secret")
	require.NoError(t, try(lt.ModelSpec{Provider: "plan", APIKeySecret: "PORT_KEY", BaseURL: "https://api.example.com:8443/v1"}))
	require.NoError(t, try(lt.ModelSpec{Provider: "plan", APIKeySecret: "MODEL_KEY"}))
	// A provider that names no API of its own gets a key only with a
	// base_url.
	err = try(lt.ModelSpec{Provider: "scripted", APIKeySecret: "MODEL_KEY", Script: json.RawMessage(`[{"text":"hi"}]`)})
	requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.model.api_key_secret")
	// A bound host over plain http would have the key read on the way.
	err = try(lt.ModelSpec{Provider: "plan", APIKeySecret: "PORT_KEY", BaseURL: "http://api.example.com:8443/v1"})
	requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.model.base_url")
	require.Contains(t, err.Error(), "never in clear text")
}

// TestModelKeyCheckedAtCallTime: a stored agent whose secret was rebound
// since, or whose variable the operator no longer allows, sends nothing:
// the call is not made, and the turn fails saying why.
func TestModelKeyCheckedAtCallTime(t *testing.T) {
	t.Parallel()
	p := &planProvider{plan: []model.Response{{Text: "ok"}, {Text: "ok"}}}
	h := newKeyHarness(t, p)
	ctx := context.Background()
	for _, spec := range []lt.AgentSpec{
		{Model: lt.ModelSpec{Provider: "plan", APIKeySecret: "MODEL_KEY"}},
		{Model: lt.ModelSpec{Provider: "plan", APIKeyEnv: "PLAN_API_KEY"}},
	} {
		name := "by-secret"
		if spec.Model.APIKeyEnv != "" {
			name = "by-env"
		}
		_, err := h.eng.PutAgent(ctx, &lt.PutAgentRequest{Name: name, Spec: spec})
		require.NoError(t, err)
	}
	// The secret now goes elsewhere; the variable is no longer allowed.
	h.vault.(*fakeVault).secrets["MODEL_KEY"] = struct{ value, host string }{"sk-vault-canary-9d0e", "other.example.org"}
	h.modelKeyEnv = map[string][]string{"OTHER_KEY": {"api.example.com"}}
	h.restart("node-a")

	for name, why := range map[string]string{
		"by-secret": "secret MODEL_KEY is not bound",
		"by-env":    "names no environment variable this server allows for model keys",
	} {
		s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{Agent: name, Input: "go"})
		require.NoError(t, err)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopProviderError, *s.StopReason)
		failed := events(t, h, s.ID, lt.EventModelFailed)
		require.Len(t, failed, 1)
		f := data[lt.ModelFailedData](t, failed[0])
		require.Contains(t, f.Message, "model key not sent")
		require.Contains(t, f.Message, why)
		require.False(t, f.Retry)
	}
	require.Empty(t, p.requests, "the provider was never called")
}

// TestModelBaseURLNotTheControlPlane: a model may not be pointed at the
// server's own API or database, at definition or at call time.
func TestModelBaseURLNotTheControlPlane(t *testing.T) {
	t.Parallel()
	p := &planProvider{plan: []model.Response{{Text: "ok"}}}
	h := newKeyHarness(t, p)
	cp := &egress.ControlPlane{}
	require.NoError(t, cp.Add(egress.GroupListen, "the server's own API", "0.0.0.0:8080"))
	h.controlPlane = cp
	h.restart("node-a")
	ctx := context.Background()
	for _, u := range []string{"http://127.0.0.1:8080/v1", "http://localhost:8080/v1", "http://[::1]:8080", "http://0.0.0.0:8080/v1"} {
		_, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan", BaseURL: u}}, Input: "go"})
		requireAPIError(t, err, lt.CodeInvalidRequest, "agent_spec.model.base_url")
		require.Contains(t, err.Error(), "the server's own API", u)
	}
	// Stored before the address was the server's: refused at call time.
	_, err := h.eng.PutAgent(ctx, &lt.PutAgentRequest{Name: "loop", Spec: lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan", BaseURL: "http://127.0.0.1:9090/v1"}}})
	require.NoError(t, err)
	require.NoError(t, cp.Add(egress.GroupNodes, "another node's API", "127.0.0.1:9090"))
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{Agent: "loop", Input: "go"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionFailed)
	f := data[lt.ModelFailedData](t, events(t, h, s.ID, lt.EventModelFailed)[0])
	require.Contains(t, f.Message, "another node's API")
	require.Empty(t, p.requests)
}

// TestModelKeyEnvConfig: the allowlist is validated when the engine is
// built; the server's own variables cannot be allowed.
func TestModelKeyEnvConfig(t *testing.T) {
	t.Parallel()
	for name, keyEnv := range map[string]map[string][]string{
		"reserved":  {"LONGHAUL_API_KEYS": {"api.example.com"}},
		"reserved2": {"longhaul_vault_key": {"api.example.com"}},
		"no hosts":  {"MY_KEY": nil},
		"bad host":  {"MY_KEY": {"https://api.example.com"}},
		"bad name":  {"MY-KEY": {"api.example.com"}},
		"bad port":  {"MY_KEY": {"api.example.com:0"}},
	} {
		_, err := engine.New(nil, &engine.Config{WorkspaceRoot: t.TempDir(), ModelKeyEnv: keyEnv})
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "ModelKeyEnv", name)
	}
	require.Equal(t, map[string][]string{"OPENAI_API_KEY": {"api.openai.com"}, "ANTHROPIC_API_KEY": {"api.anthropic.com"}}, engine.DefaultModelKeyEnv())
}
