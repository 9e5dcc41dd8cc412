package storetest

import (
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

func delivery(id, endpointID, sessionID string, seq int64, due time.Time) *store.WebhookDeliveryRow {
	return &store.WebhookDeliveryRow{
		ID: id, EndpointID: endpointID, SessionID: sessionID, URL: "https://hooks.example.com/in",
		Type: "session.idle", EventSeq: seq, Body: []byte(`{"type":"session.idle"}`),
		Status: store.WebhookPending, NextAttemptAt: &due, CreatedAt: t0, UpdatedAt: t0,
	}
}

// testWebhookEndpoints: create, get, list, duplicate ids conflict, delete
// disables the endpoint's pending deliveries.
func testWebhookEndpoints(t *testing.T, h *harness) {
	_, err := h.s.WebhookEndpointGet(h.ctx, "whe_nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, h.s.WebhookEndpointDelete(h.ctx, "whe_nope", t0), store.ErrNotFound)

	a := &store.WebhookEndpointRow{ID: "whe_a", URL: "https://a.example.com/", Events: []string{"session.idle"},
		Secrets: []string{"whsec_a"}, CreatedAt: at(time.Second)}
	b := &store.WebhookEndpointRow{ID: "whe_b", URL: "https://b.example.com/", Secrets: []string{"whsec_b1", "whsec_b0"},
		CreatedAt: at(2 * time.Second)}
	require.NoError(t, h.s.WebhookEndpointCreate(h.ctx, a))
	require.NoError(t, h.s.WebhookEndpointCreate(h.ctx, b))
	require.ErrorIs(t, h.s.WebhookEndpointCreate(h.ctx, a), store.ErrConflict)

	got, err := h.s.WebhookEndpointGet(h.ctx, "whe_b")
	require.NoError(t, err)
	b.Events = []string{}
	require.Equal(t, b, got)
	list, err := h.s.WebhookEndpointList(h.ctx)
	require.NoError(t, err)
	require.Equal(t, []*store.WebhookEndpointRow{a, b}, list)

	h.createSession("s1")
	_, err = h.s.WebhookSessionInit(h.ctx, "s1", "whsec_s")
	require.NoError(t, err)
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s1", 0, 1, []*store.WebhookDeliveryRow{
		delivery("msg_1", "whe_a", "s1", 1, t0), delivery("msg_2", "whe_b", "s1", 1, t0),
	}))
	require.NoError(t, h.s.WebhookEndpointDelete(h.ctx, "whe_a", at(time.Minute)))
	_, err = h.s.WebhookEndpointGet(h.ctx, "whe_a")
	require.ErrorIs(t, err, store.ErrNotFound)
	due, err := h.s.WebhookDue(h.ctx, at(time.Hour), 0)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.Equal(t, "msg_2", due[0].ID)
}

// testWebhookOutbox: session init is get-or-create, enqueue is conditional
// on the cursor and skips existing ids, due rows come earliest first,
// attempts are recorded, and a disabling attempt disables the target.
func testWebhookOutbox(t *testing.T, h *harness) {
	_, err := h.s.WebhookSessionInit(h.ctx, "nope", "whsec_x")
	require.ErrorIs(t, err, store.ErrNotFound)
	h.createSession("s1")
	ws, err := h.s.WebhookSessionInit(h.ctx, "s1", "whsec_first")
	require.NoError(t, err)
	require.Equal(t, &store.WebhookSessionRow{SessionID: "s1", Secret: "whsec_first"}, ws)
	ws, err = h.s.WebhookSessionInit(h.ctx, "s1", "whsec_second")
	require.NoError(t, err)
	require.Equal(t, "whsec_first", ws.Secret, "the first secret stays")

	next, err := h.s.WebhookNextDue(h.ctx)
	require.NoError(t, err)
	require.Nil(t, next)

	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s1", 0, 3, []*store.WebhookDeliveryRow{
		delivery("msg_late", "", "s1", 3, at(time.Hour)), delivery("msg_early", "", "s1", 2, at(time.Second)),
	}))
	require.ErrorIs(t, h.s.WebhookEnqueue(h.ctx, "s1", 0, 3, nil), store.ErrConflict)
	// A re-scan from the new cursor that derives the same id inserts nothing.
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s1", 3, 4, []*store.WebhookDeliveryRow{delivery("msg_late", "", "s1", 3, t0)}))
	ws, err = h.s.WebhookSessionInit(h.ctx, "s1", "whsec_x")
	require.NoError(t, err)
	require.Equal(t, int64(4), ws.Cursor)

	next, err = h.s.WebhookNextDue(h.ctx)
	require.NoError(t, err)
	require.Equal(t, at(time.Second), *next)
	due, err := h.s.WebhookDue(h.ctx, at(2*time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, due, 2)
	require.Equal(t, "msg_early", due[0].ID)
	require.Equal(t, at(time.Hour), *due[1].NextAttemptAt, "the duplicate did not replace the row")

	retry := at(time.Minute)
	require.NoError(t, h.s.WebhookRecordAttempt(h.ctx, &store.WebhookAttemptParams{
		DeliveryID: "msg_early", Status: store.WebhookPending, NextAttemptAt: &retry, Now: at(time.Second),
		Attempt: store.WebhookAttemptRow{Attempt: 1, At: at(time.Second), StatusCode: 500, Duration: 3 * time.Millisecond},
	}))
	require.NoError(t, h.s.WebhookRecordAttempt(h.ctx, &store.WebhookAttemptParams{
		DeliveryID: "msg_early", Status: store.WebhookDisabled, DisableTarget: true, Now: at(time.Minute),
		Attempt: store.WebhookAttemptRow{Attempt: 2, At: at(time.Minute), StatusCode: 410},
	}))
	require.ErrorIs(t, h.s.WebhookRecordAttempt(h.ctx, &store.WebhookAttemptParams{
		DeliveryID: "msg_nope", Status: store.WebhookDelivered, Now: t0, Attempt: store.WebhookAttemptRow{Attempt: 1, At: t0},
	}), store.ErrNotFound)

	ws, err = h.s.WebhookSessionInit(h.ctx, "s1", "whsec_x")
	require.NoError(t, err)
	require.NotNil(t, ws.DisabledAt)
	due, err = h.s.WebhookDue(h.ctx, at(24*time.Hour), 10)
	require.NoError(t, err)
	require.Empty(t, due, "410 disabled the session's other pending delivery")

	list, err := h.s.WebhookDeliveryList(h.ctx, &store.WebhookDeliveryListParams{Limit: 1})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "msg_early", list[0].ID, "newest first")
	require.Equal(t, store.WebhookDisabled, list[0].Status)
	require.Equal(t, 2, list[0].Attempts)
	require.Equal(t, []store.WebhookAttemptRow{
		{Attempt: 1, At: at(time.Second), StatusCode: 500, Duration: 3 * time.Millisecond},
		{Attempt: 2, At: at(time.Minute), StatusCode: 410},
	}, list[0].AttemptList)
	list, err = h.s.WebhookDeliveryList(h.ctx, &store.WebhookDeliveryListParams{BeforePos: list[0].Pos})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "msg_late", list[0].ID)
	require.Equal(t, store.WebhookDisabled, list[0].Status)
	require.Empty(t, list[0].AttemptList)
}
