package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/server"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// faultyBackend is the real engine with some methods broken on purpose.
type faultyBackend struct {
	server.Backend
	readyErr atomic.Value // error; set while requests run
}

func (f *faultyBackend) GetSession(ctx context.Context, id string) (*lt.Session, error) {
	switch id {
	case "ses_panic":
		panic("handler bug")
	case "ses_broken":
		return nil, errors.New("open secret.db: disk on fire")
	}
	return f.Backend.GetSession(ctx, id)
}

func (f *faultyBackend) Ready(ctx context.Context) error {
	if err, ok := f.readyErr.Load().(error); ok {
		return err
	}
	return f.Backend.Ready(ctx)
}

func TestInternalErrorsAndPanics(t *testing.T) {
	t.Parallel()
	fb := &faultyBackend{}
	h := newHarness(t, harnessOpts{wrap: func(b server.Backend) server.Backend { fb.Backend = b; return fb }})

	r := h.get("/v1/sessions/ses_broken")
	e := requireError(t, r, http.StatusInternalServerError, "internal", "")
	require.Equal(t, "internal error", e.Message)
	require.NotContains(t, string(r.body), "disk on fire", "the cause is never sent")
	require.Contains(t, h.logs.String(), "disk on fire", "the cause is logged")
	require.Contains(t, h.logs.String(), r.header.Get("X-Request-Id"), "the log names the request")

	r = h.get("/v1/sessions/ses_panic")
	e = requireError(t, r, http.StatusInternalServerError, "internal", "")
	require.Equal(t, "internal error", e.Message)
	require.NotContains(t, string(r.body), "handler bug")
	require.Contains(t, h.logs.String(), "handler bug")
	require.Contains(t, h.logs.String(), "goroutine", "the stack is logged")

	// The server kept running.
	sess := h.createSession("still here")
	require.Equal(t, http.StatusOK, h.get("/v1/sessions/"+sess.ID).status)
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	fb := &faultyBackend{}
	h := newHarness(t, harnessOpts{wrap: func(b server.Backend) server.Backend { fb.Backend = b; return fb }})

	r := h.get("/readyz")
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.JSONEq(t, `{"status":"ready"}`, string(r.body))
	require.JSONEq(t, `{"status":"ok"}`, string(h.get("/healthz").body))

	fb.readyErr.Store(errors.New("ping store: schema version 3 is newer than this binary (2)"))
	r = h.get("/readyz")
	e := requireError(t, r, http.StatusServiceUnavailable, "unavailable", "")
	require.True(t, strings.HasPrefix(e.Message, "not ready: "), e.Message)
	require.Contains(t, e.Message, "schema version 3")
	require.Equal(t, http.StatusOK, h.get("/healthz").status, "liveness does not depend on storage")
}
