package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestIdempotentCreateReplaysAndConflicts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	body := []byte(scriptedSession("once"))
	key := map[string]string{"Idempotency-Key": "create-1"}

	first := h.do(http.MethodPost, "/v1/sessions", body, key)
	require.Equal(t, http.StatusCreated, first.status, "body: %s", first.body)
	require.Empty(t, first.header.Get("Idempotent-Replayed"))

	again := h.do(http.MethodPost, "/v1/sessions", body, key)
	require.Equal(t, http.StatusCreated, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.body), string(again.body), "the replay is the first response, byte for byte")

	other := h.do(http.MethodPost, "/v1/sessions", []byte(scriptedSession("twice")), key)
	requireError(t, other, http.StatusConflict, "conflict", "")

	// Without a key, or with another key, the request runs again.
	h.do(http.MethodPost, "/v1/sessions", body, map[string]string{"Idempotency-Key": "create-2"})
	h.do(http.MethodPost, "/v1/sessions", body, nil)
	list := decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Len(t, list.Data, 3)

	// The same key on another endpoint or another session is another scope.
	id := decode[lt.Session](t, first).ID
	turn := h.do(http.MethodPost, "/v1/sessions/"+id+"/turns", []byte(`{"input":"more"}`), key)
	require.Equal(t, http.StatusCreated, turn.status, "body: %s", turn.body)
	turnAgain := h.do(http.MethodPost, "/v1/sessions/"+id+"/turns", []byte(`{"input":"more"}`), key)
	require.Equal(t, string(turn.body), string(turnAgain.body))
	turns := decode[lt.List[lt.Turn]](t, h.get("/v1/sessions/"+id+"/turns"))
	require.Len(t, turns.Data, 2, "the replayed turn was not queued twice")

	// Errors are not recorded: a failed request with a key can be retried.
	missing := h.do(http.MethodPost, "/v1/sessions/ses_nope/turns", []byte(`{"input":"x"}`), key)
	requireError(t, missing, http.StatusNotFound, "not_found", "")

	// A malformed key is refused, naming the header.
	requireError(t, h.do(http.MethodPost, "/v1/sessions", body, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}),
		http.StatusBadRequest, "invalid_request", "Idempotency-Key")
}

func TestIdempotentConcurrentRequestsRunOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	body := []byte(scriptedSession("concurrent"))
	key := map[string]string{"Idempotency-Key": "same-key"}

	const n = 8
	responses := make([]*response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { responses[i] = h.do(http.MethodPost, "/v1/sessions", body, key) })
	}
	wg.Wait()
	replays := 0
	for _, r := range responses {
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
		require.Equal(t, string(responses[0].body), string(r.body))
		if r.header.Get("Idempotent-Replayed") == "true" {
			replays++
		}
	}
	require.Equal(t, n-1, replays)
	list := decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Len(t, list.Data, 1)
}

// blindIdempotency hides existing records from the next `blind` reads: the
// window in which another server has run the same request but not yet
// recorded it.
type blindIdempotency struct {
	server.IdempotencyStore
	blind atomic.Int32
}

func (b *blindIdempotency) IdempotencyGet(ctx context.Context, scope, key string) (*store.IdempotencyRow, error) {
	if b.blind.Add(-1) >= 0 {
		return nil, store.ErrNotFound
	}
	return b.IdempotencyStore.IdempotencyGet(ctx, scope, key)
}

func TestIdempotentRaceAcrossServersAnswersWithTheFirstResponse(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	body := scriptedSession("two nodes")
	first := h.do(http.MethodPost, "/v1/sessions", []byte(body), map[string]string{"Idempotency-Key": "k"})
	require.Equal(t, http.StatusCreated, first.status, "body: %s", first.body)

	// A second server on the same store that did not see the record in time.
	blind := &blindIdempotency{IdempotencyStore: h.store}
	other := server.New(h.app, blind, &server.Config{Logger: slog.New(slog.NewTextHandler(h.logs, nil))})
	serve := func(body string) *httptest.ResponseRecorder {
		blind.blind.Store(1)
		req := httptest.NewRequest(http.MethodPost, "/v1/sessions", strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Host = "localhost"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k")
		rec := httptest.NewRecorder()
		other.ServeHTTP(rec, req)
		return rec
	}

	rec := serve(body)
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	require.Equal(t, string(first.body), rec.Body.String(), "the client sees the first outcome")
	require.Equal(t, "true", rec.Header().Get("Idempotent-Replayed"))
	list := decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Len(t, list.Data, 1, "the second server did not run the request: its claim met the record")

	rec = serve(scriptedSession("another body"))
	require.Equal(t, http.StatusConflict, rec.Code, rec.Body.String())
	var e lt.ErrorResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
	require.Equal(t, "conflict", e.Error.Code)
}

// lostRecords fails the next `lost` records of a response, and the release
// of the claim that follows each, as a node that died after its request's
// work committed and before the response was recorded: its claim stays
// until it expires.
type lostRecords struct {
	server.IdempotencyStore
	lost    atomic.Int32
	dropped atomic.Int32 // releases lost
}

func (l *lostRecords) IdempotencyPut(ctx context.Context, row *store.IdempotencyRow) error {
	if l.lost.Load() > 0 {
		l.lost.Add(-1)
		l.dropped.Add(1)
		return errors.New("the node died before the record")
	}
	return l.IdempotencyStore.IdempotencyPut(ctx, row)
}

func (l *lostRecords) IdempotencyRelease(ctx context.Context, scope, key, token string, drop bool, now time.Time) error {
	if l.dropped.Load() > 0 {
		l.dropped.Add(-1)
		return errors.New("the node died before the release")
	}
	return l.IdempotencyStore.IdempotencyRelease(ctx, scope, key, token, drop, now)
}

// otherServer is a server on h's application and store as another node
// would be: its idempotency store is idem, its clock now.
func otherServer(t *testing.T, h *harness, idem server.IdempotencyStore, now func() time.Time) func(method, path, body, key string) *httptest.ResponseRecorder {
	return serverOn(t, h, h.app, idem, now)
}

// serverOn is otherServer with the backend b.
func serverOn(t *testing.T, h *harness, b server.Backend, idem server.IdempotencyStore, now func() time.Time) func(method, path, body, key string) *httptest.ResponseRecorder {
	srv := server.New(b, idem, &server.Config{Logger: slog.New(slog.NewTextHandler(h.logs, nil)), Now: now, IdempotencyClaimTTL: 30 * time.Second})
	t.Cleanup(srv.Shutdown)
	return func(method, path, body, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Host = "localhost"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
}

// A request whose response was never recorded (its node died after the
// work committed) is retried: the retry waits out the dead run's claim,
// then runs again, and finds what the first run made instead of making it
// again: the session, the follow-up turn, the fork.
func TestIdempotentRetryAfterALostRecordMakesNothingTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	lost := &lostRecords{IdempotencyStore: h.store}
	serve := otherServer(t, h, lost, now)

	// Created; its record lost.
	lost.lost.Store(1)
	body := strings.Replace(scriptedSession("made once"), `"input":`, `"webhook_url": "https://hooks.example.com/longhaul", "input":`, 1)
	first := serve(http.MethodPost, "/v1/sessions", body, "create-1")
	require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
	made := decodeRecorder[lt.Session](t, first)
	require.NotEmpty(t, made.WebhookSecret)

	// The retry meets the dead run's claim until it expires.
	clock.Add(int64(10 * time.Second))
	held := serve(http.MethodPost, "/v1/sessions", body, "create-1")
	require.Equal(t, http.StatusConflict, held.Code, held.Body.String())
	require.Equal(t, "20", held.Header().Get("Retry-After"))
	require.Contains(t, held.Body.String(), "is running")
	other := serve(http.MethodPost, "/v1/sessions", scriptedSession("another"), "create-1")
	require.Equal(t, http.StatusConflict, other.Code, other.Body.String())
	require.Contains(t, other.Body.String(), "different request body")

	clock.Add(int64(21 * time.Second))
	again := serve(http.MethodPost, "/v1/sessions", body, "create-1")
	require.Equal(t, http.StatusCreated, again.Code, again.Body.String())
	retried := decodeRecorder[lt.Session](t, again)
	require.Equal(t, made.ID, retried.ID, "the session the first run made")
	require.Equal(t, made.WebhookSecret, retried.WebhookSecret, "with the secret it was made with")
	list := decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Len(t, list.Data, 1, "one session, made once")
	replayed := serve(http.MethodPost, "/v1/sessions", body, "create-1")
	require.Equal(t, "true", replayed.Header().Get("Idempotent-Replayed"), "recorded by the retry")
	require.Equal(t, again.Body.String(), replayed.Body.String())

	// A follow-up turn, its record lost: queued once.
	lost.lost.Store(1)
	turnPath := "/v1/sessions/" + made.ID + "/turns"
	turn := serve(http.MethodPost, turnPath, `{"input":"more"}`, "turn-1")
	require.Equal(t, http.StatusCreated, turn.Code, turn.Body.String())
	clock.Add(int64(31 * time.Second))
	turnAgain := serve(http.MethodPost, turnPath, `{"input":"more"}`, "turn-1")
	require.Equal(t, http.StatusCreated, turnAgain.Code, turnAgain.Body.String())
	require.Equal(t, decodeRecorder[lt.Turn](t, turn).ID, decodeRecorder[lt.Turn](t, turnAgain).ID)
	turns := decode[lt.List[lt.Turn]](t, h.get(turnPath))
	require.Len(t, turns.Data, 2, "the first turn and the follow-up, queued once")
	require.Len(t, ofType(h.events(made.ID), lt.EventTurnCreated), 2, "the follow-up journaled once (a turn of the same id journaled twice lists once)")

	// A fork, its record lost: forked once.
	cp := firstCheckpoint(t, h, made.ID)
	lost.lost.Store(1)
	forkPath := "/v1/sessions/" + made.ID + "/fork"
	forkBody := `{"checkpoint_id":"` + cp + `"}`
	fork := serve(http.MethodPost, forkPath, forkBody, "fork-1")
	require.Equal(t, http.StatusCreated, fork.Code, fork.Body.String())
	clock.Add(int64(31 * time.Second))
	forkAgain := serve(http.MethodPost, forkPath, forkBody, "fork-1")
	require.Equal(t, http.StatusCreated, forkAgain.Code, forkAgain.Body.String())
	require.Equal(t, decodeRecorder[lt.Session](t, fork).ID, decodeRecorder[lt.Session](t, forkAgain).ID)
	list = decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Len(t, list.Data, 2, "the session and its one fork")

	// A webhook endpoint, its record lost: made once, and the retry is
	// answered with the secret it was made with.
	lost.lost.Store(1)
	epBody := `{"url":"https://hooks.example.com/longhaul"}`
	ep := serve(http.MethodPost, "/v1/webhooks/endpoints", epBody, "endpoint-1")
	require.Equal(t, http.StatusCreated, ep.Code, ep.Body.String())
	clock.Add(int64(31 * time.Second))
	epAgain := serve(http.MethodPost, "/v1/webhooks/endpoints", epBody, "endpoint-1")
	require.Equal(t, http.StatusCreated, epAgain.Code, epAgain.Body.String())
	made1, made2 := decodeRecorder[lt.WebhookEndpoint](t, ep), decodeRecorder[lt.WebhookEndpoint](t, epAgain)
	require.Equal(t, made1.ID, made2.ID)
	require.NotEmpty(t, made1.Secret)
	require.Equal(t, made1.Secret, made2.Secret)
	eps := decode[lt.List[lt.WebhookEndpoint]](t, h.get("/v1/webhooks/endpoints"))
	require.Len(t, eps.Data, 1, "one endpoint, made once")

	// An agent version, its record lost: made once.
	lost.lost.Store(1)
	agentBody := `{"name":"researcher","spec":{"model":{"provider":"scripted","name":"demo","script":[{"text":"done"}]},"instructions":"Answer."}}`
	v1 := serve(http.MethodPost, "/v1/agents", agentBody, "agent-1")
	require.Equal(t, http.StatusCreated, v1.Code, v1.Body.String())
	// Another key is another request: a version of its own, the same
	// definition or not.
	v2 := serve(http.MethodPost, "/v1/agents", agentBody, "agent-2")
	require.Equal(t, http.StatusCreated, v2.Code, v2.Body.String())
	require.Equal(t, 2, decodeRecorder[lt.Agent](t, v2).Version)
	clock.Add(int64(31 * time.Second))
	v1Again := serve(http.MethodPost, "/v1/agents", agentBody, "agent-1")
	require.Equal(t, http.StatusCreated, v1Again.Code, v1Again.Body.String())
	require.Equal(t, 1, decodeRecorder[lt.Agent](t, v1Again).Version, "the version the first run made, though another came after it")
	versions := decode[lt.List[lt.Agent]](t, h.get("/v1/agents/researcher/versions"))
	require.Len(t, versions.Data, 2, "each request's version, made once")
}

// scriptedCreate answers CreateSession by script: n counts the calls from 1.
type scriptedCreate struct {
	server.Backend
	calls  atomic.Int32
	script func(n int32, ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error)
}

func (s *scriptedCreate) CreateSession(ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error) {
	return s.script(s.calls.Add(1), ctx, req)
}

// A request refused (4xx) on its claim's first run wrote nothing: its key
// is free at once, for another body too. One that failed otherwise may
// have written: its key waits for a retry of the same body, which runs at
// once with the first run's seed and finds what it made.
func TestIdempotentFailuresReleaseTheirKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	now := func() time.Time { return time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC) }
	b := &scriptedCreate{Backend: h.app}
	b.script = func(n int32, ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error) {
		s, err := h.app.CreateSession(ctx, req)
		if n == 3 && err == nil {
			return nil, errors.New("injected: the answer failed after the session was made")
		}
		return s, err
	}
	serve := serverOn(t, h, b, h.store, now)

	bad := serve(http.MethodPost, "/v1/sessions", `{"input":"no agent"}`, "k")
	require.Equal(t, http.StatusBadRequest, bad.Code, bad.Body.String())
	good := serve(http.MethodPost, "/v1/sessions", scriptedSession("fixed"), "k")
	require.Equal(t, http.StatusCreated, good.Code, "the refusal left the key free: %s", good.Body.String())
	require.Empty(t, good.Header().Get("Idempotent-Replayed"))

	failed := serve(http.MethodPost, "/v1/sessions", scriptedSession("made, then failed"), "k2")
	require.Equal(t, http.StatusInternalServerError, failed.Code, failed.Body.String())
	other := serve(http.MethodPost, "/v1/sessions", scriptedSession("another"), "k2")
	require.Equal(t, http.StatusConflict, other.Code, "a run that failed may have written: the key stays this body's: %s", other.Body.String())
	retried := serve(http.MethodPost, "/v1/sessions", scriptedSession("made, then failed"), "k2")
	require.Equal(t, http.StatusCreated, retried.Code, "the key was released at once: %s", retried.Body.String())
	list := decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Len(t, list.Data, 2, "the retry found the session the failed run made")
	require.Equal(t, list.Data[0].ID, decodeRecorder[lt.Session](t, retried).ID)
}

// A retry that takes a claim over runs after a first run that may have
// made something: refused (4xx) now, it leaves the claim's seed to the next
// retry, which finds what the first run made. And the seeded lookup comes
// before the request is checked again.
func TestIdempotentRefusedRetryKeepsTheSeed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	lost := &lostRecords{IdempotencyStore: h.store}
	b := &scriptedCreate{Backend: h.app}
	b.script = func(n int32, ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error) {
		if n == 2 {
			// What was allowed to the first run is refused to the
			// retry (a webhook target's check, the caller's rights).
			return nil, apierror.Invalid("webhook_url", "refused this time")
		}
		return h.app.CreateSession(ctx, req)
	}
	serve := serverOn(t, h, b, lost, now)
	body := scriptedSession("made once")
	lost.lost.Store(1)
	first := serve(http.MethodPost, "/v1/sessions", body, "k")
	require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
	clock.Add(int64(31 * time.Second))
	refused := serve(http.MethodPost, "/v1/sessions", body, "k")
	require.Equal(t, http.StatusBadRequest, refused.Code, refused.Body.String())
	third := serve(http.MethodPost, "/v1/sessions", body, "k")
	require.Equal(t, http.StatusCreated, third.Code, third.Body.String())
	require.Equal(t, decodeRecorder[lt.Session](t, first).ID, decodeRecorder[lt.Session](t, third).ID)
	list := decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Len(t, list.Data, 1, "one key, one session")
}

// A handler's panic releases its claim (keeping the seed): a retry runs at
// once, instead of meeting a claim renewed for as long as the process
// lives.
func TestIdempotentPanicReleasesTheKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	now := func() time.Time { return time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC) }
	b := &scriptedCreate{Backend: h.app}
	b.script = func(n int32, ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error) {
		s, err := h.app.CreateSession(ctx, req)
		if n == 1 {
			panic("injected: after the session was made")
		}
		return s, err
	}
	serve := serverOn(t, h, b, h.store, now)
	body := scriptedSession("panics once")
	first := serve(http.MethodPost, "/v1/sessions", body, "p")
	require.Equal(t, http.StatusInternalServerError, first.Code, first.Body.String())
	again := serve(http.MethodPost, "/v1/sessions", body, "p")
	require.Equal(t, http.StatusCreated, again.Code, "Retry-After %q: %s", again.Header().Get("Retry-After"), again.Body.String())
	list := decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Len(t, list.Data, 1, "the retry found the session the run that panicked made")
}

// A record that failed on a node that lives on releases the claim: the
// client's retry runs at once (not a 409 until the claim expires) and
// finds what the first run made.
func TestIdempotentFailedRecordReleasesTheKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	now := func() time.Time { return time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC) }
	failing := &failingRecords{IdempotencyStore: h.store}
	failing.fail.Store(true)
	serve := otherServer(t, h, failing, now)
	body := scriptedSession("recorded on the retry")
	first := serve(http.MethodPost, "/v1/sessions", body, "r")
	require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
	failing.fail.Store(false)
	again := serve(http.MethodPost, "/v1/sessions", body, "r")
	require.Equal(t, http.StatusCreated, again.Code, again.Body.String())
	require.Empty(t, again.Header().Get("Idempotent-Replayed"), "run again, not replayed")
	require.Equal(t, decodeRecorder[lt.Session](t, first).ID, decodeRecorder[lt.Session](t, again).ID)
	list := decode[lt.List[lt.Session]](t, h.get("/v1/sessions"))
	require.Len(t, list.Data, 1)
}

// failingRecords fails every record while fail is set; the node lives on.
type failingRecords struct {
	server.IdempotencyStore
	fail atomic.Bool
}

func (f *failingRecords) IdempotencyPut(ctx context.Context, row *store.IdempotencyRow) error {
	if f.fail.Load() {
		return errors.New("injected: the database refused the record")
	}
	return f.IdempotencyStore.IdempotencyPut(ctx, row)
}

// decodeRecorder is decode for a recorded response.
func decodeRecorder[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	return decode[T](t, &response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()})
}

// firstCheckpoint waits for session id's first checkpoint and returns its id.
func firstCheckpoint(t *testing.T, h *harness, id string) string {
	t.Helper()
	var cp string
	require.Eventually(t, func() bool {
		list := decode[lt.List[lt.Checkpoint]](t, h.get("/v1/sessions/"+id+"/checkpoints"))
		for _, c := range list.Data {
			if c.EventSeq > 0 {
				cp = c.ID
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond)
	return cp
}

// The controls that journal an event and create nothing of their own (a
// steer, a constraint, a signal, a review) journal it once too: a retry
// after a lost record finds the event its first run journaled (it carries
// the claim's seed) and answers from it.
func TestIdempotentRetryAfterALostRecordJournalsControlsOnce(t *testing.T) {
	t.Parallel()
	h, once := lostOnceHarness(t)

	sess, _ := h.startFunctionSession("c1")
	base := "/v1/sessions/" + sess.ID
	// More than a page of the journal (requestDone reads 256 events at
	// a time) between the steer and its retry.
	once(base+"/steer", `{"input":"use the 2025 figures"}`, "steer-1", func() {
		for i := range 300 {
			r := h.post(base+"/signals", fmt.Sprintf(`{"name":"tick-%d"}`, i))
			require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
		}
	})
	once(base+"/constraints", `{"constraint":"never email customers"}`, "constraint-1")
	sig, sigAgain := once(base+"/signals", `{"name":"approved","payload":{"by":"ops"}}`, "signal-1")
	require.Equal(t, decodeRecorder[lt.Signal](t, sig).ID, decodeRecorder[lt.Signal](t, sigAgain).ID)
	evs := h.events(sess.ID)
	require.Len(t, ofType(evs, lt.EventTurnSteered), 1, "one steer")
	require.Len(t, ofType(evs, lt.EventConstraintAdded), 1, "one constraint")
	require.Len(t, ofType(evs, lt.EventSignalReceived), 301, "one signal, and the 300 sent without a key")

	done := decode[lt.Session](t, h.post("/v1/sessions", scriptedSession("to review")))
	h.waitStatus(done.ID, lt.SessionIdle)
	once("/v1/sessions/"+done.ID+"/review", `{"accepted":false,"note":"again, shorter","continue":true}`, "review-1")
	evs = h.events(done.ID)
	require.Len(t, ofType(evs, lt.EventSessionReviewed), 1, "one review")
	require.Len(t, ofType(evs, lt.EventTurnCreated), 2, "the first turn and the one the review started, once")
}

// lostOnceHarness returns a harness and a func that posts body to path
// with key through another server on it, the record lost, runs between,
// then posts it again once the dead run's claim has lapsed (that server's
// clock is moved on), and returns both answers, which must have the same
// status. The server's clock is the engine's (a seed is read back as the
// time its request first ran).
func lostOnceHarness(t *testing.T) (*harness, func(path, body, key string, between ...func()) (first, again *httptest.ResponseRecorder)) {
	h := newHarness(t, harnessOpts{})
	var clock atomic.Int64
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	lost := &lostRecords{IdempotencyStore: h.store}
	serve := otherServer(t, h, lost, now)
	return h, func(path, body, key string, between ...func()) (first, again *httptest.ResponseRecorder) {
		t.Helper()
		clock.Store(time.Now().UnixNano())
		lost.lost.Store(1)
		first = serve(http.MethodPost, path, body, key)
		require.Less(t, first.Code, 300, first.Body.String())
		for _, f := range between {
			f()
		}
		clock.Add(int64(31 * time.Second))
		again = serve(http.MethodPost, path, body, key)
		require.Equal(t, first.Code, again.Code, again.Body.String())
		require.Empty(t, again.Header().Get("Idempotent-Replayed"), "run again, not replayed")
		return first, again
	}
}

// TestIdempotentRetryAfterALostRecordControlsOnce: a pause, a resume or a
// cancel whose server died before its record is run again by the client's
// retry, and finds its event in the journal (its "request"): it answers
// 200 with the session as it is, and does nothing again. Before, a resume
// retried answered 409 "not paused" for the resume it had made (for ever:
// the retry keeps the claim), and a pause or a cancel retried after a
// person's resume, or a new turn, paused the session or cancelled the turn
// a second time.
func TestIdempotentRetryAfterALostRecordControlsOnce(t *testing.T) {
	t.Parallel()
	h, once := lostOnceHarness(t)
	// It asks a person, and asks again in the turn after the cancel.
	r := h.post("/v1/sessions", `{
  "agent_spec": {
    "model": {"provider": "scripted", "script": [
      {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which city?"}}]},
      {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which repo?"}}]},
      {"text": "done"}
    ]},
    "tools": [{"name": "ask_human"}]
  },
  "input": "go"
}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	s := h.waitStatus(decode[lt.Session](t, r).ID, lt.SessionRequiresAction)
	path := "/v1/sessions/" + s.ID
	status := func() lt.SessionStatus { return decode[lt.Session](t, h.get(path)).Status }

	// A pause, retried after a person resumed the session.
	once(path+"/pause", `{"reason":"lunch"}`, "pause-1", func() {
		require.Equal(t, http.StatusOK, h.post(path+"/resume", `{}`).status)
		h.waitStatus(s.ID, lt.SessionRequiresAction)
	})
	require.Equal(t, lt.SessionRequiresAction, status(), "the retry did not pause it again")

	// A resume, retried: 200, not 409.
	require.Equal(t, http.StatusOK, h.post(path+"/pause", `{}`).status)
	h.waitStatus(s.ID, lt.SessionPaused)
	once(path+"/resume", `{}`, "resume-1")
	require.Equal(t, lt.SessionRequiresAction, status())

	// A resume, retried after a person paused the session again.
	require.Equal(t, http.StatusOK, h.post(path+"/pause", `{}`).status)
	h.waitStatus(s.ID, lt.SessionPaused)
	once(path+"/resume", `{}`, "resume-2", func() {
		require.Equal(t, http.StatusOK, h.post(path+"/pause", `{}`).status)
		h.waitStatus(s.ID, lt.SessionPaused)
	})
	require.Equal(t, lt.SessionPaused, status(), "the retry did not resume it again")
	require.Equal(t, http.StatusOK, h.post(path+"/resume", `{}`).status)
	h.waitStatus(s.ID, lt.SessionRequiresAction)

	// A cancel, retried once the session took a new turn.
	once(path+"/cancel", `{"reason":"wrong repo"}`, "cancel-1", func() {
		h.waitStatus(s.ID, lt.SessionCancelled)
		r := h.post(path+"/turns", `{"input":"the right repo, then"}`)
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
		h.waitStatus(s.ID, lt.SessionRequiresAction)
	})
	require.Equal(t, lt.SessionRequiresAction, status(), "the retry did not cancel the new turn")

	evs := h.events(s.ID)
	require.Len(t, ofType(evs, lt.EventSessionCancelRequested), 1, "one cancel")
	require.Len(t, ofType(evs, lt.EventSessionResumed), 4, "a person's two, and resume-1's and resume-2's once each")
	require.Len(t, ofType(evs, lt.EventSessionPaused), 4, "pause-1's once, and a person's three")
	// What the keyed requests journaled carries their seeds.
	seeded := 0
	for _, ev := range evs {
		if strings.Contains(string(ev.Data), `"request":"`) {
			seeded++
		}
	}
	require.Equal(t, 4, seeded, "pause-1, resume-1, resume-2 and cancel-1")
}

// stalledFirst holds the first call of each of its methods until release
// is closed: a run of a request that stalls (its server paused, its
// database out of reach) past its claim's time, while a retry takes the
// claim over and runs.
type stalledFirst struct {
	server.Backend
	release chan struct{}
	started chan struct{} // one send per held call
	calls   atomic.Int32
}

func (s *stalledFirst) hold() {
	if s.calls.Add(1) == 1 {
		s.started <- struct{}{}
		<-s.release
	}
}

func (s *stalledFirst) CreateTurn(ctx context.Context, id string, req *lt.CreateTurnRequest) (*lt.Turn, error) {
	s.hold()
	return s.Backend.CreateTurn(ctx, id, req)
}

func (s *stalledFirst) Steer(ctx context.Context, id string, req *lt.SteerRequest) (*lt.Session, error) {
	s.hold()
	return s.Backend.Steer(ctx, id, req)
}

func (s *stalledFirst) AddConstraint(ctx context.Context, id, constraint string) (*lt.Session, error) {
	s.hold()
	return s.Backend.AddConstraint(ctx, id, constraint)
}

func (s *stalledFirst) SendSignal(ctx context.Context, id string, req *lt.SignalRequest) (*lt.Signal, error) {
	s.hold()
	return s.Backend.SendSignal(ctx, id, req)
}

// Two runs of one request that overlap (the first stalled past its claim's
// time, and the client's retry on another server took the claim over and
// ran) journal it once: the first run, going on after the retry's write,
// finds it in the change that would journal it again.
func TestIdempotentOverlappingRunsJournalOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	sess, _ := h.startFunctionSession("c1")
	base := "/v1/sessions/" + sess.ID
	cases := []struct {
		path, body, typ string
	}{
		{base + "/turns", `{"input":"and then the totals"}`, lt.EventTurnCreated},
		{base + "/steer", `{"input":"use the 2025 figures"}`, lt.EventTurnSteered},
		{base + "/constraints", `{"constraint":"never email customers"}`, lt.EventConstraintAdded},
		{base + "/signals", `{"name":"approved"}`, lt.EventSignalReceived},
	}
	for i, c := range cases {
		before := len(ofType(h.events(sess.ID), c.typ))
		start := time.Now()
		stalled := &stalledFirst{Backend: h.app, release: make(chan struct{}), started: make(chan struct{}, 1)}
		first := serverOn(t, h, stalled, h.store, func() time.Time { return start })
		retry := otherServer(t, h, h.store, func() time.Time { return start.Add(31 * time.Second) })
		key := fmt.Sprintf("overlap-%d", i)
		answered := make(chan *httptest.ResponseRecorder, 1)
		go func() { answered <- first(http.MethodPost, c.path, c.body, key) }()
		<-stalled.started
		again := retry(http.MethodPost, c.path, c.body, key)
		require.Less(t, again.Code, 300, "%s: %s", c.path, again.Body.String())
		close(stalled.release)
		late := <-answered
		require.Less(t, late.Code, 300, "%s: %s", c.path, late.Body.String())
		require.Len(t, ofType(h.events(sess.ID), c.typ), before+1, "%s: journaled once", c.path)
	}
}
