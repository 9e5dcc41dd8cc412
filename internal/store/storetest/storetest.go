package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

// Run runs the conformance suite against the driver that newStore opens.
// newStore must return a new, empty store that no other test uses; it may or
// may not be migrated (the suite calls Migrate), and it must arrange for the
// store to be closed when t ends (t.Cleanup). The suite may close it earlier,
// so a second Close must be harmless. Each subtest gets its own store and
// runs in parallel with the others.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"MigrateIsIdempotent", testMigrate},
		{"AgentVersions", testAgentVersions},
		{"AgentConcurrentInsert", testAgentConcurrentInsert},
		{"SessionCreate", testSessionCreate},
		{"SessionCreateDuplicate", testSessionCreateDuplicate},
		{"SessionCreateWithWebhook", testSessionCreateWithWebhook},
		{"SessionList", testSessionList},
		{"SessionCountByStatus", testSessionCountByStatus},
		{"SessionProjects", testSessionProjects},
		{"SessionLastSeq", testSessionLastSeq},
		{"AppendGapFree", testAppendGapFree},
		{"AppendExpectedSeqConflict", testAppendConflict},
		{"AppendConcurrentSameSeq", testAppendConcurrentSameSeq},
		{"AppendConcurrentRetries", testAppendConcurrentRetries},
		{"AppendWritesProjection", testAppendProjection},
		{"EventListAfterLimit", testEventList},
		{"Fencing", testFencing},
		{"CreateClaimed", testCreateClaimed},
		{"ClaimRules", testClaimRules},
		{"ClaimLimitAndEpoch", testClaimLimitAndEpoch},
		{"ReleaseLeaseViaAppend", testReleaseViaAppend},
		{"LeaseRelease", testLeaseRelease},
		{"LeaseHandOver", testLeaseHandOver},
		{"RunnerSessions", testRunnerSessions},
		{"RunnerProtocol", testRunnerProtocol},
		{"LeaseExpireOwner", testLeaseExpireOwner},
		{"Docs", testDocs},
		{"DocOfAnotherSessionConflicts", testDocConflict},
		{"ActionListAll", testActionListAll},
		{"ActionGetByID", testActionGetByID},
		{"ActionPendingStats", testActionPendingStats},
		{"Blobs", testBlobs},
		{"BlobPutMany", testBlobPutMany},
		{"BlobProjects", testBlobProjects},
		{"BlobOwners", testBlobOwners},
		{"BlobOwnAll", testBlobOwnAll},
		{"Idempotency", testIdempotency},
		{"IdempotencyClaims", testIdempotencyClaims},
		{"IdempotencyClaimOnce", testIdempotencyClaimOnce},
		{"IdempotencyPrune", testIdempotencyPrune},
		{"Secrets", testSecrets},
		{"SecretPutInvalid", testSecretPutInvalid},
		{"SecretConcurrentPut", testSecretConcurrentPut},
		{"SecretNotifications", testSecretNotifications},
		{"SecretsClosed", testSecretsClosed},
		{"SecretProjects", testSecretProjects},
		{"AgentProjects", testAgentProjects},
		{"WebhookProjects", testWebhookProjects},
		{"APIKeys", testAPIKeys},
		{"APIKeyCreateInvalid", testAPIKeyCreateInvalid},
		{"APIKeysClosed", testAPIKeysClosed},
		{"Audit", testAudit},
		{"AuditInvalid", testAuditInvalid},
		{"AuditPruneConcurrent", testAuditPruneConcurrent},
		{"AuditClosed", testAuditClosed},
		{"Nodes", testNodes},
		{"Runners", testRunners},
		{"WebhookEndpoints", testWebhookEndpoints},
		{"WebhookOutbox", testWebhookOutbox},
		{"WebhookEnqueueConcurrent", testWebhookEnqueueConcurrent},
		{"WebhookClaimRules", testWebhookClaimRules},
		{"WebhookClaimExpiry", testWebhookClaimExpiry},
		{"WebhookClaimConcurrent", testWebhookClaimConcurrent},
		{"WebhookRecordNonClaimer", testWebhookRecordNonClaimer},
		{"WebhookRecordDisabledInFlight", testWebhookRecordDisabledInFlight},
		{"WebhookGoneDisablesAnotherSessionsURL", testWebhookGoneDisablesAnotherSessionsURL},
		{"WebhookReleaseClaims", testWebhookReleaseClaims},
		{"SessionCreateParentAt", testSessionCreateParentAt},
		{"TreeBudgetPut", testTreeBudgetPut},
		{"TreeLimitsOfTheLatestJournal", testTreeLimitsOfTheLatestJournal},
		{"TreeReserveCost", testTreeReserveCost},
		{"TreeReserveCounts", testTreeReserveCounts},
		{"TreeReservationLease", testTreeReservationLease},
		{"TreeReserveReplacesTheSessionsEarlier", testTreeReserveReplacesTheSessionsEarlier},
		{"TreeSettleAtomic", testTreeSettleAtomic},
		{"MonitorTree", testMonitorTree},
		{"MonitorTreeConcurrent", testMonitorTreeConcurrent},
		{"TreeReserveConcurrent", testTreeReserveConcurrent},
		{"SubscribeEvents", testSubscribeEvents},
		{"SubscribeCancel", testSubscribeCancel},
		{"LeaseHoldersAppendClaimsNothing", testLeaseHoldersAppendClaimsNothing},
		{"AppendKeepsWhatItDoesNotChange", testAppendKeepsWhatItDoesNotChange},
		{"NotFound", testNotFound},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			h := &harness{t: t, s: s, ctx: t.Context()}
			require.NoError(t, s.Migrate(h.ctx), "migrate")
			tc.fn(t, h)
		})
	}
}

// t0 is the suite's epoch; every time is t0 plus an offset, at microsecond
// precision.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr[T any](v T) *T { return &v }

// harness carries one subtest's store.
type harness struct {
	t   *testing.T
	s   store.Store
	ctx context.Context
}

// sessionOpt adjusts a session before it is created.
type sessionOpt func(*store.SessionCreateParams)

func runnable(p *store.SessionCreateParams) { p.Session.Runnable = true }

func wakeAt(t time.Time) sessionOpt {
	return func(p *store.SessionCreateParams) { p.Session.WakeAt = &t }
}

func createdAt(t time.Time) sessionOpt {
	return func(p *store.SessionCreateParams) {
		p.Session.CreatedAt = t
		p.Session.UpdatedAt = t
		for i := range p.Events {
			p.Events[i].Time = t
		}
	}
}

// createSession creates a session with one "session.created" event.
func (h *harness) createSession(id string, opts ...sessionOpt) []store.Event {
	h.t.Helper()
	p := &store.SessionCreateParams{
		Session: store.SessionRow{
			ID:           id,
			AgentName:    "agent",
			AgentVersion: 1,
			Status:       "queued",
			Spec:         json.RawMessage(`{"goal":"test"}`),
			State:        json.RawMessage(`{"status":"queued"}`),
			CreatedAt:    t0,
			UpdatedAt:    t0,
		},
		Events: []store.NewEvent{{Type: "session.created", Time: t0, Data: json.RawMessage(`{"id":"` + id + `"}`)}},
	}
	for _, o := range opts {
		o(p)
	}
	events, err := h.s.SessionCreate(h.ctx, p)
	require.NoError(h.t, err, "create session %s", id)
	return events
}

// appendParams returns params appending n events after expected.
func appendParams(id string, expected int64, n int) *store.EventAppendParams {
	p := &store.EventAppendParams{
		SessionID:   id,
		ExpectedSeq: expected,
		Status:      "running",
		State:       json.RawMessage(fmt.Sprintf(`{"seq":%d}`, expected+int64(n))),
		UpdatedAt:   at(time.Duration(expected+1) * time.Millisecond),
	}
	for i := range n {
		p.Events = append(p.Events, store.NewEvent{
			Type: "test.event",
			Time: at(time.Duration(expected+int64(i)+1) * time.Millisecond),
			Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, expected+int64(i)+1)),
		})
	}
	return p
}

// append appends n events after expected and requires success.
func (h *harness) append(id string, expected int64, n int, mod ...func(*store.EventAppendParams)) []store.Event {
	h.t.Helper()
	p := appendParams(id, expected, n)
	for _, m := range mod {
		m(p)
	}
	events, err := h.s.EventAppend(h.ctx, p)
	require.NoError(h.t, err, "append to %s after %d", id, expected)
	require.Len(h.t, events, n)
	return events
}

// sessionIDs lists the ids of the sessions SessionList gives for p.
func (h *harness) sessionIDs(p store.SessionListParams) []string {
	h.t.Helper()
	rows, err := h.s.SessionList(h.ctx, &p)
	require.NoError(h.t, err)
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
		if p.Project != "" {
			require.Equal(h.t, p.Project, r.Project, "session %s", r.ID)
		}
	}
	return ids
}

// actionIDs lists the ids of the actions ActionListAll gives for p.
func (h *harness) actionIDs(p store.ActionListParams) []string {
	h.t.Helper()
	rows, err := h.s.ActionListAll(h.ctx, &p)
	require.NoError(h.t, err)
	return docIDs(rows)
}

func (h *harness) session(id string) *store.SessionRow {
	h.t.Helper()
	row, err := h.s.SessionGet(h.ctx, id)
	require.NoError(h.t, err, "get session %s", id)
	return row
}

// allEvents reads a session's whole journal in pages of 7 (to cross page
// boundaries) and requires seqs 1..n without gaps.
func (h *harness) allEvents(id string) []store.Event {
	h.t.Helper()
	var all []store.Event
	for {
		page, err := h.s.EventList(h.ctx, id, int64(len(all)), 7)
		require.NoError(h.t, err)
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
	}
	for i, e := range all {
		require.Equal(h.t, int64(i+1), e.Seq, "seq at index %d", i)
		require.Equal(h.t, id, e.SessionID)
	}
	return all
}

func (h *harness) claim(owner string, now time.Time, ttl time.Duration, limit int) []store.Lease {
	h.t.Helper()
	leases, err := h.s.LeaseClaim(h.ctx, &store.LeaseClaimParams{
		Owner: owner, Now: now, ExpiresAt: now.Add(ttl), Limit: limit,
	})
	require.NoError(h.t, err, "claim for %s", owner)
	return leases
}

func leaseIDs(leases []store.Lease) []string {
	ids := make([]string, len(leases))
	for i, l := range leases {
		ids[i] = l.SessionID
	}
	return ids
}

func requireJSON(t *testing.T, want string, got json.RawMessage, msgAndArgs ...any) {
	t.Helper()
	require.JSONEq(t, want, string(got), msgAndArgs...)
}

func testMigrate(t *testing.T, h *harness) {
	require.NoError(t, h.s.Migrate(h.ctx), "second migrate")
	require.NoError(t, h.s.Migrate(h.ctx), "third migrate")
	require.NoError(t, h.s.Ping(h.ctx))
	// The schema works after re-running migrations.
	h.createSession("ses_migrate")
	require.NoError(t, h.s.Migrate(h.ctx))
	require.Equal(t, int64(1), h.session("ses_migrate").LastSeq)
}
