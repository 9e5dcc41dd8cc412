package storeutil

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// Both drivers refuse the same webhook rows with the same messages: the
// checks below are the ones they run.
func TestWebhookChecks(t *testing.T) {
	endpoint := func(edit func(*store.WebhookEndpointRow)) *store.WebhookEndpointRow {
		r := &store.WebhookEndpointRow{ID: "wh_1", Project: "p", URL: "https://example.test/hook", Secrets: []string{"s1"}, CreatedAt: testTime}
		edit(r)
		return r
	}
	delivery := func(edit func(*store.WebhookDeliveryRow)) *store.WebhookDeliveryRow {
		r := &store.WebhookDeliveryRow{ID: "d1", Project: "p", SessionID: "ses_1", URL: "https://example.test/hook", Type: "session.done",
			Status: store.WebhookPending, Body: []byte(`{}`), CreatedAt: testTime, UpdatedAt: testTime}
		edit(r)
		return r
	}
	claim := func(edit func(*store.WebhookClaimParams)) *store.WebhookClaimParams {
		p := &store.WebhookClaimParams{Owner: "n1", Now: testTime, Until: testTime.Add(time.Minute), Limit: 10}
		edit(p)
		return p
	}
	for _, c := range []Checks{lenient, strict} {
		require.NoError(t, c.WebhookEndpointCreate(endpoint(func(*store.WebhookEndpointRow) {})))
		require.NoError(t, c.WebhookDelivery(delivery(func(*store.WebhookDeliveryRow) {})))
		require.NoError(t, c.WebhookClaim(claim(func(*store.WebhookClaimParams) {})))
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"endpoint without secrets", lenient.WebhookEndpointCreate(endpoint(func(r *store.WebhookEndpointRow) { r.Secrets = nil })), "create webhook endpoint wh_1: secrets is empty"},
		{"empty secret", lenient.WebhookEndpointCreate(endpoint(func(r *store.WebhookEndpointRow) { r.Secrets = []string{"s1", ""} })), "create webhook endpoint wh_1: secrets[1] is empty"},
		{"NUL in an event name", strict.WebhookEndpointCreate(endpoint(func(r *store.WebhookEndpointRow) { r.Events = []string{"a\x00"} })), "create webhook endpoint wh_1: events[0] contains a NUL byte"},
		{"nil endpoint", lenient.WebhookEndpointCreate(nil), "create webhook endpoint: row is nil"},
		{"endpoint without id", lenient.WebhookEndpointCreate(endpoint(func(r *store.WebhookEndpointRow) { r.ID = "" })), "create webhook endpoint: id is empty"},
		{"endpoint without project", lenient.WebhookEndpointCreate(endpoint(func(r *store.WebhookEndpointRow) { r.Project = "" })), "create webhook endpoint wh_1: project is empty"},
		{"nil delivery", lenient.WebhookDelivery(nil), "row is nil"},
		{"delivery without project", lenient.WebhookDelivery(delivery(func(r *store.WebhookDeliveryRow) { r.Project = "" })), "project is empty"},
		{"delivery without body", lenient.WebhookDelivery(delivery(func(r *store.WebhookDeliveryRow) { r.Body = nil })), "body is empty"},
		{"zero next attempt", lenient.WebhookDelivery(delivery(func(r *store.WebhookDeliveryRow) { r.NextAttemptAt = &time.Time{} })), "next_attempt_at is zero"},
		{"nil claim", lenient.WebhookClaim(nil), "params are nil"},
		// Until is compared as stored, at microsecond precision.
		{"claim ending as it starts", lenient.WebhookClaim(claim(func(p *store.WebhookClaimParams) { p.Until = p.Now.Add(time.Nanosecond) })),
			"until 2025-06-07 08:09:10.000000001 +0000 UTC must be after now 2025-06-07 08:09:10 +0000 UTC"},
		{"claim over the page", lenient.WebhookClaim(claim(func(p *store.WebhookClaimParams) { p.Limit = MaxWebhookPage + 1 })), "limit must be between 1 and 1000, got 1001"},
	}
	for _, tc := range cases {
		require.EqualError(t, tc.err, tc.want, tc.name)
	}
}

func TestPageLimit(t *testing.T) {
	limit, err := EventPage.Limit(0)
	require.NoError(t, err)
	require.Equal(t, 100, limit)
	limit, err = SessionPage.Limit(1000)
	require.NoError(t, err)
	require.Equal(t, 1000, limit)
	_, err = ActionPage.Limit(-1)
	require.EqualError(t, err, "limit must not be negative, got -1")
	_, err = ActionPage.Limit(1001)
	require.EqualError(t, err, "limit must be at most 1000, got 1001")
}
