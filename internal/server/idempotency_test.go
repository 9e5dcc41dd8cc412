package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

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
	require.Contains(t, h.logs.String(), "ran on two servers at once")

	rec = serve(scriptedSession("another body"))
	require.Equal(t, http.StatusConflict, rec.Code, rec.Body.String())
	var e lt.ErrorResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
	require.Equal(t, "conflict", e.Error.Code)
}
