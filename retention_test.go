package longhaul_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/longhaul-dev/longhaul"
)

// TestRuntimeRetentions: Options.AuditRetention and
// Options.IdempotencyRetention reach the process's pruners, as serve's
// flags do. An audit entry and an Idempotency-Key's record two hours old
// outlive the defaults (90 and 7 days) but not a retention of an hour:
// reopened with it, the process deletes both at Open, and a repeat of the
// key runs as a new request. Before, an embedded process pruned with the
// defaults whatever the application wanted, and on a shared store that
// overrode a server's longer retention, or its 0 (keep every answer).
func TestRuntimeRetentions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	post := func(rt *longhaul.Runtime) *http.Response {
		t.Helper()
		srv := httptest.NewServer(rt.Handler())
		defer srv.Close()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/sessions",
			strings.NewReader(`{"agent_spec":{"model":{"provider":"scripted","script":[{"text":"done"}]}},"input":"go"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "retention-1")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		return resp
	}

	rt, err := longhaul.Open(ctx, longhaul.Options{DataDir: dir, Logger: quiet})
	require.NoError(t, err)
	post(rt)
	require.NoError(t, rt.Close(context.Background()))

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "longhaul.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	ago := (2 * time.Hour).Microseconds()
	// The audit log takes no UPDATE: an entry as old is added beside the
	// request's.
	const cols = `key_id, actor_name, actor_role, key_prefix, remote, method, route, targets, status, request_id`
	for _, q := range []string{
		`UPDATE idempotency_keys SET created_at = created_at - ?`,
		`INSERT INTO audit_log (time, ` + cols + `) SELECT time - ?, ` + cols + ` FROM audit_log`,
	} {
		res, err := db.ExecContext(ctx, q, ago)
		require.NoError(t, err)
		n, err := res.RowsAffected()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "%s", q)
	}
	require.NoError(t, db.Close())

	// Reopened with the defaults, nothing is that old.
	logs := &syncBuffer{}
	rt = open(t, longhaul.Options{DataDir: dir, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.Equal(t, "true", post(rt).Header.Get("Idempotent-Replayed"))
	require.NoError(t, rt.Close(context.Background()))
	require.NotContains(t, logs.String(), "pruned")

	// Reopened with an hour, both go.
	logs = &syncBuffer{}
	rt = open(t, longhaul.Options{DataDir: dir, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		AuditRetention: time.Hour, IdempotencyRetention: time.Hour})
	require.Eventually(t, func() bool {
		l := logs.String()
		return strings.Contains(l, "pruned idempotency keys") && strings.Contains(l, "pruned the audit log")
	}, 20*time.Second, 10*time.Millisecond, "the prunes at Open; logs:\n%s", logs)
	require.Regexp(t, `pruned the audit log.* deleted=1\b`, logs.String(), "the old entry, not the request's own")
	require.Empty(t, post(rt).Header.Get("Idempotent-Replayed"), "a repeat after the retention is a new request")

	_, err = longhaul.Open(ctx, longhaul.Options{DataDir: t.TempDir(), Logger: quiet, IdempotencyRetention: 30 * time.Minute})
	require.ErrorContains(t, err, "IdempotencyRetention 30m0s is under 1h0m0s")
}

// syncBuffer is a bytes.Buffer a logger writes from other goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
