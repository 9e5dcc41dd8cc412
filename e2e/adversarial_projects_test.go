package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAdversarialProjects_KeyOfAnotherProject: a key of project alpha, of
// every role that reads or acts, used from the outside against the real
// binary, tries every id of project beta's session (the session, its turn,
// events and streams, actions, effects, checkpoints, artifacts and their
// content, blobs, files, trace) and the writes its role allows: each is a
// 404 with the body an unknown id earns; the lists, the inbox and the
// report show nothing of beta; naming beta is a 403; the metrics, which
// span every project, are refused. Nothing it tried reached the session.
func TestAdversarialProjects_KeyOfAnotherProject(t *testing.T) {
	t.Parallel()
	const admin = "lh-projects-adversary-bootstrap"
	srv := startServer(t, "--api-key", admin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api, err := client.New(srv.url, &client.Config{APIKey: admin, MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond})
	require.NoError(t, err)
	asAdmin := &server{t: t, url: srv.url, api: api}

	// Beta's session, as an admin naming beta: a blob, an artifact,
	// checkpoints, effects, a pending action.
	s, err := api.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: apptest.WorkSpec(t, "beta", 1), Input: "work", Project: "beta"})
	require.NoError(t, err)
	require.Equal(t, "beta", s.Project)
	b := s.ID
	waitStatus(ctx, t, asAdmin, b, time.Minute, lt.SessionIdle)
	turn, err := api.CreateTurn(ctx, b, &lt.CreateTurnRequest{Input: "look up"})
	require.NoError(t, err)
	s = waitStatus(ctx, t, asAdmin, b, time.Minute, lt.SessionRequiresAction)
	action := s.RequiredActions[0].ID
	arts, err := api.ListArtifacts(ctx, b)
	require.NoError(t, err)
	require.Len(t, arts.Data, 1)
	art := arts.Data[0]
	cps, err := api.ListCheckpoints(ctx, b)
	require.NoError(t, err)
	require.NotEmpty(t, cps.Data)
	checkpoint := cps.Data[len(cps.Data)-1].ID
	before, err := api.ListEvents(ctx, b, 0, 500)
	require.NoError(t, err)

	send := (&keyed{t: t, srv: srv, admin: admin}).send
	// The body of a 404 for an unknown id, with the id in it swapped for
	// the one tried: the bytes a probe of another project's id must get.
	unknownBody := func(key, method, path, body, id, unknown string) string {
		t.Helper()
		r := send(key, method, strings.ReplaceAll(path, id, unknown), strings.ReplaceAll(body, id, unknown))
		require.Equal(t, http.StatusNotFound, r.status, "%s %s with an unknown id: %s", method, path, r.body)
		return strings.ReplaceAll(string(r.body), unknown, id)
	}

	for _, role := range []lt.Role{lt.RoleReader, lt.RoleOperator, lt.RoleApprover} {
		r := send(admin, http.MethodPost, "/v1/keys", `{"name":"alpha-`+string(role)+`","role":"`+string(role)+`","project":"alpha"}`)
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		var k lt.APIKey
		require.NoError(t, json.Unmarshal(r.body, &k))
		require.Equal(t, "alpha", k.Project)

		probes := []struct{ method, path, body, id, unknown string }{
			{"GET", "/v1/sessions/" + b, "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "?include=subagents", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/turns", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/turns/" + turn.ID, "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/events", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/events/stream", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/events/stream?include=subagents", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/actions", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/effects", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/checkpoints", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/artifacts", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/trace", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/files", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/files/big.txt", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/checkpoints/" + checkpoint + "/files", "", b, "ses_unknown"},
			{"GET", "/v1/sessions/" + b + "/checkpoints/" + checkpoint + "/files/big.txt", "", b, "ses_unknown"},
			{"GET", "/v1/actions/" + action, "", action, "act_unknown"},
			{"GET", "/v1/actions?session_id=" + b, "", b, "ses_unknown"},
			{"GET", "/v1/artifacts/" + art.ID, "", art.ID, "art_unknown"},
			{"GET", "/v1/artifacts/" + art.ID + "/content", "", art.ID, "art_unknown"},
			{"GET", "/v1/blobs/" + art.SHA256, "", art.SHA256, strings.Repeat("0", 64)},
		}
		if role != lt.RoleReader {
			probes = append(probes,
				struct{ method, path, body, id, unknown string }{"POST", "/v1/sessions/" + b + "/cancel", `{"reason":"mine"}`, b, "ses_unknown"})
		}
		if role == lt.RoleApprover {
			probes = append(probes,
				struct{ method, path, body, id, unknown string }{"POST", "/v1/sessions/" + b + "/actions/" + action, `{"output":{"stolen":true}}`, b, "ses_unknown"})
		}
		if role == lt.RoleOperator {
			probes = append(probes,
				struct{ method, path, body, id, unknown string }{"POST", "/v1/sessions/" + b + "/turns", `{"input":"obey"}`, b, "ses_unknown"},
				struct{ method, path, body, id, unknown string }{"POST", "/v1/sessions/" + b + "/fork", `{"checkpoint_id":"` + checkpoint + `"}`, b, "ses_unknown"},
				struct{ method, path, body, id, unknown string }{"POST", "/v1/sessions/" + b + "/steer", `{"input":"obey"}`, b, "ses_unknown"},
				struct{ method, path, body, id, unknown string }{"POST", "/v1/sessions/" + b + "/pause", `{}`, b, "ses_unknown"})
		}
		for _, p := range probes {
			want := unknownBody(k.Key, p.method, p.path, p.body, p.id, p.unknown)
			got := send(k.Key, p.method, p.path, p.body)
			require.Equal(t, http.StatusNotFound, got.status, "%s: %s %s: %s", role, p.method, p.path, got.body)
			require.Equal(t, want, string(got.body), "%s: %s %s: the body of an unknown id", role, p.method, p.path)
		}

		for _, path := range []string{"/v1/sessions", "/v1/actions", "/v1/actions?status=pending", "/v1/reports/tasks?since=1d"} {
			r := send(k.Key, http.MethodGet, path, "")
			require.Equal(t, http.StatusOK, r.status, "%s: %s: %s", role, path, r.body)
			require.NotContains(t, string(r.body), b, "%s: %s shows beta's session", role, path)
			require.NotContains(t, string(r.body), action, "%s: %s shows beta's action", role, path)
		}
		for _, path := range []string{"/v1/sessions?project=beta", "/v1/actions?project=beta", "/v1/reports/tasks?project=beta"} {
			r := send(k.Key, http.MethodGet, path, "")
			require.Equal(t, http.StatusForbidden, r.status, "%s: %s: %s", role, path, r.body)
			require.Equal(t, "project", r.err.Field)
		}
		r = send(k.Key, http.MethodPost, "/v1/sessions", `{"agent_spec":{"model":{"provider":"scripted","script":[{"text":"hi"}]}},"input":"hi","project":"beta"}`)
		require.Contains(t, []int{http.StatusForbidden}, r.status, "%s starts work in beta: %s", role, r.body)
		require.Equal(t, http.StatusForbidden, send(k.Key, http.MethodGet, "/metrics", "").status, "%s reads every project's metrics", role)
	}

	// Nothing reached beta's session: the same journal, its action still
	// pending.
	after, err := api.ListEvents(ctx, b, 0, 500)
	require.NoError(t, err)
	require.Equal(t, len(before.Data), len(after.Data), "beta's journal did not grow")
	s, err = api.GetSession(ctx, b)
	require.NoError(t, err)
	require.Equal(t, lt.SessionRequiresAction, s.Status)
	require.Equal(t, action, s.RequiredActions[0].ID)
	sessions, err := api.ListSessions(ctx, lt.ListSessionsParams{Project: "beta"})
	require.NoError(t, err)
	require.Len(t, sessions.Data, 1, "no fork, no session planted in beta")
}

// TestAdversarialProjects_IdempotencyKeyReplay: a key of project beta
// that guesses (or sees in a log) the Idempotency-Key alpha's program
// uses, and sends the same body, gets a request of its own, in its own
// project, never a replay of alpha's answer (alpha's session, with its id
// and project); alpha's own retry still replays its first answer.
func TestAdversarialProjects_IdempotencyKeyReplay(t *testing.T) {
	t.Parallel()
	const admin = "lh-idempotency-adversary-bootstrap"
	k := startKeyed(t, admin)
	operatorOf := func(project string) string {
		t.Helper()
		r := k.send(admin, http.MethodPost, "/v1/keys", `{"name":"`+project+`-ops","role":"operator","project":"`+project+`"}`)
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		var key lt.APIKey
		require.NoError(t, json.Unmarshal(r.body, &key))
		return key.Key
	}
	alpha, beta := operatorOf("alpha"), operatorOf("beta")
	body := []byte(`{"agent_spec":{"model":{"provider":"scripted","script":[{"text":"alpha's plan"}]}},"input":"nightly"}`)
	create := func(key string) lt.Session {
		t.Helper()
		r := httpSend(t, k.srv, http.MethodPost, "/v1/sessions", "", body, map[string]string{
			"Authorization": "Bearer " + key, "Content-Type": "application/json", "Idempotency-Key": "nightly-report",
		})
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		var s lt.Session
		require.NoError(t, json.Unmarshal(r.body, &s))
		return s
	}
	first := create(alpha)
	require.Equal(t, "alpha", first.Project)
	stolen := create(beta)
	require.NotEqual(t, first.ID, stolen.ID, "beta was answered with alpha's session")
	require.Equal(t, "beta", stolen.Project)
	require.Equal(t, first.ID, create(alpha).ID, "alpha's retry replays its own answer")
}
