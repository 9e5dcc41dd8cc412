package webhook

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
	"github.com/stretchr/testify/require"
)

// A scripted session created with webhook_url, run by the real engine,
// sends its receiver a signed session.idle (and session.completed) with the
// seq of the journal event that caused it.
func TestScriptedSessionNotifiesItsWebhookURL(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	eng, err := engine.New(e.st, &engine.Config{
		WorkspaceRoot: filepath.Join(t.TempDir(), "workspaces"),
		Providers:     map[string]model.Provider{"scripted": scripted.New(nil)},
		Logger:        slog.New(slog.DiscardHandler),
		PollInterval:  20 * time.Millisecond,
	})
	require.NoError(t, err)
	d, _ := e.start(allowFor(t, r))
	require.NoError(t, eng.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, eng.Stop(ctx))
	})

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

func mustField(t *testing.T, doc json.RawMessage, name string) json.RawMessage {
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(doc, &m))
	return m[name]
}
