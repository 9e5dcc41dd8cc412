package webhook

import (
	"encoding/json"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
	"github.com/stretchr/testify/require"
)

// TestEndpointsHearOnlyTheirProject: two endpoints in two projects, a
// session in each: each endpoint is told of its own project's session
// only, and each delivery records its session's project.
func TestEndpointsHearOnlyTheirProject(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	for _, ep := range []struct{ id, project string }{{"whe_default", lt.DefaultProject}, {"whe_support", "support"}} {
		require.NoError(t, e.st.WebhookEndpointCreate(t.Context(), &store.WebhookEndpointRow{
			ID: ep.id, Project: ep.project, URL: r.srv.URL + "/" + ep.project, Events: []string{},
			Secrets: []string{NewSecret()}, CreatedAt: e.clock.Now(),
		}))
	}
	e.createSessionIn(lt.DefaultProject, "ses_default", "")
	e.createSessionIn("support", "ses_support", "")
	e.startOn(e.st, allowFor(t, r))
	e.status("ses_default", lt.SessionIdle)
	e.status("ses_support", lt.SessionIdle)

	eventually(t, func() bool { return e.allDelivered(2) }, "one notification per session, to its project's endpoint")
	type delivered struct{ endpoint, url, project, session string }
	var got []delivered
	for _, row := range e.deliveries() {
		got = append(got, delivered{row.EndpointID, row.URL, row.Project, row.SessionID})
	}
	require.ElementsMatch(t, []delivered{
		{"whe_default", r.srv.URL + "/default", lt.DefaultProject, "ses_default"},
		{"whe_support", r.srv.URL + "/support", "support", "ses_support"},
	}, got)
	sessions := []string{}
	for _, req := range r.requests() {
		var n lt.WebhookNotification
		require.NoError(t, json.Unmarshal(req.Body, &n))
		sessions = append(sessions, n.SessionID)
	}
	require.ElementsMatch(t, []string{"ses_default", "ses_support"}, sessions, "each notification sent once")
}
