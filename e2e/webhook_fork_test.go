package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestWebhookOfAFork: a fork is a session created by whoever forks it, so
// its notifications are signed with a secret of its own, which the fork's
// 201 returns, as a creation's does; never with its origin's (which the
// forker may never have been given), nor with one nobody was given, which
// no receiver can verify. The fork keeps its origin's webhook_url unless the
// request names another, or "" for none. Asserted at the receivers, each
// request verified with the secret of the session it names.
func TestWebhookOfAFork(t *testing.T) {
	t.Parallel()
	origin, other := newRecorder(t, nil), newRecorder(t, nil)
	srv := startServer(t, "--webhook-allow-private", "127.0.0.1",
		"--webhook-allow-port", strconv.Itoa(origin.port()), "--webhook-allow-port", strconv.Itoa(other.port()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "take notes", WebhookURL: origin.url() + "/hooks", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, finalText("noted"), finalText("noted again"))},
	}})
	require.NoError(t, err)
	require.NotEmpty(t, s.WebhookSecret)
	requireStatus(ctx, t, srv, waitTerminal(ctx, t, srv, s.ID, time.Minute), lt.SessionIdle)
	cps, err := srv.api.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	require.NotEmpty(t, cps.Data)
	cp := cps.Data[len(cps.Data)-1].ID

	fork := func(url *string) *lt.Session {
		t.Helper()
		f, err := srv.api.Fork(ctx, s.ID, &lt.ForkRequest{CheckpointID: cp, Input: "once more", WebhookURL: url})
		require.NoError(t, err)
		requireStatus(ctx, t, srv, waitTerminal(ctx, t, srv, f.ID, time.Minute), lt.SessionIdle)
		return f
	}
	kept := fork(nil)
	require.Equal(t, origin.url()+"/hooks", kept.WebhookURL, "a fork keeps its origin's webhook_url")
	require.NotEmpty(t, kept.WebhookSecret, "the fork's 201 carries the secret that signs its notifications")
	require.NotEqual(t, s.WebhookSecret, kept.WebhookSecret, "a secret of the fork's own")
	otherURL := other.url() + "/forks"
	moved := fork(&otherURL)
	require.Equal(t, otherURL, moved.WebhookURL)
	require.NotEmpty(t, moved.WebhookSecret)
	require.NotEqual(t, s.WebhookSecret, moved.WebhookSecret)
	none := ""
	silent := fork(&none)
	require.Empty(t, silent.WebhookURL)
	require.Empty(t, silent.WebhookSecret, "no webhook_url, no secret")
	got, err := srv.api.GetSession(ctx, moved.ID)
	require.NoError(t, err)
	require.Equal(t, otherURL, got.WebhookURL, "as read back")
	require.Empty(t, got.WebhookSecret, "the secret is shown only in the 201")

	secrets := map[string]string{s.ID: s.WebhookSecret, kept.ID: kept.WebhookSecret, moved.ID: moved.WebhookSecret}
	at := map[*recorder]map[hookKey]bool{
		origin: owedHooks(ctx, t, srv, s.ID, kept.ID),
		other:  owedHooks(ctx, t, srv, moved.ID),
	}
	for rec, want := range at {
		waitFor(t, 30*time.Second, fmt.Sprintf("%d notifications at %s", len(want), rec.url()), func() (bool, error) {
			have := map[hookKey]bool{}
			for _, r := range rec.requests() {
				n, err := decodeHook(r.Body)
				if err != nil {
					return false, err
				}
				if err := verifyHook(secrets[n.SessionID], r.Header, r.Body); err != nil {
					return false, fmt.Errorf("a notification of %s at %s: %w", n.SessionID, rec.url(), err)
				}
				k := hookKey{n.SessionID, notification{n.Type, n.EventSeq}}
				if !want[k] {
					return false, fmt.Errorf("%s got a notification it is not owed: %+v", rec.url(), k)
				}
				have[k] = true
			}
			return len(have) == len(want), nil
		})
	}
	for _, r := range append(origin.requests(), other.requests()...) {
		n, err := decodeHook(r.Body)
		require.NoError(t, err)
		require.NotEqual(t, silent.ID, n.SessionID, "a fork without a webhook_url notifies nobody")
	}

	for _, bad := range []string{"ftp://example.com/hooks", "/hooks", "http://127.0.0.1:1/hooks"} {
		_, err := srv.api.Fork(ctx, s.ID, &lt.ForkRequest{CheckpointID: cp, WebhookURL: &bad})
		var apiErr *client.APIError
		require.True(t, errors.As(err, &apiErr), "%s: %v", bad, err)
		require.Equal(t, http.StatusBadRequest, apiErr.Status, "%s: %v", bad, err)
		require.Equal(t, "webhook_url", apiErr.Field, "%s: %v", bad, err)
	}
}
