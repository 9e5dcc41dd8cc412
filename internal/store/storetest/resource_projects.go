package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

// project is the project of the rows of the tests that are not about
// projects (the one existing rows migrate into).
const project = "default"

// testAgentProjects: agent names are unique per project, not overall: the
// same name and version in two projects are two agents, a get keeps to its
// project, and a list keeps to its project or, unfiltered, lists both.
func testAgentProjects(t *testing.T, h *harness) {
	insert := func(proj, name string, version int, spec string) {
		t.Helper()
		row, err := h.s.AgentInsert(h.ctx, &store.AgentInsertParams{
			Project: proj, Name: name, Version: version, Spec: json.RawMessage(spec), CreatedAt: at(time.Duration(version) * time.Second),
		})
		require.NoError(t, err)
		require.Equal(t, proj, row.Project)
	}
	insert("alpha", "writer", 1, `{"model":"a1"}`)
	insert("beta", "writer", 1, `{"model":"b1"}`)
	insert("beta", "writer", 2, `{"model":"b2"}`)
	insert("beta", "reader", 1, `{"model":"r1"}`)
	_, err := h.s.AgentInsert(h.ctx, &store.AgentInsertParams{
		Project: "alpha", Name: "writer", Version: 1, Spec: json.RawMessage(`{}`), CreatedAt: t0,
	})
	require.ErrorIs(t, err, store.ErrConflict, "a version conflicts within its project")

	a, err := h.s.AgentGet(h.ctx, "alpha", "writer", 0)
	require.NoError(t, err)
	require.Equal(t, "alpha", a.Project)
	require.Equal(t, 1, a.Version, "beta's version 2 is not alpha's latest")
	requireJSON(t, `{"model":"a1"}`, a.Spec)
	b, err := h.s.AgentGet(h.ctx, "beta", "writer", 1)
	require.NoError(t, err)
	requireJSON(t, `{"model":"b1"}`, b.Spec)
	_, err = h.s.AgentGet(h.ctx, "alpha", "reader", 0)
	require.ErrorIs(t, err, store.ErrNotFound, "beta's agent is not alpha's")
	_, err = h.s.AgentGet(h.ctx, "alpha", "writer", 2)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = h.s.AgentGet(h.ctx, "gamma", "writer", 0)
	require.ErrorIs(t, err, store.ErrNotFound)

	type key struct {
		project, name string
		version       int
	}
	keys := func(rows []*store.AgentRow) []key {
		out := make([]key, len(rows))
		for i, r := range rows {
			out[i] = key{r.Project, r.Name, r.Version}
		}
		return out
	}
	all, err := h.s.AgentList(h.ctx, "")
	require.NoError(t, err)
	require.Equal(t, []key{{"alpha", "writer", 1}, {"beta", "reader", 1}, {"beta", "writer", 2}}, keys(all))
	alpha, err := h.s.AgentList(h.ctx, "alpha")
	require.NoError(t, err)
	require.Equal(t, []key{{"alpha", "writer", 1}}, keys(alpha))
	none, err := h.s.AgentList(h.ctx, "gamma")
	require.NoError(t, err)
	require.Empty(t, none)
}

// testSecretProjects: secret names are unique per project: a put in one
// project neither replaces nor reveals the same name in another, and get,
// list and delete keep to their project.
func testSecretProjects(t *testing.T, h *harness) {
	inA := secretRow("TOKEN", at(time.Second))
	inA.Project = "alpha"
	inB := secretRow("TOKEN", at(2*time.Second))
	inB.Project = "beta"
	inB.Ciphertext = []byte("beta's ciphertext")
	for _, r := range []*store.SecretRow{inA, inB} {
		created, err := h.s.SecretPut(h.ctx, r)
		require.NoError(t, err)
		require.True(t, created, "the same name in another project is another secret")
	}
	got, err := h.s.SecretGet(h.ctx, "alpha", "TOKEN")
	require.NoError(t, err)
	requireSecret(t, inA, got)
	got, err = h.s.SecretGet(h.ctx, "beta", "TOKEN")
	require.NoError(t, err)
	requireSecret(t, inB, got)
	_, err = h.s.SecretGet(h.ctx, "gamma", "TOKEN")
	require.ErrorIs(t, err, store.ErrNotFound)

	all, err := h.s.SecretList(h.ctx, "")
	require.NoError(t, err)
	require.Len(t, all, 2)
	requireSecret(t, inA, all[0]) // by project, then name
	requireSecret(t, inB, all[1])
	beta, err := h.s.SecretList(h.ctx, "beta")
	require.NoError(t, err)
	require.Len(t, beta, 1)
	requireSecret(t, inB, beta[0])

	require.ErrorIs(t, h.s.SecretDelete(h.ctx, "gamma", "TOKEN"), store.ErrNotFound)
	require.NoError(t, h.s.SecretDelete(h.ctx, "alpha", "TOKEN"))
	_, err = h.s.SecretGet(h.ctx, "alpha", "TOKEN")
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err = h.s.SecretGet(h.ctx, "beta", "TOKEN")
	require.NoError(t, err, "deleting alpha's secret leaves beta's")
	requireSecret(t, inB, got)
}

// testWebhookProjects: an endpoint keeps its project, a list keeps to a
// project, and deliveries list by the project recorded on them.
func testWebhookProjects(t *testing.T, h *harness) {
	a := &store.WebhookEndpointRow{ID: "whe_a", Project: "alpha", URL: "https://a.example.com/",
		Events: []string{}, Secrets: []string{"whsec_a"}, CreatedAt: at(time.Second)}
	b := &store.WebhookEndpointRow{ID: "whe_b", Project: "beta", URL: "https://b.example.com/",
		Events: []string{}, Secrets: []string{"whsec_b"}, CreatedAt: at(2 * time.Second)}
	require.NoError(t, h.s.WebhookEndpointCreate(h.ctx, a))
	require.NoError(t, h.s.WebhookEndpointCreate(h.ctx, b))
	got, err := h.s.WebhookEndpointGet(h.ctx, "whe_b")
	require.NoError(t, err)
	require.Equal(t, b, got)
	all, err := h.s.WebhookEndpointList(h.ctx, "")
	require.NoError(t, err)
	require.Equal(t, []*store.WebhookEndpointRow{a, b}, all)
	alpha, err := h.s.WebhookEndpointList(h.ctx, "alpha")
	require.NoError(t, err)
	require.Equal(t, []*store.WebhookEndpointRow{a}, alpha)

	h.createSession("s1")
	h.createSession("s2")
	for _, s := range []string{"s1", "s2"} {
		_, err := h.s.WebhookSessionInit(h.ctx, s, "whsec_s")
		require.NoError(t, err)
	}
	da := delivery("msg_a", "whe_a", "s1", 1, t0)
	da.Project = "alpha"
	db := delivery("msg_b", "whe_b", "s2", 1, t0)
	db.Project = "beta"
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s1", 0, 1, []*store.WebhookDeliveryRow{da}))
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s2", 0, 1, []*store.WebhookDeliveryRow{db}))
	ids := func(proj string) []string {
		t.Helper()
		rows, err := h.s.WebhookDeliveryList(h.ctx, &store.WebhookDeliveryListParams{Project: proj, Limit: 10})
		require.NoError(t, err)
		out := []string{}
		for _, r := range rows {
			require.Equal(t, map[string]string{"msg_a": "alpha", "msg_b": "beta"}[r.ID], r.Project)
			out = append(out, r.ID)
		}
		return out
	}
	require.Equal(t, []string{"msg_b", "msg_a"}, ids(""))
	require.Equal(t, []string{"msg_a"}, ids("alpha"))
	require.Equal(t, []string{"msg_b"}, ids("beta"))
	require.Empty(t, ids("gamma"))
	// A claim returns the project too (the dispatcher reads it from there).
	due, err := h.s.WebhookClaimDue(h.ctx, &store.WebhookClaimParams{Owner: "n1", Now: t0, Until: at(time.Minute), Limit: 10})
	require.NoError(t, err)
	require.Len(t, due, 2)
	for _, d := range due {
		require.Equal(t, map[string]string{"msg_a": "alpha", "msg_b": "beta"}[d.ID], d.Project)
	}
}
