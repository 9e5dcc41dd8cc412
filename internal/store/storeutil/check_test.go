package storeutil

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

var (
	testTime = time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
	kinds    = map[store.DocKind]string{store.DocTurn: "turns"}
	lenient  = Checks{DocKinds: kinds}
	strict   = Checks{StrictText: true, DocKinds: kinds}
)

func validAppend() *store.EventAppendParams {
	return &store.EventAppendParams{
		SessionID: "ses_1", Status: "running", UpdatedAt: testTime,
		Events: []store.NewEvent{{Type: "e", Time: testTime, Data: json.RawMessage(`{}`)}},
	}
}

func TestChecksValidInputPasses(t *testing.T) {
	for _, c := range []Checks{lenient, strict} {
		require.NoError(t, c.EventAppend(validAppend()))
		require.NoError(t, c.LeaseClaim(&store.LeaseClaimParams{Owner: "w", Now: testTime, ExpiresAt: testTime.Add(time.Second), Limit: MaxClaim}))
		require.NoError(t, c.Lease(store.Lease{SessionID: "s", Owner: "w", Epoch: 1}))
		require.NoError(t, c.Blob("sha256", HexSHA256([]byte("x")), []byte("x")))
		require.NoError(t, c.Docs([]store.DocWrite{{Kind: store.DocTurn, ID: "t", CreatedAt: testTime}}))
		require.NoError(t, c.Text("f", ""))
	}
}

// The messages are part of the contract: API errors and tests quote them.
func TestChecksMessages(t *testing.T) {
	withAppend := func(edit func(*store.EventAppendParams)) *store.EventAppendParams {
		p := validAppend()
		edit(p)
		return p
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"nil params", lenient.EventAppend(nil), "params are nil"},
		{"no events", lenient.EventAppend(withAppend(func(p *store.EventAppendParams) { p.Events = nil })), "events: at least one event is required"},
		{"empty event type", lenient.EventAppend(withAppend(func(p *store.EventAppendParams) { p.Events[0].Type = "" })), "events[0].type is empty"},
		{"negative step", lenient.EventAppend(withAppend(func(p *store.EventAppendParams) { p.Events[0].Step = -1 })), "events[0].step must not be negative, got -1"},
		{"bad json", lenient.EventAppend(withAppend(func(p *store.EventAppendParams) { p.State = json.RawMessage(`{`) })), "state is not valid JSON"},
		{"zero time", lenient.Time("now", time.Time{}), "now is zero"},
		{"year out of range", lenient.Time("now", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), "now 10000-01-01 00:00:00 +0000 UTC is out of range (years 1-9999)"},
		{"short digest", lenient.SHA256("sha256", "ab"), "sha256 must be 64 lowercase hex digits, got 2 characters"},
		{"digest mismatch", lenient.Blobs([]store.BlobWrite{{SHA256: HexSHA256([]byte("a")), Data: []byte("b")}}), "blobs[0].sha256 " + HexSHA256([]byte("a")) + " is not the SHA-256 of the data"},
		{"unknown doc kind", lenient.Docs([]store.DocWrite{{Kind: "widget", ID: "w", CreatedAt: testTime}}), `docs[0].kind "widget" is not a projection kind`},
		{"lease epoch", lenient.Lease(store.Lease{SessionID: "s", Owner: "w"}), "lease.epoch must be at least 1 (a claim sets it), got 0"},
		{"claim limit", lenient.LeaseClaim(&store.LeaseClaimParams{Owner: "w", Now: testTime, ExpiresAt: testTime.Add(time.Second), Limit: MaxClaim + 1}), "limit must be between 1 and 1000, got 1001"},
		{"secret nonce", lenient.SecretRow(&store.SecretRow{Project: "p", Name: "n", Ciphertext: []byte("c")}), "nonce is empty"},
		{"secret project", lenient.SecretRow(&store.SecretRow{Name: "n", Ciphertext: []byte("c"), Nonce: []byte("n"), KeyID: "k"}), "project is empty"},
		{"secret host", lenient.SecretRow(&store.SecretRow{Project: "p", Name: "n", Ciphertext: []byte("c"), Nonce: []byte("n"), KeyID: "k", Hosts: []string{""}}), "hosts[0] is empty"},
		{"idempotency status", lenient.Idempotency(&store.IdempotencyRow{Scope: "s", Key: "k", BodySHA256: "b", Status: 42}), "status must be an HTTP status (100-599), got 42"},
		{"agent version", lenient.AgentInsert(&store.AgentInsertParams{Project: "p", Name: "a"}), "version must be at least 1, got 0"},
		{"agent project", lenient.AgentInsert(&store.AgentInsertParams{Name: "a", Version: 1}), "project is empty"},
		{"session own parent", lenient.SessionCreate(&store.SessionRow{ID: "s", Project: "p", AgentName: "a", AgentVersion: 1, ParentID: "s"}, &store.SessionCreateParams{}), `session.parent_id is the session's own id "s"`},
		{"session project", lenient.SessionCreate(&store.SessionRow{ID: "s", AgentName: "a", AgentVersion: 1}, &store.SessionCreateParams{}), "session.project is empty"},
		{"attempt nil", lenient.WebhookAttempt(nil), "record webhook attempt: params is nil"},
		{"attempt status", lenient.WebhookAttempt(&store.WebhookAttemptParams{DeliveryID: "d", Status: "odd"}), `record webhook attempt d: unknown status "odd"`},
		{"attempt pending without next", lenient.WebhookAttempt(&store.WebhookAttemptParams{DeliveryID: "d", Status: store.WebhookPending}), "record webhook attempt d: a pending delivery needs next_attempt_at"},
		{"attempt number", lenient.WebhookAttempt(&store.WebhookAttemptParams{DeliveryID: "d", Status: store.WebhookDelivered, Attempt: store.WebhookAttemptRow{Owner: "w"}}), "record webhook attempt d: attempt.attempt must be at least 1, got 0"},
		{"strict attempt error", strict.WebhookAttempt(&store.WebhookAttemptParams{DeliveryID: "d", Status: store.WebhookDelivered, Attempt: store.WebhookAttemptRow{Owner: "w", Attempt: 1, At: testTime, Error: "\xff"}}), "record webhook attempt d: attempt.error is not valid UTF-8"},
		{"strict NUL", strict.EventAppend(withAppend(func(p *store.EventAppendParams) { p.Events[0].TurnID = "t\x00" })), "events[0].turn_id contains a NUL byte"},
		{"strict UTF-8 text", strict.ID("owner", "\xff"), "owner is not valid UTF-8"},
		{"strict UTF-8 JSON", strict.JSON("data", json.RawMessage("\"\xff\"")), "data is not valid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.EqualError(t, tc.err, tc.want)
		})
	}
}

// SQLite stores any bytes, so the lenient checks accept what only
// PostgreSQL refuses.
func TestLenientAcceptsAnyText(t *testing.T) {
	require.NoError(t, lenient.ID("owner", "a\x00\xff"))
	require.NoError(t, lenient.JSON("data", json.RawMessage("\"\xff\"")))
}

// JSONInDatabase leaves a document to the database up to
// MaxJSONLeftToDatabase bytes, and checks a longer one.
func TestJSONInDatabase(t *testing.T) {
	c := Checks{StrictText: true, JSONInDatabase: true}
	require.NoError(t, c.JSON("data", json.RawMessage(`{`)))
	require.NoError(t, c.JSON("data", json.RawMessage("\"\xff\"")))
	long := json.RawMessage(`"` + strings.Repeat("a", MaxJSONLeftToDatabase) + `"`)
	require.NoError(t, c.JSON("data", long))
	require.EqualError(t, c.JSON("data", long[:len(long)-1]), "data is not valid JSON")
	require.NoError(t, c.ID("owner", "a"))
	require.EqualError(t, c.ID("owner", "a\x00"), "owner contains a NUL byte", "text is checked all the same")
}

func TestWebhookPage(t *testing.T) {
	var c Checks
	n, err := c.WebhookPage(0)
	require.NoError(t, err)
	require.Equal(t, 50, n)
	n, err = c.WebhookPage(MaxWebhookPage)
	require.NoError(t, err)
	require.Equal(t, MaxWebhookPage, n)
	_, err = c.WebhookPage(-1)
	require.EqualError(t, err, "limit must be between 1 and 1000, got -1")
}

func TestClaimHeld(t *testing.T) {
	a := store.WebhookAttemptRow{Owner: "w", Attempt: 2}
	require.NoError(t, ClaimHeld("w", 1, a))
	require.ErrorIs(t, ClaimHeld("", 1, a), store.ErrLeaseLost)
	require.ErrorIs(t, ClaimHeld("other", 1, a), store.ErrLeaseLost)
	require.ErrorIs(t, ClaimHeld("w", 2, a), store.ErrLeaseLost)
}

// TestEncodedAppendSkipsOnlyJSONSyntax: an append whose JSON the engine's
// encoder wrote (Encoded) is not parsed again, but every other check holds,
// and invalid UTF-8 (which the encoder passes through from a RawMessage) is
// still refused where the driver refuses it.
func TestEncodedAppendSkipsOnlyJSONSyntax(t *testing.T) {
	encoded := func(edit func(*store.EventAppendParams)) *store.EventAppendParams {
		p := validAppend()
		p.Encoded = true
		p.State = json.RawMessage(`{"session":{}}`)
		p.Docs = []store.DocWrite{{Kind: store.DocTurn, ID: "t", Doc: json.RawMessage(`{}`), CreatedAt: testTime}}
		edit(p)
		return p
	}
	for _, c := range []Checks{lenient, strict} {
		require.NoError(t, c.EventAppend(encoded(func(p *store.EventAppendParams) { p.State = json.RawMessage(`{`) })))
		require.NoError(t, c.EventAppend(encoded(func(p *store.EventAppendParams) { p.Events[0].Data = json.RawMessage(`{`) })))
		require.NoError(t, c.EventAppend(encoded(func(p *store.EventAppendParams) { p.Docs[0].Doc = json.RawMessage(`[`) })))
		require.EqualError(t, c.EventAppend(encoded(func(p *store.EventAppendParams) { p.Events[0].Type = "" })), "events[0].type is empty")
		require.EqualError(t, c.EventAppend(encoded(func(p *store.EventAppendParams) { p.Docs[0].Kind = "widget" })), `docs[0].kind "widget" is not a projection kind`)
	}
	require.EqualError(t, strict.EventAppend(encoded(func(p *store.EventAppendParams) { p.Events[0].Data = json.RawMessage("\"\xff\"") })), "events[0].data is not valid UTF-8")
	require.EqualError(t, strict.EventAppend(encoded(func(p *store.EventAppendParams) { p.State = json.RawMessage("\"\xff\"") })), "state is not valid UTF-8")
	require.EqualError(t, strict.EventAppend(encoded(func(p *store.EventAppendParams) { p.Docs[0].Doc = json.RawMessage("\"\xff\"") })), "docs[0].doc is not valid UTF-8")
	// Not encoded, the same JSON is refused; the Checks value itself keeps
	// checking JSON after an encoded append.
	require.EqualError(t, lenient.EventAppend(encoded(func(p *store.EventAppendParams) { p.Encoded, p.State = false, json.RawMessage(`{`) })), "state is not valid JSON")
	require.EqualError(t, lenient.JSON("data", json.RawMessage(`{`)), "data is not valid JSON")
}
