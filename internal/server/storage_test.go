package server_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/freespace"
	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// fullDiskBackend is the real engine whose writes fail as a full data
// volume makes them fail, while full is set.
type fullDiskBackend struct {
	server.Backend
	full atomic.Bool
	gone atomic.Bool // the database is out of reach
}

// walPath is where the failed write went: a path of the server's machine,
// which no client may see.
const walPath = "/srv/operators-own/longhaul.db-wal"

func (f *fullDiskBackend) CreateSession(ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error) {
	if f.full.Load() {
		return nil, fmt.Errorf("create session: append events: %w: %w", store.ErrStorageFull,
			&fs.PathError{Op: "write", Path: walPath, Err: syscall.ENOSPC})
	}
	return f.Backend.CreateSession(ctx, req)
}

func (f *fullDiskBackend) CreateTurn(ctx context.Context, id string, req *lt.CreateTurnRequest) (*lt.Turn, error) {
	if f.full.Load() {
		// A file write (a blob, a snapshot list) with no driver in between.
		return nil, fmt.Errorf("record snapshot: %w", &fs.PathError{Op: "write", Path: walPath, Err: syscall.ENOSPC})
	}
	return f.Backend.CreateTurn(ctx, id, req)
}

// GetSession fails as a read does while the database restarts.
func (f *fullDiskBackend) GetSession(ctx context.Context, id string) (*lt.Session, error) {
	if f.gone.Load() {
		return nil, fmt.Errorf("get session: %w: %w", store.ErrUnavailable,
			errors.New("dial tcp 10.9.8.7:5432: connect: connection refused"))
	}
	return f.Backend.GetSession(ctx, id)
}

func (f *fullDiskBackend) Ready(ctx context.Context) error {
	if f.full.Load() {
		return &freespace.LowError{Name: "the data volume", Free: 3 << 20, Floor: 256 << 20}
	}
	return f.Backend.Ready(ctx)
}

// TestFullDiskIs507: a write the full disk refused is a 507
// insufficient_storage that says what is full and that nothing was saved,
// never a 500 and never the path; /readyz is 503 with the free space and
// the floor; both recover when the space does.
func TestFullDiskIs507(t *testing.T) {
	t.Parallel()
	fb := &fullDiskBackend{}
	h := newHarness(t, harnessOpts{wrap: func(b server.Backend) server.Backend { fb.Backend = b; return fb }})
	sess := h.createSession("before")

	fb.full.Store(true)
	r := h.post("/v1/sessions", scriptedSession("while full"))
	e := requireError(t, r, http.StatusInsufficientStorage, lt.CodeInsufficientStorage, "")
	require.Equal(t, "the data volume is full; nothing was saved: retry once space is freed", e.Message)
	require.NotContains(t, string(r.body), walPath)
	require.Contains(t, h.logs.String(), walPath, "the cause is logged for the operator")

	r = h.post("/v1/sessions/"+sess.ID+"/turns", `{"input":"more"}`)
	e = requireError(t, r, http.StatusInsufficientStorage, lt.CodeInsufficientStorage, "")
	require.NotContains(t, e.Message, walPath)

	r = h.get("/readyz")
	e = requireError(t, r, http.StatusServiceUnavailable, lt.CodeUnavailable, "")
	require.Equal(t, "not ready: the data volume is nearly full: 3 MiB free, below the floor of 256 MiB", e.Message)
	require.Equal(t, http.StatusOK, h.get("/healthz").status)

	fb.full.Store(false)
	require.Equal(t, http.StatusOK, h.get("/readyz").status)
	require.Equal(t, http.StatusCreated, h.post("/v1/sessions", scriptedSession("after")).status)
}

// TestDatabaseGoneIs503: a request that met the database out of reach is a
// 503 unavailable a client may retry, never a 500, and it does not show
// the database's address (in the log only).
func TestDatabaseGoneIs503(t *testing.T) {
	t.Parallel()
	fb := &fullDiskBackend{}
	h := newHarness(t, harnessOpts{wrap: func(b server.Backend) server.Backend { fb.Backend = b; return fb }})
	sess := h.createSession("before")
	fb.gone.Store(true)
	r := h.get("/v1/sessions/" + sess.ID)
	e := requireError(t, r, http.StatusServiceUnavailable, lt.CodeUnavailable, "")
	require.Contains(t, e.Message, "the database is out of reach")
	require.NotContains(t, string(r.body), "10.9.8.7")
	require.Contains(t, h.logs.String(), "10.9.8.7", "the cause is logged for the operator")
	fb.gone.Store(false)
	require.Equal(t, http.StatusOK, h.get("/v1/sessions/"+sess.ID).status)
}
