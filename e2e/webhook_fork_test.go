package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
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
// request names another, or "" for none, and its notifications start after
// the events it copied. Asserted at the receivers, each request verified
// with the secret of the session it names, none of them not owed.
func TestWebhookOfAFork(t *testing.T) {
	t.Parallel()
	origin, other, endpoint := newRecorder(t, nil), newRecorder(t, nil), newRecorder(t, nil)
	srv := startServer(t, "--webhook-allow-private", "127.0.0.1", "--webhook-allow-port", strconv.Itoa(origin.port()),
		"--webhook-allow-port", strconv.Itoa(other.port()), "--webhook-allow-port", strconv.Itoa(endpoint.port()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep, err := srv.api.CreateWebhookEndpoint(ctx, &lt.CreateWebhookEndpointRequest{URL: endpoint.url() + "/all"})
	require.NoError(t, err)

	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "take notes", WebhookURL: origin.url() + "/hooks", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, finalText("noted"), finalText("noted again"))},
	}})
	require.NoError(t, err)
	require.NotEmpty(t, s.WebhookSecret)
	requireStatus(ctx, t, srv, waitTerminal(ctx, t, srv, s.ID, time.Minute), lt.SessionIdle)
	cps, err := srv.api.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	require.NotEmpty(t, cps.Data)
	cp, copied := cps.Data[len(cps.Data)-1].ID, cps.Data[len(cps.Data)-1].EventSeq

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
	// A fork's notifications start after the events it copied, to every
	// target (the server's endpoint too, whatever the fork's
	// webhook_url): those were its origin's, and were notified as the
	// origin's.
	forkOwed := func(id string) map[hookKey]bool {
		owed := map[hookKey]bool{}
		for k := range owedHooks(ctx, t, srv, id) {
			if k.n.Seq > copied {
				owed[k] = true
			}
		}
		require.NotEmpty(t, owed, "%s's own turn is notified", id)
		return owed
	}
	fromOrigin := owedHooks(ctx, t, srv, s.ID)
	maps.Copy(fromOrigin, forkOwed(kept.ID))
	at := map[*recorder]map[hookKey]bool{origin: fromOrigin, other: forkOwed(moved.ID)}
	all := owedHooks(ctx, t, srv, s.ID)
	for _, f := range []string{kept.ID, moved.ID, silent.ID} {
		maps.Copy(all, forkOwed(f))
	}
	at[endpoint] = all
	for rec, want := range at {
		secret := func(session string) string { return secrets[session] }
		if rec == endpoint {
			secret = func(string) string { return ep.Secret }
		}
		waitFor(t, 30*time.Second, fmt.Sprintf("%d notifications at %s", len(want), rec.url()), func() (bool, error) {
			have := map[hookKey]bool{}
			for _, r := range rec.requests() {
				n, err := decodeHook(r.Body)
				if err != nil {
					return false, err
				}
				if err := verifyHook(secret(n.SessionID), r.Header, r.Body); err != nil {
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
		require.NotEqual(t, silent.ID, n.SessionID, "a fork without a webhook_url sends nothing to a webhook_url")
	}

	for _, bad := range []string{"ftp://example.com/hooks", "/hooks", "http://127.0.0.1:1/hooks"} {
		_, err := srv.api.Fork(ctx, s.ID, &lt.ForkRequest{CheckpointID: cp, WebhookURL: &bad})
		var apiErr *client.APIError
		require.True(t, errors.As(err, &apiErr), "%s: %v", bad, err)
		require.Equal(t, http.StatusBadRequest, apiErr.Status, "%s: %v", bad, err)
		require.Equal(t, "webhook_url", apiErr.Field, "%s: %v", bad, err)
	}
}

// TestWebUIForkShowsItsSecret: a fork made from the session page of a
// session with a webhook_url shows the fork's own secret once, before the
// person leaves for the fork (the answer that carries it is the only one
// that will), and the secret shown is the one that signs the fork's
// notifications.
func TestWebUIForkShowsItsSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := startBrowser(t)
	rec := newRecorder(t, nil)
	srv := startServer(t, "--webhook-allow-private", "127.0.0.1", "--webhook-allow-port", strconv.Itoa(rec.port()))
	s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{Input: "take notes", WebhookURL: rec.url() + "/hooks", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: attackScript(t, finalText("noted"), finalText("noted again"))},
	}})
	require.NoError(t, err)
	requireStatus(ctx, t, srv, waitTerminal(ctx, t, srv, s.ID, time.Minute), lt.SessionIdle)

	tab := b.root
	b.do(tab, "open the session's page", navigate(srv.url+"/#/sessions/"+s.ID))
	b.click(tab, `button[data-tab="checkpoints"]`)
	last := `ol.checkpoints li.checkpoint:last-child`
	b.waitJS(tab, "the checkpoints", fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(last+" button.fork")))
	b.click(tab, last+" button.fork")
	b.setValue(tab, last+" textarea.fork-input", "once more")
	b.click(tab, last+` button[data-act="fork"]`)
	b.waitJS(tab, "the fork's secret", `document.querySelector('.fork-secret .webhook-secret') !== null`)
	b.screenshot(tab, "fork-secret")
	secret := b.text(tab, ".fork-secret .webhook-secret")
	require.Regexp(t, `^whsec_\S+$`, secret)
	require.NotEqual(t, s.WebhookSecret, secret)
	require.Contains(t, b.text(tab, ".fork-secret"), rec.url()+"/hooks")
	b.click(tab, ".fork-secret a.open-fork")
	b.waitJS(tab, "the fork's page", `document.querySelector('.overview')?.innerText.includes('Forked from')`)
	var hash string
	b.eval(tab, `location.hash`, &hash)
	fork := strings.TrimPrefix(hash, "#/sessions/")
	requireStatus(ctx, t, srv, waitTerminal(ctx, t, srv, fork, time.Minute), lt.SessionIdle)

	waitFor(t, 30*time.Second, "the fork's notifications", func() (bool, error) {
		for _, r := range rec.requests() {
			n, err := decodeHook(r.Body)
			if err != nil {
				return false, err
			}
			if n.SessionID == fork {
				return true, verifyHook(secret, r.Header, r.Body)
			}
		}
		return false, nil
	})
}
