package webhook

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
	"github.com/stretchr/testify/require"
)

// startEngine runs the real engine, with the scripted model provider, on
// e's store until the test ends.
func startEngine(t *testing.T, e *env) *engine.Engine {
	t.Helper()
	eng, err := engine.New(e.st, &engine.Config{
		WorkspaceRoot: filepath.Join(t.TempDir(), "workspaces"),
		Providers:     map[string]model.Provider{"scripted": scripted.New(nil)},
		Logger:        slog.New(slog.DiscardHandler),
		PollInterval:  20 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, eng.Stop(ctx))
	})
	return eng
}

// A scripted session created with webhook_url, run by the real engine,
// sends its receiver a signed session.idle (and session.completed) with the
// seq of the journal event that caused it.
func TestScriptedSessionNotifiesItsWebhookURL(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	d, _ := e.start(allowFor(t, r))
	eng := startEngine(t, e)

	var req lt.CreateSessionRequest
	require.NoError(t, json.Unmarshal([]byte(`{
	  "agent_spec": {
	    "model": {"provider": "scripted", "name": "demo", "script": [
	      {"tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]}
	    ]},
	    "instructions": "Finish.",
	    "tools": [{"name": "finish"}]
	  },
	  "input": "go",
	  "webhook_url": "`+r.srv.URL+`/hooks"
	}`), &req))
	sess, err := eng.CreateSession(t.Context(), &req)
	require.NoError(t, err)
	secret, err := d.SessionSecret(t.Context(), sess.ID)
	require.NoError(t, err)

	var idle received
	eventually(t, func() bool {
		for _, got := range r.requests() {
			var n lt.WebhookNotification
			if json.Unmarshal(got.Body, &n) == nil && n.Type == lt.WebhookSessionIdle {
				idle = got
				return true
			}
		}
		return false
	}, "session.idle received")

	var n lt.WebhookNotification
	require.NoError(t, json.Unmarshal(idle.Body, &n))
	require.Equal(t, sess.ID, n.SessionID)
	ok, err := Verify(secret, idle.ID, t0.Unix(), idle.Body, idle.Signature)
	require.NoError(t, err)
	require.True(t, ok, "signed with the secret the create response would return")

	// event_seq is the seq of the status change to idle in the journal.
	evs, err := e.st.EventList(t.Context(), sess.ID, n.EventSeq-1, 1)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, lt.EventSessionStatusChanged, evs[0].Type)
	require.JSONEq(t, `"idle"`, string(mustField(t, evs[0].Data, "to")))

	eventually(t, func() bool {
		for _, row := range e.deliveries() {
			if row.Type == lt.WebhookSessionCompleted && row.Status == store.WebhookDelivered {
				return true
			}
		}
		return false
	}, "session.completed delivered too")
}

// A root created with webhook_url spawns a sub-agent that spawns its own;
// both ask for an approval. The root's receiver hears of each, signed with
// the root's webhook secret and naming the root, and of the root's end,
// as before; each approval is decided from what the notification names.
func TestSubagentApprovalsNotifyTheRootsWebhookURL(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	d, _ := e.start(allowFor(t, r))
	eng := startEngine(t, e)

	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
	}
	agent := func(steps []any, tools ...string) map[string]any {
		specTools := []any{}
		for _, name := range tools {
			specTools = append(specTools, map[string]any{"name": name})
		}
		return map[string]any{
			"model":        map[string]any{"provider": "scripted", "name": "demo", "script": steps},
			"instructions": "Do the task.", "tools": specTools,
			"policies": []any{map[string]any{"name": "deploy", "tool": "write_file", "decision": "ask"}},
		}
	}
	grandchild := agent([]any{
		call("write_file", map[string]any{"path": "grandchild.txt", "content": "deployed"}),
		map[string]any{"text": "grandchild done"},
	}, "write_file")
	child := agent([]any{
		call("spawn_agent", map[string]any{"agent_spec": grandchild, "input": "deploy too"}),
		call("write_file", map[string]any{"path": "child.txt", "content": "deployed"}),
		call("wait_agents", map[string]any{}),
		map[string]any{"text": "child done"},
	}, "spawn_agent", "wait_agents", "write_file")
	root := agent([]any{
		call("spawn_agent", map[string]any{"agent_spec": child, "input": "deploy"}),
		call("wait_agents", map[string]any{}),
		map[string]any{"text": "all done"},
	}, "spawn_agent", "wait_agents", "write_file")
	raw, err := json.Marshal(map[string]any{"agent_spec": root, "input": "go", "webhook_url": r.srv.URL + "/hooks"})
	require.NoError(t, err)
	var req lt.CreateSessionRequest
	require.NoError(t, json.Unmarshal(raw, &req))
	sess, err := eng.CreateSession(t.Context(), &req)
	require.NoError(t, err)
	secret, err := d.SessionSecret(t.Context(), sess.ID)
	require.NoError(t, err)

	// sessionsNotified returns the sessions notifications of type typ
	// were received of so far.
	sessionsNotified := func(typ string) []string {
		var ids []string
		for _, got := range r.requests() {
			var n lt.WebhookNotification
			if json.Unmarshal(got.Body, &n) == nil && n.Type == typ {
				ids = append(ids, n.SessionID)
			}
		}
		return ids
	}
	eventually(t, func() bool { return len(sessionsNotified(lt.WebhookSessionRequiresAction)) == 2 },
		"the sub-agent's and its own sub-agent's requires_action received")

	kids, err := eng.ListSessions(t.Context(), lt.ListSessionsParams{ParentID: sess.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, kids.Data, 1)
	grandkids, err := eng.ListSessions(t.Context(), lt.ListSessionsParams{ParentID: kids.Data[0].ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, grandkids.Data, 1)
	require.ElementsMatch(t, []string{kids.Data[0].ID, grandkids.Data[0].ID}, sessionsNotified(lt.WebhookSessionRequiresAction))

	for _, id := range sessionsNotified(lt.WebhookSessionRequiresAction) {
		s, err := eng.GetSession(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, lt.SessionRequiresAction, s.Status)
		require.Len(t, s.RequiredActions, 1)
		_, err = eng.DecideAction(t.Context(), id, s.RequiredActions[0].ID, &lt.Decision{Decision: lt.DecisionApprove})
		require.NoError(t, err)
	}
	eventually(t, func() bool { return slices.Contains(sessionsNotified(lt.WebhookSessionIdle), sess.ID) },
		"the root's session.idle received")

	// Every request, whichever session of the tree it is about, is signed
	// with the root's secret; a sub-agent's names the root, the root's
	// own is as it was.
	for _, got := range r.requests() {
		requireSignedBy(t, secret, got)
		n := notification(t, got)
		if n.SessionID == sess.ID {
			require.Empty(t, n.RootSessionID)
			continue
		}
		require.Equal(t, sess.ID, n.RootSessionID)
		evs, err := e.st.EventList(t.Context(), n.SessionID, n.EventSeq-1, 1)
		require.NoError(t, err)
		require.Len(t, evs, 1, "event_seq is an event of the sub-agent's journal")
	}
}

func mustField(t *testing.T, doc json.RawMessage, name string) json.RawMessage {
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(doc, &m))
	return m[name]
}
