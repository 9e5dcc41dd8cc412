package longhaul_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRuntimeWebhookDeliveriesPages: AllWebhookDeliveries follows the
// pages' cursors to the same deliveries one large page holds, and a
// session created with a webhook_url gets its signing secret in the
// answer, as over the API.
func TestRuntimeWebhookDeliveriesPages(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	ctx := t.Context()
	// A name under .invalid (RFC 2606) never resolves, so every attempt
	// fails and the deliveries stay listed. (Loopback would be refused
	// already at creation.)
	_, err := rt.CreateWebhookEndpoint(ctx, &lt.CreateWebhookEndpointRequest{URL: "https://hooks.example.invalid/hook", Events: []string{lt.WebhookSessionIdle}})
	require.NoError(t, err)
	const sessions = 3
	for range sessions {
		s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: new(scripted(`[{"text":"hi"}]`)), Input: "hi"})
		require.NoError(t, err)
		require.Empty(t, s.WebhookSecret)
		waitStatus(t, rt, s.ID, lt.SessionIdle)
	}
	var all *lt.List[lt.WebhookDelivery]
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) { // polling with a deadline
		all, err = rt.ListWebhookDeliveries(ctx, client.ListWebhookDeliveriesParams{})
		require.NoError(t, err)
		if len(all.Data) == sessions {
			break
		}
		require.False(t, time.Now().After(deadline), "%d deliveries, want %d", len(all.Data), sessions)
	}
	require.Nil(t, all.NextCursor)

	first, err := rt.ListWebhookDeliveries(ctx, client.ListWebhookDeliveriesParams{Limit: 1})
	require.NoError(t, err)
	require.Len(t, first.Data, 1)
	require.NotNil(t, first.NextCursor, "a full page names the next")
	var paged []string
	for d, err := range rt.AllWebhookDeliveries(ctx, client.ListWebhookDeliveriesParams{Limit: 1}) {
		require.NoError(t, err)
		paged = append(paged, d.ID)
	}
	var want []string
	for _, d := range all.Data {
		want = append(want, d.ID)
	}
	require.Equal(t, want, paged)

	// A limit out of range is refused before anything is read, as the
	// client refuses it before sending.
	_, err = rt.ListWebhookDeliveries(ctx, client.ListWebhookDeliveriesParams{Limit: client.MaxListLimit + 1})
	require.EqualError(t, err, "list webhook deliveries: ListWebhookDeliveriesParams.Limit 501 is outside 0..500")
	for _, err := range rt.AllWebhookDeliveries(ctx, client.ListWebhookDeliveriesParams{Limit: -1}) {
		require.ErrorContains(t, err, "ListWebhookDeliveriesParams.Limit -1 is outside 0..500")
	}

	s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: new(scripted(`[{"text":"hi"}]`)), Input: "hi", WebhookURL: "https://hooks.example.invalid/own"})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(s.WebhookSecret, "whsec_"), s.WebhookSecret)
	got, err := rt.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Empty(t, got.WebhookSecret, "shown only in the answer that creates it")

	// A webhook_url no notification could ever reach is refused at once,
	// naming the field and the rule.
	_, err = rt.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: new(scripted(`[{"text":"hi"}]`)), Input: "hi", WebhookURL: "http://127.0.0.1:1/own"})
	require.ErrorContains(t, err, "webhook_url would never be delivered to: port 1 is not allowed (allowed: 80, 443)")
}
