package longhaul_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRuntimeProjects: the library works in every project, as an admin:
// its agents (from Options too) and secrets name their project, lists
// keep to one or span all, and a session's agent is its project's.
func TestRuntimeProjects(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir(), Agents: []lt.PutAgentRequest{
		{Name: "writer", Spec: scripted(`[{"text":"default's"}]`)},
		{Name: "writer", Spec: scripted(`[{"text":"support's"}]`), Project: "support"},
	}})
	ctx := t.Context()
	all, err := rt.ListAgents(ctx, "")
	require.NoError(t, err)
	require.Len(t, all.Data, 2)
	support, err := rt.ListAgents(ctx, "support")
	require.NoError(t, err)
	require.Len(t, support.Data, 1)
	a, err := rt.GetAgent(ctx, "support", "writer", 0)
	require.NoError(t, err)
	require.Equal(t, "support", a.Project)
	require.Equal(t, 1, a.Version)

	s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{Agent: "writer", Input: "go", Project: "support"})
	require.NoError(t, err)
	waitStatus(t, rt, s.ID, lt.SessionIdle)
	turns, err := rt.ListTurns(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, "support's", turns.Data[0].Output, "the session ran support's writer")

	sec, _, err := rt.PutSecret(ctx, "TOKEN", &lt.PutSecretRequest{Value: "support-token-1", Hosts: []string{"api.example.com"},
		Inject: &lt.SecretInjection{Bearer: true}, Project: "support"})
	require.NoError(t, err)
	require.Equal(t, "support", sec.Project)
	secrets, err := rt.ListSecrets(ctx, lt.DefaultProject)
	require.NoError(t, err)
	require.Empty(t, secrets.Data)
	require.NoError(t, rt.DeleteSecret(ctx, "support", "TOKEN"))

	ep, err := rt.CreateWebhookEndpoint(ctx, &lt.CreateWebhookEndpointRequest{URL: "https://hooks.example.com/in", Project: "support"})
	require.NoError(t, err)
	require.Equal(t, "support", ep.Project)
	eps, err := rt.ListWebhookEndpoints(ctx, lt.DefaultProject)
	require.NoError(t, err)
	require.Empty(t, eps.Data)
}
