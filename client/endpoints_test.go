package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var testTime = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func TestEndpoints(t *testing.T) {
	t.Parallel()
	content := []byte("# Brief\nACME sells anvils.\n")
	sum := sha256.Sum256(content)
	digest := hex.EncodeToString(sum[:])
	next := "cur_2"
	session := &lt.Session{ID: "ses_1", Status: lt.SessionQueued, Agent: lt.AgentRef{Name: "researcher", Version: 3},
		Goal: "brief", Constraints: []string{"c"}, AcceptanceCriteria: []string{"a"}, CurrentTurnID: "turn_1",
		LastEventSeq: 1, CreatedAt: testTime, UpdatedAt: testTime, Metadata: json.RawMessage(`{"ticket":"OPS-12"}`)}
	turn := &lt.Turn{ID: "turn_2", SessionID: "ses_1", Index: 1, Status: lt.TurnQueued, Input: "more", CreatedAt: testTime}
	action := &lt.Action{ID: "act_1", SessionID: "ses_1", Type: lt.ActionApproval, Status: lt.ActionResolved,
		Tool: "send_email", Arguments: json.RawMessage(`{"to":"a@b.c"}`), CreatedAt: testTime}
	childAction := &lt.Action{ID: "act_2", SessionID: "ses_2", Type: lt.ActionInput, Status: lt.ActionPending,
		Question: "which?", CreatedAt: testTime}
	parentID, childID := "ses_1", "ses_2"
	sessionTree := &lt.Session{ID: "ses_1", Status: lt.SessionRunning, Agent: session.Agent, CreatedAt: testTime, UpdatedAt: testTime,
		Subagents: []lt.Session{{ID: childID, ParentID: &parentID, Status: lt.SessionRequiresAction, Agent: session.Agent,
			RequiredActions: []lt.Action{*childAction}, CreatedAt: testTime, UpdatedAt: testTime,
			Subagents: []lt.Session{{ID: "ses_3", ParentID: &childID, Status: lt.SessionIdle, CreatedAt: testTime, UpdatedAt: testTime}}}}}
	agent := &lt.Agent{Name: "researcher", Version: 3, Spec: lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted"}}, CreatedAt: testTime}
	artifact := &lt.Artifact{ID: "art_1", SessionID: "ses_1", Name: "brief.md", Version: 1, SHA256: digest,
		Size: int64(len(content)), ContentType: "text/markdown", Final: true, CreatedAt: testTime}

	endpoint := &lt.WebhookEndpoint{ID: "whe_1", URL: "https://app.example.com/hooks", Events: []string{lt.WebhookSessionIdle},
		Secret: "whsec_c2VjcmV0", CreatedAt: testTime}
	delivery := lt.WebhookDelivery{ID: "whd_1", EndpointID: "whe_1", SessionID: "ses_1", URL: endpoint.URL, Type: lt.WebhookSessionIdle,
		EventSeq: 12, Status: "delivered", CreatedAt: testTime,
		Attempts: []lt.WebhookDeliveryAttempt{{Attempt: 1, At: testTime, StatusCode: 204, DurationMS: 15}}}

	type result struct {
		data        []byte
		contentType string
	}
	tests := []struct {
		name     string
		call     func(context.Context, *Client) (any, error)
		method   string
		path     string
		query    string
		body     string // JSON the server must receive; "" for none
		status   int
		resp     any                         // JSON response; also what the call must return
		respond  func(w http.ResponseWriter) // instead of resp
		wantRaw  any                         // compared instead of resp
		noDecode bool                        // the call returns nothing to compare
	}{
		{
			name: "CreateSession",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSession(ctx, &lt.CreateSessionRequest{Agent: "researcher", Input: "brief", Budget: &lt.Budget{MaxCostUSD: 5}})
			},
			method: "POST", path: "/v1/sessions",
			body:   `{"agent":"researcher","input":"brief","budget":{"max_cost_usd":5}}`,
			status: http.StatusCreated, resp: session,
		},
		{
			name:   "GetSession",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetSession(ctx, "ses_1") },
			method: "GET", path: "/v1/sessions/ses_1", resp: session,
		},
		{
			name:   "GetSession escapes the id",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetSession(ctx, "a/b?c d") },
			method: "GET", path: "/v1/sessions/a%2Fb%3Fc%20d", resp: session,
		},
		{
			name:   "GetSessionTree",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetSessionTree(ctx, "ses_1") },
			method: "GET", path: "/v1/sessions/ses_1", query: "include=subagents", resp: sessionTree,
		},
		{
			name: "ListSessions with every filter",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListSessions(ctx, ListSessionsParams{Project: "support", Status: lt.SessionIdle, Agent: "researcher", ParentID: "ses_p", Cursor: "cur_1", Limit: 10})
			},
			method: "GET", path: "/v1/sessions", query: "agent=researcher&cursor=cur_1&limit=10&parent_id=ses_p&project=support&status=idle",
			resp: &lt.List[lt.Session]{Data: []lt.Session{*session}, NextCursor: &next},
		},
		{
			name:   "ListSessions without filters",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListSessions(ctx, ListSessionsParams{}) },
			method: "GET", path: "/v1/sessions", resp: &lt.List[lt.Session]{Data: []lt.Session{}},
		},
		{
			name: "CreateTurn",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateTurn(ctx, "ses_1", &lt.CreateTurnRequest{Input: "more"})
			},
			method: "POST", path: "/v1/sessions/ses_1/turns", body: `{"input":"more"}`,
			status: http.StatusCreated, resp: turn,
		},
		{
			name:   "ListTurns",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListTurns(ctx, "ses_1") },
			method: "GET", path: "/v1/sessions/ses_1/turns", resp: &lt.List[lt.Turn]{Data: []lt.Turn{*turn}},
		},
		{
			name:   "GetTurn",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetTurn(ctx, "ses_1", "turn_2") },
			method: "GET", path: "/v1/sessions/ses_1/turns/turn_2", resp: turn,
		},
		{
			name: "Cancel",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Cancel(ctx, "ses_1", &lt.CancelRequest{Reason: "wrong goal"})
			},
			method: "POST", path: "/v1/sessions/ses_1/cancel", body: `{"reason":"wrong goal"}`, resp: session,
		},
		{
			name:   "Cancel without a reason",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.Cancel(ctx, "ses_1", nil) },
			method: "POST", path: "/v1/sessions/ses_1/cancel", body: `{}`, resp: session,
		},
		{
			name:   "ListEvents",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListEvents(ctx, "ses_1", 5, 10) },
			method: "GET", path: "/v1/sessions/ses_1/events", query: "after=5&limit=10",
			resp: &lt.List[lt.Event]{Data: []lt.Event{{Seq: 6, Type: lt.EventTurnCreated, Time: testTime, SessionID: "ses_1", Data: json.RawMessage(`{}`)}}},
		},
		{
			name: "ListActions pending",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListActions(ctx, "ses_1", lt.ActionPending)
			},
			method: "GET", path: "/v1/sessions/ses_1/actions", query: "status=pending",
			resp: &lt.List[lt.Action]{Data: []lt.Action{*action}},
		},
		{
			name:   "ListActions all",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListActions(ctx, "ses_1", "") },
			method: "GET", path: "/v1/sessions/ses_1/actions", resp: &lt.List[lt.Action]{Data: []lt.Action{*action}},
		},
		{
			name: "ListTreeActions pending",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListTreeActions(ctx, "ses_1", lt.ActionPending)
			},
			method: "GET", path: "/v1/sessions/ses_1/actions", query: "include=subagents&status=pending",
			resp: &lt.List[lt.Action]{Data: []lt.Action{*action, *childAction}},
		},
		{
			name:   "ListTreeActions all",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListTreeActions(ctx, "ses_1", "") },
			method: "GET", path: "/v1/sessions/ses_1/actions", query: "include=subagents",
			resp: &lt.List[lt.Action]{Data: []lt.Action{*childAction}},
		},
		{
			name: "DecideAction",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.DecideAction(ctx, "ses_1", "act_1", &lt.Decision{Decision: "approve", Arguments: json.RawMessage(`{"to":"x@y.z"}`)})
			},
			method: "POST", path: "/v1/sessions/ses_1/actions/act_1",
			body: `{"decision":"approve","arguments":{"to":"x@y.z"}}`, resp: action,
		},
		{
			name: "ListAllActions with every filter",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListAllActions(ctx, lt.ListActionsParams{Status: "pending", Type: "approval", SessionID: "ses_1", Project: "support", Cursor: "cur_1", Limit: 20})
			},
			method: "GET", path: "/v1/actions", query: "cursor=cur_1&limit=20&project=support&session_id=ses_1&status=pending&type=approval",
			resp: &lt.List[lt.Action]{Data: []lt.Action{*action}, NextCursor: &next},
		},
		{
			name: "ListAllActions without filters",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListAllActions(ctx, lt.ListActionsParams{})
			},
			method: "GET", path: "/v1/actions", resp: &lt.List[lt.Action]{Data: []lt.Action{}},
		},
		{
			name:   "GetAction",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetAction(ctx, "act_1") },
			method: "GET", path: "/v1/actions/act_1", resp: action,
		},
		{
			name: "UpdateBudget sends only the limits given",
			call: func(ctx context.Context, c *Client) (any, error) {
				maxCost, softTokens := 10.0, int64(0)
				return c.UpdateBudget(ctx, "ses_1", &lt.BudgetPatch{MaxCostUSD: &maxCost, SoftTokens: &softTokens})
			},
			method: "PATCH", path: "/v1/sessions/ses_1/budget", body: `{"max_cost_usd":10,"soft_tokens":0}`, resp: session,
		},
		{
			name:   "ListEffects",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListEffects(ctx, "ses_1") },
			method: "GET", path: "/v1/sessions/ses_1/effects",
			resp: &lt.List[lt.Effect]{Data: []lt.Effect{{ID: "eff_1", SessionID: "ses_1", Tool: "send_email",
				Class: lt.EffectIrreversible, Status: lt.EffectInDoubt, StartedAt: testTime}}},
		},
		{
			name:   "ListCheckpoints",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListCheckpoints(ctx, "ses_1") },
			method: "GET", path: "/v1/sessions/ses_1/checkpoints",
			resp: &lt.List[lt.Checkpoint]{Data: []lt.Checkpoint{{ID: "ckpt_1", SessionID: "ses_1", Name: "drafted",
				EventSeq: 9, Artifacts: []string{"art_1"}, CreatedAt: testTime}}},
		},
		{
			name:   "ListArtifacts",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListArtifacts(ctx, "ses_1") },
			method: "GET", path: "/v1/sessions/ses_1/artifacts", resp: &lt.List[lt.Artifact]{Data: []lt.Artifact{*artifact}},
		},
		{
			name:   "GetArtifact",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetArtifact(ctx, "art_1") },
			method: "GET", path: "/v1/artifacts/art_1", resp: artifact,
		},
		{
			name: "ArtifactContent",
			call: func(ctx context.Context, c *Client) (any, error) {
				data, ct, err := c.ArtifactContent(ctx, "art_1")
				return result{data, ct}, err
			},
			method: "GET", path: "/v1/artifacts/art_1/content",
			respond: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
				w.Header().Set("ETag", `"`+digest+`"`)
				_, _ = w.Write(content)
			},
			wantRaw: result{content, "text/markdown; charset=utf-8"},
		},
		{
			name:   "GetBlob",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetBlob(ctx, digest) },
			method: "GET", path: "/v1/blobs/" + digest,
			respond: func(w http.ResponseWriter) { _, _ = w.Write(content) },
			wantRaw: content,
		},
		{
			name: "PutAgent",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.PutAgent(ctx, &lt.PutAgentRequest{Name: "researcher", Spec: lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted"}}})
			},
			method: "POST", path: "/v1/agents", body: `{"name":"researcher","spec":{"model":{"provider":"scripted"}}}`,
			status: http.StatusCreated, resp: agent,
		},
		{
			name:   "ListAgents",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListAgents(ctx, "") },
			method: "GET", path: "/v1/agents", resp: &lt.List[lt.Agent]{Data: []lt.Agent{*agent}},
		},
		{
			name:   "GetAgent latest",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetAgent(ctx, "", "researcher", 0) },
			method: "GET", path: "/v1/agents/researcher", resp: agent,
		},
		{
			name:   "GetAgent version",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetAgent(ctx, "", "researcher", 3) },
			method: "GET", path: "/v1/agents/researcher", query: "version=3", resp: agent,
		},
		{
			name:   "ListAgents of a project",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListAgents(ctx, "support") },
			method: "GET", path: "/v1/agents", query: "project=support", resp: &lt.List[lt.Agent]{Data: []lt.Agent{*agent}},
		},
		{
			name:   "GetAgent of a project",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetAgent(ctx, "support", "researcher", 3) },
			method: "GET", path: "/v1/agents/researcher", query: "project=support&version=3", resp: agent,
		},
		{
			name: "CreateWebhookEndpoint",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateWebhookEndpoint(ctx, &lt.CreateWebhookEndpointRequest{URL: "https://app.example.com/hooks", Events: []string{lt.WebhookSessionIdle}})
			},
			method: "POST", path: "/v1/webhooks/endpoints",
			body:   `{"url":"https://app.example.com/hooks","events":["session.idle"]}`,
			status: http.StatusCreated, resp: endpoint,
		},
		{
			name:   "ListWebhookEndpoints",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListWebhookEndpoints(ctx, "support") },
			method: "GET", path: "/v1/webhooks/endpoints", query: "project=support",
			resp: &lt.List[lt.WebhookEndpoint]{Data: []lt.WebhookEndpoint{{ID: "whe_1", URL: endpoint.URL, Events: endpoint.Events, CreatedAt: testTime}}},
		},
		{
			name:   "DeleteWebhookEndpoint",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteWebhookEndpoint(ctx, "whe_1") },
			method: "DELETE", path: "/v1/webhooks/endpoints/whe_1",
			respond: func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }, noDecode: true,
		},
		{
			name: "ListWebhookDeliveries",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListWebhookDeliveries(ctx, ListWebhookDeliveriesParams{Cursor: "cur_1", Limit: 5, Project: "support"})
			},
			method: "GET", path: "/v1/webhooks/deliveries", query: "cursor=cur_1&limit=5&project=support",
			resp: &lt.List[lt.WebhookDelivery]{Data: []lt.WebhookDelivery{delivery}, NextCursor: &next},
		},
		{
			name:   "Health",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.Health(ctx) },
			method: "GET", path: "/healthz", respond: func(w http.ResponseWriter) {}, noDecode: true,
		},
		{
			name:   "Ready",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.Ready(ctx) },
			method: "GET", path: "/readyz", respond: func(w http.ResponseWriter) {}, noDecode: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
				if tt.respond != nil {
					tt.respond(w)
					return
				}
				writeJSON(w, cmpOr(tt.status, http.StatusOK), tt.resp)
			})
			srv := startServer(t, rc)
			c, _ := newTestClient(t, srv.URL+"/", nil)

			got, err := tt.call(t.Context(), c)
			require.NoError(t, err)
			reqs := rc.all()
			require.Len(t, reqs, 1)
			r := reqs[0]
			require.Equal(t, tt.method, r.method)
			require.Equal(t, tt.path, r.path)
			require.Equal(t, tt.query, r.query)
			if tt.body == "" {
				require.Empty(t, r.body)
			} else {
				require.JSONEq(t, tt.body, r.body)
				if tt.method == http.MethodPost {
					require.NotEmpty(t, r.header.Get("Idempotency-Key"))
				}
			}
			switch {
			case tt.noDecode:
			case tt.wantRaw != nil:
				require.Equal(t, tt.wantRaw, got)
			default:
				want, err := json.Marshal(tt.resp)
				require.NoError(t, err)
				have, err := json.Marshal(got)
				require.NoError(t, err)
				require.JSONEq(t, string(want), string(have))
				require.Equal(t, fmt.Sprintf("%T", tt.resp), fmt.Sprintf("%T", got))
			}
		})
	}
}

func cmpOr(v, def int) int {
	if v != 0 {
		return v
	}
	return def
}

func TestContentDigestMismatch(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("what was stored"))
	digest := hex.EncodeToString(sum[:])
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"`+digest+`"`)
		_, _ = w.Write([]byte("what arrived"))
	}))
	c, _ := newTestClient(t, srv.URL, nil)

	_, _, err := c.ArtifactContent(t.Context(), "art_1")
	require.ErrorContains(t, err, "artifact content art_1: content sha256")
	require.ErrorContains(t, err, "does not match "+digest)

	_, err = c.GetBlob(t.Context(), digest)
	require.ErrorContains(t, err, "get blob "+digest+": content sha256")
}

func TestArtifactContentWithoutDigestETag(t *testing.T) {
	t.Parallel()
	srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `W/"v1"`)
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte{0, 1, 2})
	}))
	c, _ := newTestClient(t, srv.URL, nil)
	data, ct, err := c.ArtifactContent(t.Context(), "art_1")
	require.NoError(t, err)
	require.Equal(t, []byte{0, 1, 2}, data)
	require.Equal(t, "application/octet-stream", ct)
}

func TestArgumentsAreValidatedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{})
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)
	ctx := t.Context()
	tests := []struct {
		name    string
		call    func() error
		wantErr string
	}{
		{"CreateSession nil", func() error { _, err := c.CreateSession(ctx, nil); return err }, "create session: req is nil"},
		{"GetSession empty", func() error { _, err := c.GetSession(ctx, ""); return err }, "get session: id is empty"},
		{"ListSessions negative limit", func() error { _, err := c.ListSessions(ctx, ListSessionsParams{Limit: -1}); return err }, "ListSessionsParams.Limit -1 is outside 0..500"},
		{"ListSessions huge limit", func() error { _, err := c.ListSessions(ctx, ListSessionsParams{Limit: 501}); return err }, "ListSessionsParams.Limit 501"},
		{"CreateTurn no session", func() error { _, err := c.CreateTurn(ctx, "", &lt.CreateTurnRequest{}); return err }, "sessionID is empty"},
		{"CreateTurn nil", func() error { _, err := c.CreateTurn(ctx, "ses_1", nil); return err }, "create turn: req is nil"},
		{"ListTurns", func() error { _, err := c.ListTurns(ctx, ""); return err }, "sessionID is empty"},
		{"GetTurn no turn", func() error { _, err := c.GetTurn(ctx, "ses_1", ""); return err }, "turnID is empty"},
		{"Cancel", func() error { _, err := c.Cancel(ctx, "", nil); return err }, "sessionID is empty"},
		{"ListEvents after", func() error { _, err := c.ListEvents(ctx, "ses_1", -1, 0); return err }, "after -1 is negative"},
		{"ListEvents limit", func() error { _, err := c.ListEvents(ctx, "ses_1", 0, 1000); return err }, "limit 1000 is outside"},
		{"ListActions", func() error { _, err := c.ListActions(ctx, "", ""); return err }, "sessionID is empty"},
		{"GetSessionTree", func() error { _, err := c.GetSessionTree(ctx, ""); return err }, "get session tree: id is empty"},
		{"ListTreeActions", func() error { _, err := c.ListTreeActions(ctx, "", ""); return err }, "list tree actions: sessionID is empty"},
		{"DecideAction no action", func() error { _, err := c.DecideAction(ctx, "ses_1", "", &lt.Decision{}); return err }, "actionID is empty"},
		{"DecideAction nil", func() error { _, err := c.DecideAction(ctx, "ses_1", "act_1", nil); return err }, "decision is nil"},
		{"ListAllActions limit", func() error { _, err := c.ListAllActions(ctx, lt.ListActionsParams{Limit: 501}); return err }, "ListActionsParams.Limit 501 is outside 0..500"},
		{"GetAction", func() error { _, err := c.GetAction(ctx, ""); return err }, "get action: actionID is empty"},
		{"UpdateBudget no session", func() error { _, err := c.UpdateBudget(ctx, "", &lt.BudgetPatch{}); return err }, "update budget: sessionID is empty"},
		{"UpdateBudget nil", func() error { _, err := c.UpdateBudget(ctx, "ses_1", nil); return err }, "patch is nil"},
		{"ListEffects", func() error { _, err := c.ListEffects(ctx, ""); return err }, "sessionID is empty"},
		{"ListCheckpoints", func() error { _, err := c.ListCheckpoints(ctx, ""); return err }, "sessionID is empty"},
		{"ListArtifacts", func() error { _, err := c.ListArtifacts(ctx, ""); return err }, "sessionID is empty"},
		{"GetArtifact", func() error { _, err := c.GetArtifact(ctx, ""); return err }, "id is empty"},
		{"ArtifactContent", func() error { _, _, err := c.ArtifactContent(ctx, ""); return err }, "id is empty"},
		{"GetBlob", func() error { _, err := c.GetBlob(ctx, "../etc"); return err }, `sha256Hex "../etc" is not 64 lowercase hex digits`},
		{"PutAgent nil", func() error { _, err := c.PutAgent(ctx, nil); return err }, "put agent: req is nil"},
		{"GetAgent no name", func() error { _, err := c.GetAgent(ctx, "", "", 0); return err }, "name is empty"},
		{"GetAgent negative version", func() error { _, err := c.GetAgent(ctx, "", "a", -2); return err }, "version -2 is negative"},
	}
	for _, tt := range tests {
		require.ErrorContains(t, tt.call(), tt.wantErr, tt.name)
	}
	require.Empty(t, rc.all())
}

// TestAllActionsFollowsCursors: the iterator reads page after page until
// next_cursor is null, passing each cursor back with the same filters.
func TestAllActionsFollowsCursors(t *testing.T) {
	t.Parallel()
	pages := map[string]lt.List[lt.Action]{
		"":   {Data: []lt.Action{{ID: "act_1"}, {ID: "act_2"}}, NextCursor: new("c1")},
		"c1": {Data: []lt.Action{{ID: "act_3"}, {ID: "act_4"}}, NextCursor: new("c2")},
		"c2": {Data: []lt.Action{{ID: "act_5"}}},
	}
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, pages[r.URL.Query().Get("cursor")])
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)

	var ids []string
	for a, err := range c.AllActions(t.Context(), lt.ListActionsParams{Status: "pending", Limit: 2}) {
		require.NoError(t, err)
		ids = append(ids, a.ID)
	}
	require.Equal(t, []string{"act_1", "act_2", "act_3", "act_4", "act_5"}, ids)
	reqs := rc.all()
	require.Len(t, reqs, 3)
	require.Equal(t, "limit=2&status=pending", reqs[0].query)
	require.Equal(t, "cursor=c1&limit=2&status=pending", reqs[1].query)
	require.Equal(t, "cursor=c2&limit=2&status=pending", reqs[2].query)

	// Breaking out stops reading pages.
	ids = nil
	for a, err := range c.AllActions(t.Context(), lt.ListActionsParams{Status: "pending", Limit: 2}) {
		require.NoError(t, err)
		ids = append(ids, a.ID)
		break
	}
	require.Equal(t, []string{"act_1"}, ids)
	require.Len(t, rc.all(), 4)
}

func TestAllActionsEndsWithTheError(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			writeJSON(w, http.StatusOK, lt.List[lt.Action]{Data: []lt.Action{{ID: "act_1"}}, NextCursor: new("c1")})
			return
		}
		writeAPIError(w, http.StatusBadRequest, lt.CodeInvalidRequest, "unknown cursor")
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)
	var ids []string
	var errs []error
	for a, err := range c.AllActions(t.Context(), lt.ListActionsParams{}) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ids = append(ids, a.ID)
	}
	require.Equal(t, []string{"act_1"}, ids)
	require.Len(t, errs, 1)
	var ae *APIError
	require.ErrorAs(t, errs[0], &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Contains(t, errs[0].Error(), "list actions")
}

func TestAllWebhookDeliveriesFollowsCursors(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("cursor") {
		case "":
			writeJSON(w, http.StatusOK, lt.List[lt.WebhookDelivery]{Data: []lt.WebhookDelivery{{ID: "whd_3"}, {ID: "whd_2"}}, NextCursor: new("c1")})
		case "c1":
			writeJSON(w, http.StatusOK, lt.List[lt.WebhookDelivery]{Data: []lt.WebhookDelivery{{ID: "whd_1"}}})
		default:
			writeAPIError(w, http.StatusBadRequest, lt.CodeInvalidRequest, "unknown cursor")
		}
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)
	var ids []string
	for d, err := range c.AllWebhookDeliveries(t.Context(), ListWebhookDeliveriesParams{Limit: 2}) {
		require.NoError(t, err)
		ids = append(ids, d.ID)
	}
	require.Equal(t, []string{"whd_3", "whd_2", "whd_1"}, ids)
	reqs := rc.all()
	require.Len(t, reqs, 2)
	require.Equal(t, "limit=2", reqs[0].query)
	require.Equal(t, "cursor=c1&limit=2", reqs[1].query)
}

func TestWebhookEndpointErrors(t *testing.T) {
	t.Parallel()
	rc := newRecorder(func(n int, w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			writeAPIError(w, http.StatusNotFound, lt.CodeNotFound, "webhook endpoint whe_9 not found")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":"invalid_request","message":"must be an absolute http(s) URL","field":"url"}}`))
	})
	srv := startServer(t, rc)
	c, _ := newTestClient(t, srv.URL, nil)

	err := c.DeleteWebhookEndpoint(t.Context(), "whe_9")
	require.True(t, IsNotFound(err))
	require.ErrorContains(t, err, "delete webhook endpoint whe_9")

	_, err = c.CreateWebhookEndpoint(t.Context(), &lt.CreateWebhookEndpointRequest{URL: "ftp://x"})
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "url", ae.Field)
	require.True(t, HasCode(err, lt.CodeInvalidRequest))
	require.False(t, HasCode(err, lt.CodeNotFound))

	require.EqualError(t, c.DeleteWebhookEndpoint(t.Context(), ""), "delete webhook endpoint: id is empty")
	_, err = c.CreateWebhookEndpoint(t.Context(), nil)
	require.EqualError(t, err, "create webhook endpoint: req is nil")
	_, err = c.ListWebhookDeliveries(t.Context(), ListWebhookDeliveriesParams{Limit: -1})
	require.EqualError(t, err, "list webhook deliveries: ListWebhookDeliveriesParams.Limit -1 is outside 0..500")
	require.Len(t, rc.all(), 2, "invalid arguments send nothing")
}
