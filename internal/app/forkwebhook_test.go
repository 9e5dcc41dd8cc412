package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// failingWebhookInit fails WebhookSessionInit while fail is set (a
// database blip, a full disk).
type failingWebhookInit struct {
	store.Store
	fail atomic.Bool
}

func (s *failingWebhookInit) WebhookSessionInit(ctx context.Context, id, secret string) (*store.WebhookSessionRow, error) {
	if s.fail.Load() {
		return nil, errors.New("injected: database unreachable")
	}
	return s.Store.WebhookSessionInit(ctx, id, secret)
}

// TestForkIsAnsweredWithTheSecretItWasWrittenWith: a fork's secret is
// written with the fork, so no write after its creation can fail the
// answer (a client would retry, and fork again). The secret answered is
// the one its notifications are signed with, and they start after the
// events the fork copied.
func TestForkIsAnsweredWithTheSecretItWasWrittenWith(t *testing.T) {
	st, eng := apptest.Engine(t, nil)
	fs := &failingWebhookInit{Store: st}
	a := apptest.New(t, fs, eng, nil)
	ctx := app.WithCaller(t.Context(), app.LibraryCaller)

	var req lt.CreateSessionRequest
	require.NoError(t, json.Unmarshal([]byte(`{"agent_spec": `+leafSpec+`, "input": "take notes", "webhook_url": "https://hooks.example.com/longhaul"}`), &req))
	s, err := a.CreateSession(ctx, &req)
	require.NoError(t, err)
	f := &fixture{t: t, ctx: ctx, st: st, eng: eng, app: a}
	f.waitIdle(s.ID)
	cps, err := a.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	require.NotEmpty(t, cps.Data)
	cp := cps.Data[len(cps.Data)-1]

	fs.fail.Store(true)
	fork, err := a.Fork(ctx, s.ID, &lt.ForkRequest{CheckpointID: cp.ID})
	require.NoError(t, err)
	require.NotEmpty(t, fork.WebhookSecret)
	require.NotEqual(t, s.WebhookSecret, fork.WebhookSecret)
	fs.fail.Store(false)
	ws, err := st.WebhookSessionInit(ctx, fork.ID, "whsec_bm90IHRoaXMgb25l")
	require.NoError(t, err)
	require.Equal(t, fork.WebhookSecret, ws.Secret, "the secret its notifications are signed with")
	require.Equal(t, cp.EventSeq, ws.Cursor, "its notifications start after what it copied")

	none := ""
	silent, err := a.Fork(ctx, s.ID, &lt.ForkRequest{CheckpointID: cp.ID, WebhookURL: &none})
	require.NoError(t, err)
	require.Empty(t, silent.WebhookSecret)
}

// TestCreationIsAnsweredWithTheSecretItWasWrittenWith: a session's secret
// is written with its creation, so no write after the commit can fail the
// answer (a client without an Idempotency-Key would retry and create a
// second session, which would run its agent too). The secret answered is
// the one its notifications are signed with, from its first event.
func TestCreationIsAnsweredWithTheSecretItWasWrittenWith(t *testing.T) {
	st, eng := apptest.Engine(t, nil)
	fs := &failingWebhookInit{Store: st}
	a := apptest.New(t, fs, eng, nil)
	ctx := app.WithCaller(t.Context(), app.LibraryCaller)

	fs.fail.Store(true)
	var req lt.CreateSessionRequest
	require.NoError(t, json.Unmarshal([]byte(`{"agent_spec": `+leafSpec+`, "input": "take notes", "webhook_url": "https://hooks.example.com/longhaul"}`), &req))
	s, err := a.CreateSession(ctx, &req)
	require.NoError(t, err)
	require.NotEmpty(t, s.WebhookSecret)
	fs.fail.Store(false)
	ws, err := st.WebhookSessionInit(ctx, s.ID, "whsec_bm90IHRoaXMgb25l")
	require.NoError(t, err)
	require.Equal(t, s.WebhookSecret, ws.Secret, "the secret its notifications are signed with")
	require.Zero(t, ws.Cursor, "its notifications start at its first event")

	fs.fail.Store(true)
	var plain lt.CreateSessionRequest
	require.NoError(t, json.Unmarshal([]byte(`{"agent_spec": `+leafSpec+`, "input": "take notes"}`), &plain))
	quiet, err := a.CreateSession(ctx, &plain)
	require.NoError(t, err)
	require.Empty(t, quiet.WebhookSecret, "no webhook_url, no secret")
	fs.fail.Store(false)
	ws, err = st.WebhookSessionInit(ctx, quiet.ID, "whsec_bm90IHRoaXMgb25l")
	require.NoError(t, err)
	require.Equal(t, "whsec_bm90IHRoaXMgb25l", ws.Secret, "no webhook state was written for a session without a webhook_url")
}
