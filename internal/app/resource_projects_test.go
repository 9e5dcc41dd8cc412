package app_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// supportOperator is an operator key of project support.
var supportOperator = app.Caller{KeyID: "key_support", Name: "support-bot", Role: lt.RoleOperator, Project: "support"}

// defaultOperator is an operator key of the default project.
var defaultOperator = app.Caller{KeyID: "key_default", Name: "default-bot", Role: lt.RoleOperator, Project: lt.DefaultProject}

func leafAgent(t *testing.T, name, project string) *lt.PutAgentRequest {
	t.Helper()
	req := &lt.PutAgentRequest{Name: name, Project: project}
	require.NoError(t, json.Unmarshal([]byte(leafSpec), &req.Spec))
	return req
}

// TestAgentsPerProject: agent names are unique per project; a key of one
// project defines, lists and reads its own project's agents only (naming
// another project is a 403 on the field project, another project's agent
// is a 404); an admin names the project, lists every project's, and
// writes and reads in the default project unless it names another. A
// session's agent resolves in the session's project.
func TestAgentsPerProject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := f.ctx
	support := app.WithCaller(t.Context(), supportOperator)
	deflt := app.WithCaller(t.Context(), defaultOperator)

	a, err := f.app.PutAgent(admin, leafAgent(t, "writer", ""))
	require.NoError(t, err)
	require.Equal(t, lt.DefaultProject, a.Project)
	a, err = f.app.PutAgent(admin, leafAgent(t, "writer", "support"))
	require.NoError(t, err)
	require.Equal(t, "support", a.Project)
	require.Equal(t, 1, a.Version, "the same name in another project is another agent")
	a, err = f.app.PutAgent(support, leafAgent(t, "helper", ""))
	require.NoError(t, err)
	require.Equal(t, "support", a.Project, "a key's agents are in its project")
	_, err = f.app.PutAgent(support, leafAgent(t, "helper", lt.DefaultProject))
	requireAPIError(t, err, http.StatusForbidden, "project")
	_, err = f.app.PutAgent(admin, leafAgent(t, "helper", "Not A Project"))
	requireAPIError(t, err, http.StatusBadRequest, "project")
	a, wrote, err := f.app.EnsureAgent(support, leafAgent(t, "writer", ""))
	require.NoError(t, err)
	require.False(t, wrote, "support's writer has this spec already")
	require.Equal(t, "support", a.Project)
	_, _, err = f.app.EnsureAgent(support, leafAgent(t, "writer", lt.DefaultProject))
	requireAPIError(t, err, http.StatusForbidden, "project")

	names := func(l *lt.List[lt.Agent]) []string {
		var out []string
		for _, a := range l.Data {
			out = append(out, a.Project+"/"+a.Name)
		}
		return out
	}
	l, err := f.app.ListAgents(support, "")
	require.NoError(t, err)
	require.Equal(t, []string{"support/helper", "support/writer"}, names(l))
	l, err = f.app.ListAgents(support, "support")
	require.NoError(t, err)
	require.Len(t, l.Data, 2)
	_, err = f.app.ListAgents(support, lt.DefaultProject)
	requireAPIError(t, err, http.StatusForbidden, "project")
	l, err = f.app.ListAgents(deflt, "")
	require.NoError(t, err)
	require.Equal(t, []string{"default/writer"}, names(l))
	l, err = f.app.ListAgents(admin, "")
	require.NoError(t, err)
	require.Equal(t, []string{"default/writer", "support/helper", "support/writer"}, names(l))
	l, err = f.app.ListAgents(admin, "support")
	require.NoError(t, err)
	require.Equal(t, []string{"support/helper", "support/writer"}, names(l))
	_, err = f.app.ListAgents(admin, "Not A Project")
	requireAPIError(t, err, http.StatusBadRequest, "project")

	a, err = f.app.GetAgent(support, "", "helper", 0)
	require.NoError(t, err)
	require.Equal(t, "support", a.Project)
	_, err = f.app.GetAgent(deflt, "", "helper", 0)
	requireAPIError(t, err, http.StatusNotFound, "")
	_, err = f.app.GetAgent(support, lt.DefaultProject, "writer", 0)
	requireAPIError(t, err, http.StatusForbidden, "project")
	_, err = f.app.GetAgent(admin, "", "helper", 0)
	requireAPIError(t, err, http.StatusNotFound, "") // the default project's
	a, err = f.app.GetAgent(admin, "support", "helper", 1)
	require.NoError(t, err)
	require.Equal(t, "support", a.Project)

	// A session's agent is its project's.
	_, err = f.app.CreateSession(admin, &lt.CreateSessionRequest{Agent: "helper", Input: "hi"})
	requireAPIError(t, err, http.StatusBadRequest, "agent")
	s, err := f.app.CreateSession(admin, &lt.CreateSessionRequest{Agent: "helper", Input: "hi", Project: "support"})
	require.NoError(t, err)
	require.Equal(t, lt.AgentRef{Name: "helper", Version: 1}, s.Agent)
}

// TestWebhookEndpointsPerProject: an endpoint is created in the caller's
// project (an admin's: the one it names, default the default project); a
// key of one project lists and deletes its own only (another project's
// endpoint is a 404, naming another project a 403 on the field project);
// an admin sees and deletes every project's.
func TestWebhookEndpointsPerProject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := f.ctx
	support := app.WithCaller(t.Context(), supportOperator)
	defEP, err := f.app.CreateWebhookEndpoint(admin, &lt.CreateWebhookEndpointRequest{URL: "https://hooks.example.com/default"})
	require.NoError(t, err)
	require.Equal(t, lt.DefaultProject, defEP.Project)
	adminSupportEP, err := f.app.CreateWebhookEndpoint(admin, &lt.CreateWebhookEndpointRequest{URL: "https://hooks.example.com/a", Project: "support"})
	require.NoError(t, err)
	require.Equal(t, "support", adminSupportEP.Project)
	ownEP, err := f.app.CreateWebhookEndpoint(support, &lt.CreateWebhookEndpointRequest{URL: "https://hooks.example.com/s"})
	require.NoError(t, err)
	require.Equal(t, "support", ownEP.Project)
	_, err = f.app.CreateWebhookEndpoint(support, &lt.CreateWebhookEndpointRequest{URL: "https://hooks.example.com/x", Project: lt.DefaultProject})
	requireAPIError(t, err, http.StatusForbidden, "project")

	ids := func(l *lt.List[lt.WebhookEndpoint]) []string {
		var out []string
		for _, ep := range l.Data {
			out = append(out, ep.ID)
		}
		return out
	}
	l, err := f.app.ListWebhookEndpoints(support, "")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{adminSupportEP.ID, ownEP.ID}, ids(l))
	_, err = f.app.ListWebhookEndpoints(support, lt.DefaultProject)
	requireAPIError(t, err, http.StatusForbidden, "project")
	l, err = f.app.ListWebhookEndpoints(admin, "")
	require.NoError(t, err)
	require.Len(t, l.Data, 3)
	l, err = f.app.ListWebhookEndpoints(admin, lt.DefaultProject)
	require.NoError(t, err)
	require.Equal(t, []string{defEP.ID}, ids(l))
	_, err = f.app.ListWebhookDeliveries(support, lt.ListWebhookDeliveriesParams{Project: lt.DefaultProject})
	requireAPIError(t, err, http.StatusForbidden, "project")
	_, err = f.app.ListWebhookDeliveries(support, lt.ListWebhookDeliveriesParams{})
	require.NoError(t, err)

	requireAPIError(t, f.app.DeleteWebhookEndpoint(support, defEP.ID), http.StatusNotFound, "")
	require.NoError(t, f.app.DeleteWebhookEndpoint(support, ownEP.ID))
	require.NoError(t, f.app.DeleteWebhookEndpoint(admin, adminSupportEP.ID), "an admin deletes any project's")
	l, err = f.app.ListWebhookEndpoints(admin, "")
	require.NoError(t, err)
	require.Equal(t, []string{defEP.ID}, ids(l), "the default project's endpoint is untouched")
}

// TestSecretsPerProject: secrets (an admin's) belong to the project the
// request names (default the default project): listed with it, filtered
// by it, deleted in it.
func TestSecretsPerProject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := f.ctx
	put := func(project string) *lt.Secret {
		t.Helper()
		s, created, err := f.app.PutSecret(admin, "TOKEN", &lt.PutSecretRequest{
			Value: "value-of-" + project + "-token", Hosts: []string{"api.example.com"}, Inject: &lt.SecretInjection{Bearer: true}, Project: project,
		})
		require.NoError(t, err)
		require.True(t, created)
		return s
	}
	require.Equal(t, lt.DefaultProject, put("").Project)
	require.Equal(t, "support", put("support").Project)
	_, _, err := f.app.PutSecret(admin, "TOKEN", &lt.PutSecretRequest{
		Value: "value-of-a-token", Hosts: []string{"api.example.com"}, Inject: &lt.SecretInjection{Bearer: true}, Project: "Bad Project",
	})
	requireAPIError(t, err, http.StatusBadRequest, "project")

	l, err := f.app.ListSecrets(admin, "")
	require.NoError(t, err)
	require.Len(t, l.Data, 2)
	l, err = f.app.ListSecrets(admin, "support")
	require.NoError(t, err)
	require.Len(t, l.Data, 1)
	require.Equal(t, "support", l.Data[0].Project)

	require.NoError(t, f.app.DeleteSecret(admin, "support", "TOKEN"))
	requireAPIError(t, f.app.DeleteSecret(admin, "support", "TOKEN"), http.StatusNotFound, "")
	l, err = f.app.ListSecrets(admin, "")
	require.NoError(t, err)
	require.Len(t, l.Data, 1)
	require.Equal(t, lt.DefaultProject, l.Data[0].Project, "the default project's TOKEN stays")

	// A key that is not an admin's has no access to the vault at all.
	_, err = f.app.ListSecrets(app.WithCaller(t.Context(), supportOperator), "")
	requireAPIError(t, err, http.StatusForbidden, "")
}
