package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// auditHarness is a server with a bootstrap key, the audit log recorded
// in its store and written as JSON lines to the returned buffer, and a
// manual clock.
func auditHarness(t *testing.T, cfg server.Config) (*harness, *syncBuffer, *apptest.Clock) {
	t.Helper()
	lines := &syncBuffer{}
	clock := apptest.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	cfg.APIKeys = []string{"boot-key"}
	cfg.AuditLog = slog.New(slog.NewJSONHandler(lines, nil))
	cfg.Now = clock.Now
	return newHarness(t, harnessOpts{cfg: &cfg}), lines, clock
}

// as sends a request with token as its bearer key ("": none).
func (h *harness) as(token, method, path, body string) *response {
	h.t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	header := map[string]string{}
	if token != "" {
		header["Authorization"] = "Bearer " + token
	}
	return h.do(method, path, b, header)
}

// auditEntries reads the whole audit log as the bootstrap admin.
func (h *harness) auditEntries(query string) lt.List[lt.AuditEntry] {
	h.t.Helper()
	r := h.as("boot-key", http.MethodGet, "/v1/audit"+query, "")
	require.Equal(h.t, http.StatusOK, r.status, "body: %s", r.body)
	return decode[lt.List[lt.AuditEntry]](h.t, r)
}

// TestAuditLog: after a scripted sequence of allowed and refused requests
// the audit log holds exactly the state-changing and the refused ones,
// each with who (or the refused key's prefix, never the key), method,
// route, targets and status; reads that succeed are not in it. Each entry
// is also one JSON line of the audit logger.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	h, lines, clock := auditHarness(t, server.Config{})
	boot := lt.Actor{Name: "bootstrap", Role: lt.RoleAdmin}

	reader := h.createKey(`{"name": "rita", "role": "reader"}`)                                  // 1: POST 201
	operator := h.createKey(`{"name": "otto", "role": "operator"}`)                              // 2: POST 201
	require.Equal(t, http.StatusOK, h.as(reader.Key, http.MethodGet, "/v1/sessions", "").status) // a read: not logged
	clock.Advance(time.Second)
	r := h.as(reader.Key, http.MethodPost, "/v1/sessions", `{}`) // 3: refused by role
	requireError(t, r, http.StatusForbidden, lt.CodeForbidden, "")
	r = h.as(operator.Key, http.MethodPost, "/v1/sessions/ses_nope/cancel", `{}`) // 4: allowed, unknown id
	requireError(t, r, http.StatusNotFound, lt.CodeNotFound, "")
	badKey := "lh_zzzzzzzzqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq"
	r = h.as(badKey, http.MethodGet, "/v1/sessions", "") // 5: a bad key, on a read
	requireError(t, r, http.StatusUnauthorized, lt.CodeUnauthorized, "")
	r = h.as("", http.MethodDelete, "/v1/keys/"+operator.ID, "") // 6: no key at all
	requireError(t, r, http.StatusUnauthorized, lt.CodeUnauthorized, "")
	clock.Advance(time.Second)
	r = h.as("boot-key", http.MethodDelete, "/v1/keys/"+operator.ID, "") // 7: revoked
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	r = h.as(operator.Key, http.MethodPost, "/v1/sessions/ses_nope/cancel", `{}`) // 8: a revoked key
	requireError(t, r, http.StatusUnauthorized, lt.CodeUnauthorized, "")
	r = h.as(reader.Key, http.MethodGet, "/v1/audit", "") // 9: the log is the admins'
	requireError(t, r, http.StatusForbidden, lt.CodeForbidden, "")

	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	readerActor := lt.Actor{KeyID: reader.ID, Name: "rita", Role: lt.RoleReader}
	want := []lt.AuditEntry{
		{Time: t0, Actor: &boot, Method: "POST", Route: "POST /v1/keys", Status: 201},
		{Time: t0, Actor: &boot, Method: "POST", Route: "POST /v1/keys", Status: 201},
		{Time: t0.Add(time.Second), Actor: &readerActor, Method: "POST", Route: "POST /v1/sessions", Status: 403},
		{Time: t0.Add(time.Second), Actor: &lt.Actor{KeyID: operator.ID, Name: "otto", Role: lt.RoleOperator}, Method: "POST",
			Route: "POST /v1/sessions/{id}/cancel", Targets: map[string]string{"session": "ses_nope"}, Status: 404},
		{Time: t0.Add(time.Second), KeyPrefix: "lh_zzzzzzzz", Method: "GET", Route: "GET /v1/sessions", Status: 401},
		{Time: t0.Add(time.Second), Method: "DELETE", Route: "DELETE /v1/keys/{id}", Targets: map[string]string{"key": operator.ID}, Status: 401},
		{Time: t0.Add(2 * time.Second), Actor: &boot, Method: "DELETE", Route: "DELETE /v1/keys/{id}", Targets: map[string]string{"key": operator.ID}, Status: 204},
		{Time: t0.Add(2 * time.Second), KeyPrefix: operator.Prefix, Method: "POST", Route: "POST /v1/sessions/{id}/cancel",
			Targets: map[string]string{"session": "ses_nope"}, Status: 401},
		{Time: t0.Add(2 * time.Second), Actor: &readerActor, Method: "GET", Route: "GET /v1/audit", Status: 403},
	}
	got := h.auditEntries("")
	require.Nil(t, got.NextCursor, "one page")
	require.Len(t, got.Data, len(want))
	var prev int64
	for i := range got.Data {
		e := got.Data[i]
		require.Greater(t, e.Seq, prev, "entry %d: numbered in order", i)
		prev = e.Seq
		require.Equal(t, "127.0.0.1", e.Remote, "entry %d", i)
		require.Len(t, e.RequestID, 16, "entry %d: the request's X-Request-Id", i)
		e.Seq, e.Remote, e.RequestID = 0, "", ""
		require.Equal(t, want[i], e, "entry %d", i)
	}

	// Nothing of a refused key but its prefix is kept.
	raw := h.as("boot-key", http.MethodGet, "/v1/audit", "")
	require.NotContains(t, string(raw.body), badKey)
	require.NotContains(t, string(raw.body), operator.Key)
	require.NotContains(t, lines.String(), badKey)
	require.NotContains(t, lines.String(), operator.Key)

	// One JSON line per entry, with the entry's seq, and the same fields.
	var logged []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(lines.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "line %q", line)
		require.Equal(t, "audit", m["msg"])
		logged = append(logged, m)
	}
	require.Len(t, logged, len(want))
	require.EqualValues(t, got.Data[3].Seq, logged[3]["seq"])
	require.Equal(t, map[string]any{"key_id": operator.ID, "name": "otto", "role": "operator"}, logged[3]["actor"])
	require.Equal(t, map[string]any{"session": "ses_nope"}, logged[3]["targets"])
	require.Equal(t, "POST /v1/sessions/{id}/cancel", logged[3]["route"])
	require.EqualValues(t, 404, logged[3]["status"])
	require.Equal(t, "lh_zzzzzzzz", logged[4]["key_prefix"])
	require.Equal(t, got.Data[4].RequestID, logged[4]["request_id"])

	// Filters and pages.
	byName := h.auditEntries("?actor=rita")
	require.Len(t, byName.Data, 2)
	require.Equal(t, http.StatusForbidden, byName.Data[0].Status)
	byPrefix := h.auditEntries("?actor=lh_zzzzzzzz")
	require.Len(t, byPrefix.Data, 1)
	require.Equal(t, got.Data[4].Seq, byPrefix.Data[0].Seq)
	since := h.auditEntries("?since=" + t0.Add(2*time.Second).Format(time.RFC3339))
	require.Len(t, since.Data, 3)
	page := h.auditEntries("?limit=4")
	require.Len(t, page.Data, 4)
	require.NotNil(t, page.NextCursor)
	rest := h.auditEntries("?limit=4&cursor=" + *page.NextCursor)
	require.Len(t, rest.Data, 4)
	require.Equal(t, got.Data[4].Seq, rest.Data[0].Seq)

	// Bad parameters are 400s naming them (and are reads: not logged).
	requireError(t, h.as("boot-key", http.MethodGet, "/v1/audit?since=yesterday", ""), http.StatusBadRequest, lt.CodeInvalidRequest, "since")
	requireError(t, h.as("boot-key", http.MethodGet, "/v1/audit?cursor=x", ""), http.StatusBadRequest, lt.CodeInvalidRequest, "cursor")
	requireError(t, h.as("boot-key", http.MethodGet, "/v1/audit?limit=0", ""), http.StatusBadRequest, lt.CodeInvalidRequest, "limit")
	require.Len(t, h.auditEntries("").Data, len(want), "reads are not entries")
}

// failingAudit is an audit store that is down.
type failingAudit struct{}

func (failingAudit) RecordAudit(_ context.Context, _ *lt.AuditEntry) (int64, error) {
	return 0, errors.New("the database is down")
}

// TestAuditStoreFailure: an entry the store cannot record does not change
// the response; the server log has the entry, at error level.
func TestAuditStoreFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{cfg: &server.Config{APIKeys: []string{"boot-key"}, Audit: failingAudit{}}})
	k := h.createKey(`{"name": "alice", "role": "reader"}`)
	require.NotEmpty(t, k.Key)
	log := h.logs.String()
	require.Contains(t, log, `level=ERROR msg="audit entry not stored; this line is its record"`)
	require.Contains(t, log, `route="POST /v1/keys"`)
	require.Contains(t, log, "the database is down")
	require.NotContains(t, log, k.Key)
}

// TestAuditRefusedByOrigin: a valid key refused by the cross-site rule is
// recorded as its holder (and spends no address token); a refused
// request's odd method is kept short.
func TestAuditRefusedByOrigin(t *testing.T) {
	t.Parallel()
	h, _, _ := auditHarness(t, server.Config{})
	k := h.createKey(`{"name": "otto", "role": "operator"}`)
	r := h.do(http.MethodPost, "/v1/sessions", []byte(`{}`), map[string]string{
		"Authorization": "Bearer " + k.Key, "Origin": "https://evil.example"})
	requireError(t, r, http.StatusForbidden, lt.CodeForbidden, "Origin")
	long := strings.Repeat("X", 100)
	r = h.do(long, "/v1/sessions", nil, nil)
	requireError(t, r, http.StatusUnauthorized, lt.CodeUnauthorized, "")

	entries := h.auditEntries("").Data
	require.Len(t, entries, 3)
	require.Equal(t, &lt.Actor{KeyID: k.ID, Name: "otto", Role: lt.RoleOperator}, entries[1].Actor)
	require.Equal(t, http.StatusForbidden, entries[1].Status)
	require.Equal(t, strings.Repeat("X", 32), entries[2].Method)
	require.Equal(t, "", entries[2].Route, "no route has that method")
}
