package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

func delivery(id, endpointID, sessionID string, seq int64, due time.Time) *store.WebhookDeliveryRow {
	return &store.WebhookDeliveryRow{
		ID: id, EndpointID: endpointID, Project: project, SessionID: sessionID, URL: "https://hooks.example.com/in",
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

	a := &store.WebhookEndpointRow{ID: "whe_a", Project: project, URL: "https://a.example.com/", Events: []string{"session.idle"},
		Secrets: []string{"whsec_a"}, CreatedAt: at(time.Second)}
	b := &store.WebhookEndpointRow{ID: "whe_b", Project: project, URL: "https://b.example.com/", Secrets: []string{"whsec_b1", "whsec_b0"},
		CreatedAt: at(2 * time.Second)}
	require.NoError(t, h.s.WebhookEndpointCreate(h.ctx, a))
	require.NoError(t, h.s.WebhookEndpointCreate(h.ctx, b))
	require.ErrorIs(t, h.s.WebhookEndpointCreate(h.ctx, a), store.ErrConflict)

	got, err := h.s.WebhookEndpointGet(h.ctx, "whe_b")
	require.NoError(t, err)
	b.Events = []string{}
	require.Equal(t, b, got)
	list, err := h.s.WebhookEndpointList(h.ctx, "")
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
	require.Equal(t, []string{"msg_early"}, deliveryIDs(h.claimDue("node-a", at(time.Second), 10)))
	require.NoError(t, h.s.WebhookRecordAttempt(h.ctx, &store.WebhookAttemptParams{
		DeliveryID: "msg_early", Status: store.WebhookPending, NextAttemptAt: &retry, Now: at(time.Second),
		Attempt: store.WebhookAttemptRow{Attempt: 1, Owner: "node-a", At: at(time.Second), StatusCode: 500, Duration: 3 * time.Millisecond},
	}))
	require.Equal(t, []string{"msg_early"}, deliveryIDs(h.claimDue("node-b", at(time.Minute), 10)))
	require.NoError(t, h.s.WebhookRecordAttempt(h.ctx, &store.WebhookAttemptParams{
		DeliveryID: "msg_early", Status: store.WebhookDisabled, DisableTarget: true, Now: at(time.Minute),
		Attempt: store.WebhookAttemptRow{Attempt: 2, Owner: "node-b", At: at(time.Minute), StatusCode: 410},
	}))
	require.ErrorIs(t, h.s.WebhookRecordAttempt(h.ctx, &store.WebhookAttemptParams{
		DeliveryID: "msg_nope", Status: store.WebhookDelivered, Now: t0, Attempt: store.WebhookAttemptRow{Attempt: 1, Owner: "node-a", At: t0},
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
	require.Empty(t, list[0].ClaimedBy, "the attempt ended the claim")
	require.Equal(t, []store.WebhookAttemptRow{
		{Attempt: 1, Owner: "node-a", At: at(time.Second), StatusCode: 500, Duration: 3 * time.Millisecond},
		{Attempt: 2, Owner: "node-b", At: at(time.Minute), StatusCode: 410},
	}, list[0].AttemptList)
	list, err = h.s.WebhookDeliveryList(h.ctx, &store.WebhookDeliveryListParams{BeforePos: list[0].Pos})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "msg_late", list[0].ID)
	require.Equal(t, store.WebhookDisabled, list[0].Status)
	require.Empty(t, list[0].AttemptList)
}

// claimTTL is how long the suite's claims last.
const claimTTL = 30 * time.Second

// claimDue claims up to limit due deliveries for owner at now, for
// claimTTL, and requires success.
func (h *harness) claimDue(owner string, now time.Time, limit int) []*store.WebhookDeliveryRow {
	h.t.Helper()
	rows, err := h.s.WebhookClaimDue(h.ctx, &store.WebhookClaimParams{Owner: owner, Now: now, Until: now.Add(claimTTL), Limit: limit})
	require.NoError(h.t, err, "claim for %s", owner)
	return rows
}

func deliveryIDs(rows []*store.WebhookDeliveryRow) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// deliveryByID returns one delivery from the full list, with its attempts.
func (h *harness) deliveryByID(id string) *store.WebhookDeliveryRow {
	h.t.Helper()
	list, err := h.s.WebhookDeliveryList(h.ctx, &store.WebhookDeliveryListParams{Limit: 1000})
	require.NoError(h.t, err)
	for _, r := range list {
		if r.ID == id {
			return r
		}
	}
	require.FailNow(h.t, "no such delivery", id)
	return nil
}

// attempt returns params recording attempt n of id by owner at now, as
// delivered.
func attempt(id, owner string, n int, now time.Time) *store.WebhookAttemptParams {
	return &store.WebhookAttemptParams{
		DeliveryID: id, Status: store.WebhookDelivered, Now: now,
		Attempt: store.WebhookAttemptRow{Attempt: n, Owner: owner, At: now, StatusCode: 200},
	}
}

// requireInvalid requires an input error that names field and is none of
// the sentinels.
func requireInvalid(t *testing.T, err error, field string) {
	t.Helper()
	require.Error(t, err)
	require.Contains(t, err.Error(), field)
	for _, sentinel := range []error{store.ErrNotFound, store.ErrConflict, store.ErrLeaseLost, store.ErrClosed} {
		require.NotErrorIs(t, err, sentinel, "bad input is not a %v", sentinel)
	}
}

// testWebhookClaimRules: a claim takes due pending deliveries earliest
// first, up to its limit, and moves their next attempt to the claim's end;
// nobody, the owner included, claims a claimed delivery again while the
// claim lasts; bad input names its field.
func testWebhookClaimRules(t *testing.T, h *harness) {
	claim := func(p *store.WebhookClaimParams) error { _, err := h.s.WebhookClaimDue(h.ctx, p); return err }
	requireInvalid(t, claim(nil), "params")
	requireInvalid(t, claim(&store.WebhookClaimParams{Now: t0, Until: at(time.Second), Limit: 1}), "owner")
	requireInvalid(t, claim(&store.WebhookClaimParams{Owner: "a", Until: at(time.Second), Limit: 1}), "now")
	requireInvalid(t, claim(&store.WebhookClaimParams{Owner: "a", Now: t0, Until: t0, Limit: 1}), "until")
	requireInvalid(t, claim(&store.WebhookClaimParams{Owner: "a", Now: t0, Until: at(time.Second)}), "limit")
	requireInvalid(t, claim(&store.WebhookClaimParams{Owner: "a", Now: t0, Until: at(time.Second), Limit: 1001}), "limit")
	require.Empty(t, h.claimDue("a", t0, 10), "nothing to claim")

	h.createSession("s1")
	_, err := h.s.WebhookSessionInit(h.ctx, "s1", "whsec_s")
	require.NoError(t, err)
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s1", 0, 4, []*store.WebhookDeliveryRow{
		delivery("msg_second", "", "s1", 2, at(2*time.Second)),
		delivery("msg_later", "", "s1", 4, at(time.Hour)),
		delivery("msg_first", "", "s1", 1, at(time.Second)),
		delivery("msg_third", "", "s1", 3, at(3*time.Second)),
	}))

	now := at(5 * time.Second)
	got := h.claimDue("node-a", now, 2)
	require.Equal(t, []string{"msg_first", "msg_second"}, deliveryIDs(got), "earliest first, up to the limit")
	for _, r := range got {
		require.Equal(t, "node-a", r.ClaimedBy)
		require.Equal(t, now.Add(claimTTL), *r.NextAttemptAt, "the claim moves the next attempt to its end")
		require.Equal(t, store.WebhookPending, r.Status)
		require.Zero(t, r.Attempts)
		require.Equal(t, "s1", r.SessionID)
		require.Equal(t, []byte(`{"type":"session.idle"}`), r.Body)
	}
	require.Equal(t, got[0], func() *store.WebhookDeliveryRow {
		r := h.deliveryByID("msg_first")
		r.AttemptList = nil
		return r
	}(), "the claim returns the delivery as stored")

	require.Equal(t, []string{"msg_third"}, deliveryIDs(h.claimDue("node-b", now, 10)))
	require.Empty(t, h.claimDue("node-b", now.Add(claimTTL-time.Microsecond), 10), "live claims are taken by nobody else")
	require.Empty(t, h.claimDue("node-a", now.Add(claimTTL-time.Microsecond), 10), "nor by their owner")
	due, err := h.s.WebhookDue(h.ctx, now.Add(claimTTL-time.Microsecond), 10)
	require.NoError(t, err)
	require.Empty(t, due, "a claimed delivery is not due")
	next, err := h.s.WebhookNextDue(h.ctx)
	require.NoError(t, err)
	require.Equal(t, now.Add(claimTTL), *next, "the earliest claim's end")
}

// testWebhookClaimExpiry: a claim that runs out with no attempt recorded
// (its owner died) leaves the delivery due, with the same id and attempts,
// for any owner; the first owner's late attempt is then refused, and the
// new claimer's recorded.
func testWebhookClaimExpiry(t *testing.T, h *harness) {
	h.createSession("s1")
	_, err := h.s.WebhookSessionInit(h.ctx, "s1", "whsec_s")
	require.NoError(t, err)
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s1", 0, 1, []*store.WebhookDeliveryRow{delivery("msg_1", "", "s1", 1, t0)}))

	first := h.claimDue("dead-node", t0, 10)
	require.Len(t, first, 1)
	require.Empty(t, h.claimDue("node-b", at(claimTTL-time.Microsecond), 10), "not before the claim ends")
	again := h.claimDue("node-b", at(claimTTL), 10)
	require.Len(t, again, 1, "due again once the claim has ended")
	require.Equal(t, first[0].ID, again[0].ID, "the same webhook-id")
	require.Equal(t, first[0].Attempts+1, again[0].Attempts, "the attempt in flight under the dead claim counts")
	require.Equal(t, "node-b", again[0].ClaimedBy)
	require.Equal(t, at(2*claimTTL), *again[0].NextAttemptAt)
	lost := store.WebhookAttemptRow{Attempt: 1, Owner: "dead-node", At: at(claimTTL), Error: store.LostAttemptError}
	require.Equal(t, []store.WebhookAttemptRow{lost}, h.deliveryByID("msg_1").AttemptList,
		"the log shows the request that may have reached the receiver")

	// The dead node was only slow: its attempt arrives after the takeover.
	err = h.s.WebhookRecordAttempt(h.ctx, attempt("msg_1", "dead-node", 1, at(claimTTL+time.Second)))
	require.ErrorIs(t, err, store.ErrLeaseLost)
	row := h.deliveryByID("msg_1")
	require.Equal(t, []store.WebhookAttemptRow{lost}, row.AttemptList, "a refused attempt writes nothing")
	require.Equal(t, store.WebhookPending, row.Status)
	require.Equal(t, "node-b", row.ClaimedBy, "the claim stays the new claimer's")

	require.NoError(t, h.s.WebhookRecordAttempt(h.ctx, attempt("msg_1", "node-b", 2, at(claimTTL+2*time.Second))))
	row = h.deliveryByID("msg_1")
	require.Equal(t, store.WebhookDelivered, row.Status)
	require.Nil(t, row.NextAttemptAt)
	require.Empty(t, row.ClaimedBy)
	require.Equal(t, []store.WebhookAttemptRow{lost, {Attempt: 2, Owner: "node-b", At: at(claimTTL + 2*time.Second), StatusCode: 200}}, row.AttemptList)
	require.Empty(t, h.claimDue("node-c", at(time.Hour), 10), "a delivered delivery is never claimed")
}

// testWebhookRecordNonClaimer: only the attempt made under the delivery's
// current claim is recorded. Another owner's, an unclaimed delivery's, and
// an owner's stale attempt (its own later claim's attempt was recorded
// first) are refused with ErrLeaseLost and write nothing; a claim that
// expired but was not taken still records; bad input names its field.
func testWebhookRecordNonClaimer(t *testing.T, h *harness) {
	h.createSession("s1")
	_, err := h.s.WebhookSessionInit(h.ctx, "s1", "whsec_s")
	require.NoError(t, err)
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s1", 0, 2, []*store.WebhookDeliveryRow{
		delivery("msg_1", "", "s1", 1, t0), delivery("msg_2", "", "s1", 2, at(time.Hour)),
	}))

	record := func(p *store.WebhookAttemptParams) error { return h.s.WebhookRecordAttempt(h.ctx, p) }
	noOwner := attempt("msg_1", "", 1, t0)
	requireInvalid(t, record(noOwner), "owner")
	zero := attempt("msg_1", "node-a", 0, t0)
	requireInvalid(t, record(zero), "attempt")

	require.ErrorIs(t, record(attempt("msg_2", "node-a", 1, t0)), store.ErrLeaseLost, "never claimed")
	require.Len(t, h.claimDue("node-a", t0, 10), 1)
	require.ErrorIs(t, record(attempt("msg_1", "node-b", 1, t0)), store.ErrLeaseLost, "claimed by another owner")
	require.ErrorIs(t, record(attempt("msg_1", "node-a", 2, t0)), store.ErrLeaseLost, "not the claim's attempt number")
	row := h.deliveryByID("msg_1")
	require.Empty(t, row.AttemptList)
	require.Equal(t, "node-a", row.ClaimedBy)
	require.Zero(t, row.Attempts)

	// node-a's claim has expired, but nobody took it: its attempt counts.
	retry := at(time.Hour)
	p := attempt("msg_1", "node-a", 1, at(time.Minute))
	p.Status, p.NextAttemptAt, p.Attempt.StatusCode = store.WebhookPending, &retry, 503
	require.NoError(t, record(p))
	require.ErrorIs(t, record(p), store.ErrLeaseLost, "the same attempt twice")

	// node-a claims again; an attempt of its earlier claim (number 1) is
	// stale, the one of this claim (number 2) counts.
	require.Len(t, h.claimDue("node-a", retry, 1), 1)
	require.ErrorIs(t, record(attempt("msg_1", "node-a", 1, retry)), store.ErrLeaseLost)
	require.NoError(t, record(attempt("msg_1", "node-a", 2, retry)))
	row = h.deliveryByID("msg_1")
	require.Equal(t, store.WebhookDelivered, row.Status)
	require.Equal(t, 2, row.Attempts)
	require.Equal(t, []store.WebhookAttemptRow{
		{Attempt: 1, Owner: "node-a", At: at(time.Minute), StatusCode: 503},
		{Attempt: 2, Owner: "node-a", At: retry, StatusCode: 200},
	}, row.AttemptList)
}

// testWebhookRecordDisabledInFlight: a delivery disabled while its attempt
// is in flight (its endpoint deleted) stays disabled; the attempt is
// recorded all the same and ends the claim.
func testWebhookRecordDisabledInFlight(t *testing.T, h *harness) {
	require.NoError(t, h.s.WebhookEndpointCreate(h.ctx, &store.WebhookEndpointRow{
		ID: "whe_a", Project: project, URL: "https://a.example.com/", Secrets: []string{"whsec_a"}, CreatedAt: t0,
	}))
	h.createSession("s1")
	_, err := h.s.WebhookSessionInit(h.ctx, "s1", "whsec_s")
	require.NoError(t, err)
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s1", 0, 1, []*store.WebhookDeliveryRow{delivery("msg_1", "whe_a", "s1", 1, t0)}))
	require.Len(t, h.claimDue("node-a", t0, 10), 1)
	require.NoError(t, h.s.WebhookEndpointDelete(h.ctx, "whe_a", at(time.Second)))

	retry := at(time.Minute)
	p := attempt("msg_1", "node-a", 1, at(2*time.Second))
	p.Status, p.NextAttemptAt, p.Attempt.StatusCode = store.WebhookPending, &retry, 500
	require.NoError(t, h.s.WebhookRecordAttempt(h.ctx, p))
	row := h.deliveryByID("msg_1")
	require.Equal(t, store.WebhookDisabled, row.Status, "not revived by the attempt")
	require.Nil(t, row.NextAttemptAt)
	require.Empty(t, row.ClaimedBy)
	require.Len(t, row.AttemptList, 1)
	require.Empty(t, h.claimDue("node-a", at(time.Hour), 10))
}

// testWebhookGoneDisablesAnotherSessionsURL: a 410 to a delivery of one
// session sent to another's webhook_url (a sub-agent's notification, to
// its root's) disables that session's webhook_url, not the delivery's
// session's, and the pending deliveries of both to it; a third session's
// stay pending.
func testWebhookGoneDisablesAnotherSessionsURL(t *testing.T, h *harness) {
	for _, id := range []string{"root", "child", "other"} {
		h.createSession(id)
		_, err := h.s.WebhookSessionInit(h.ctx, id, "whsec_"+id)
		require.NoError(t, err)
	}
	later := at(time.Hour)
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "root", 0, 1, []*store.WebhookDeliveryRow{delivery("msg_root", "", "root", 1, later)}))
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "child", 0, 2, []*store.WebhookDeliveryRow{
		delivery("msg_child_1", "", "child", 1, t0), delivery("msg_child_2", "", "child", 2, later),
	}))
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "other", 0, 1, []*store.WebhookDeliveryRow{delivery("msg_other", "", "other", 1, later)}))
	require.Equal(t, []string{"msg_child_1"}, deliveryIDs(h.claimDue("node-a", t0, 10)))

	p := attempt("msg_child_1", "node-a", 1, at(time.Second))
	p.Status, p.Attempt.StatusCode, p.DisableTarget, p.TargetSessionID = store.WebhookDisabled, 410, true, "root"
	require.NoError(t, h.s.WebhookRecordAttempt(h.ctx, p))

	for id, disabled := range map[string]bool{"root": true, "child": false, "other": false} {
		ws, err := h.s.WebhookSessionInit(h.ctx, id, "whsec_x")
		require.NoError(t, err)
		require.Equal(t, disabled, ws.DisabledAt != nil, "webhook_url of %s disabled", id)
	}
	for id, status := range map[string]string{
		"msg_child_1": store.WebhookDisabled, "msg_child_2": store.WebhookDisabled,
		"msg_root": store.WebhookDisabled, "msg_other": store.WebhookPending,
	} {
		require.Equal(t, status, h.deliveryByID(id).Status, id)
	}
}

// testWebhookReleaseClaims: releasing an owner's claims makes its pending
// deliveries due at once (or when they were due, if earlier) and touches
// nobody else's claims. A release after a graceful stop records nothing;
// one at start-up, after a crash, records the attempts that were in
// flight.
func testWebhookReleaseClaims(t *testing.T, h *harness) {
	_, err := h.s.WebhookReleaseClaims(h.ctx, "", t0, false)
	requireInvalid(t, err, "owner")
	h.createSession("s1")
	_, err = h.s.WebhookSessionInit(h.ctx, "s1", "whsec_s")
	require.NoError(t, err)
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s1", 0, 4, []*store.WebhookDeliveryRow{
		delivery("msg_1", "", "s1", 1, t0), delivery("msg_2", "", "s1", 2, t0),
		delivery("msg_3", "", "s1", 3, t0), delivery("msg_4", "", "s1", 4, at(time.Second)),
	}))
	require.Equal(t, []string{"msg_1", "msg_2"}, deliveryIDs(h.claimDue("node-a", t0, 2)))
	require.Equal(t, []string{"msg_3"}, deliveryIDs(h.claimDue("node-b", t0, 1)))
	// node-a claims msg_4 at 1 s; its claim on it will still be live when
	// released, unlike the first two (which end at 30 s).
	require.Equal(t, []string{"msg_4"}, deliveryIDs(h.claimDue("node-a", at(time.Second), 1)))

	n, err := h.s.WebhookReleaseClaims(h.ctx, "node-a", at(claimTTL+time.Second), false)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for id, due := range map[string]time.Time{
		"msg_1": at(claimTTL), "msg_2": at(claimTTL), // expired: when they were due again
		"msg_4": at(claimTTL + time.Second), // live: due now
	} {
		row := h.deliveryByID(id)
		require.Empty(t, row.ClaimedBy, id)
		require.Equal(t, due, *row.NextAttemptAt, id)
		require.Zero(t, row.Attempts, "abandoned by a graceful stop: not an attempt")
		require.Empty(t, row.AttemptList, id)
	}
	require.Equal(t, "node-b", h.deliveryByID("msg_3").ClaimedBy, "another owner's claim stays")
	n, err = h.s.WebhookReleaseClaims(h.ctx, "node-a", at(claimTTL+time.Second), true)
	require.NoError(t, err)
	require.Zero(t, n)
	require.ErrorIs(t, h.s.WebhookRecordAttempt(h.ctx, attempt("msg_1", "node-a", 1, at(time.Minute))), store.ErrLeaseLost,
		"a released claim records nothing")
	require.NoError(t, h.s.WebhookRecordAttempt(h.ctx, attempt("msg_3", "node-b", 1, at(time.Minute))))
	got := h.claimDue("node-c", at(claimTTL+time.Second), 10)
	require.ElementsMatch(t, []string{"msg_1", "msg_2", "msg_4"}, deliveryIDs(got))

	// node-c dies with its three attempts in flight and starts again: its
	// release at start-up records them, as lost, and counts them.
	n, err = h.s.WebhookReleaseClaims(h.ctx, "node-c", at(claimTTL+2*time.Second), true)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for _, id := range []string{"msg_1", "msg_2", "msg_4"} {
		row := h.deliveryByID(id)
		require.Empty(t, row.ClaimedBy, id)
		require.Equal(t, 1, row.Attempts, id)
		require.Equal(t, []store.WebhookAttemptRow{{Attempt: 1, Owner: "node-c", At: at(claimTTL + 2*time.Second), Error: store.LostAttemptError}}, row.AttemptList, id)
		require.Equal(t, store.WebhookPending, row.Status, id)
	}
	require.ErrorIs(t, h.s.WebhookRecordAttempt(h.ctx, attempt("msg_1", "node-c", 1, at(time.Minute))), store.ErrLeaseLost,
		"the dead run's attempt, arriving late, records nothing")
}

// testWebhookClaimConcurrent: owners claiming at the same time, and
// recording each attempt at once, never get the same delivery: every
// delivery is claimed exactly once and no attempt is refused.
func testWebhookClaimConcurrent(t *testing.T, h *harness) {
	const (
		deliveries = 60
		owners     = 4
	)
	h.createSession("s1")
	_, err := h.s.WebhookSessionInit(h.ctx, "s1", "whsec_s")
	require.NoError(t, err)
	rows := make([]*store.WebhookDeliveryRow, deliveries)
	for i := range rows {
		rows[i] = delivery(fmt.Sprintf("msg_%02d", i), "", "s1", int64(i+1), at(time.Duration(i)*time.Millisecond))
	}
	require.NoError(t, h.s.WebhookEnqueue(h.ctx, "s1", 0, deliveries, rows))

	now := at(time.Second)
	var (
		mu      sync.Mutex
		claimed = map[string]string{} // id -> owner
		errs    []error
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for o := range owners {
		owner := fmt.Sprintf("node-%d", o)
		wg.Go(func() {
			<-start
			for {
				got, err := h.s.WebhookClaimDue(h.ctx, &store.WebhookClaimParams{Owner: owner, Now: now, Until: now.Add(claimTTL), Limit: 3})
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("claim for %s: %w", owner, err))
					mu.Unlock()
					return
				}
				if len(got) == 0 {
					return
				}
				for _, r := range got {
					mu.Lock()
					if prev, dup := claimed[r.ID]; dup {
						errs = append(errs, fmt.Errorf("%s claimed %s, already claimed by %s", owner, r.ID, prev))
					}
					claimed[r.ID] = owner
					mu.Unlock()
					if err := h.s.WebhookRecordAttempt(h.ctx, attempt(r.ID, owner, 1, now)); err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("record %s by %s: %w", r.ID, owner, err))
						mu.Unlock()
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Len(t, claimed, deliveries, "every delivery claimed once")
	list, err := h.s.WebhookDeliveryList(h.ctx, &store.WebhookDeliveryListParams{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, list, deliveries)
	for _, r := range list {
		require.Equal(t, store.WebhookDelivered, r.Status, r.ID)
		require.Len(t, r.AttemptList, 1, r.ID)
		require.Equal(t, claimed[r.ID], r.AttemptList[0].Owner, r.ID)
	}
}

// testWebhookEnqueueConcurrent: two scanners of one session enqueue from
// the same cursor at the same time, one reading further than the other.
// Exactly one wins; the other gets ErrConflict having written nothing,
// re-reads the cursor and enqueues what lies past it. Whoever wins, every
// notification is in the outbox once and the cursor ends at the furthest
// read, so concurrent scans neither duplicate nor lose anything.
func testWebhookEnqueueConcurrent(t *testing.T, h *harness) {
	const rounds = 20
	type scan struct {
		cursor int64
		rows   func(sessionID string, from int64) []*store.WebhookDeliveryRow
	}
	// Notifications at seqs 2, 3 (both scanners read them) and 5 (only the
	// second read that far).
	rowsUpTo := func(limit int64) func(string, int64) []*store.WebhookDeliveryRow {
		return func(sessionID string, from int64) []*store.WebhookDeliveryRow {
			var out []*store.WebhookDeliveryRow
			for _, seq := range []int64{2, 3, 5} {
				if seq > from && seq <= limit {
					out = append(out, delivery(fmt.Sprintf("msg_%s_%d", sessionID, seq), "", sessionID, seq, t0))
				}
			}
			return out
		}
	}
	scans := []scan{{cursor: 3, rows: rowsUpTo(3)}, {cursor: 5, rows: rowsUpTo(5)}}
	for round := range rounds {
		id := fmt.Sprintf("s%02d", round)
		h.createSession(id)
		_, err := h.s.WebhookSessionInit(h.ctx, id, "whsec_s")
		require.NoError(t, err)
		var (
			wg        sync.WaitGroup
			conflicts = make([]bool, len(scans))
			errs      = make([]error, len(scans))
		)
		start := make(chan struct{})
		for i, sc := range scans {
			wg.Go(func() {
				<-start
				err := h.s.WebhookEnqueue(h.ctx, id, 0, sc.cursor, sc.rows(id, 0))
				if errors.Is(err, store.ErrConflict) {
					// The scanners' protocol: re-read the cursor, go on
					// from there.
					conflicts[i] = true
					ws, rerr := h.s.WebhookSessionInit(h.ctx, id, "whsec_s")
					if rerr != nil {
						errs[i] = rerr
						return
					}
					if ws.Cursor >= sc.cursor {
						return
					}
					err = h.s.WebhookEnqueue(h.ctx, id, ws.Cursor, sc.cursor, sc.rows(id, ws.Cursor))
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "round %d", round)
		require.True(t, conflicts[0] != conflicts[1], "round %d: exactly one scanner conflicts (%v)", round, conflicts)
		ws, err := h.s.WebhookSessionInit(h.ctx, id, "whsec_s")
		require.NoError(t, err)
		require.Equal(t, int64(5), ws.Cursor, "round %d", round)
	}
	list, err := h.s.WebhookDeliveryList(h.ctx, &store.WebhookDeliveryListParams{Limit: 1000})
	require.NoError(t, err)
	got := map[string]int{}
	for _, r := range list {
		got[r.ID]++
	}
	require.Len(t, got, 3*rounds, "every notification enqueued")
	for id, n := range got {
		require.Equal(t, 1, n, id)
	}
}
