package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storetest"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
	"github.com/stretchr/testify/require"
)

// openTest opens a store in a fresh temporary directory, closed at cleanup.
func openTest(tb testing.TB, cfg *Config) *Store {
	tb.Helper()
	return openPath(tb, filepath.Join(tb.TempDir(), "longhaul.db"), cfg)
}

func openPath(tb testing.TB, path string, cfg *Config) *Store {
	tb.Helper()
	s, err := Open(context.Background(), path, cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, s.Close()) })
	return s
}

// openMigrated opens a migrated store.
func openMigrated(tb testing.TB, cfg *Config) *Store {
	tb.Helper()
	s := openTest(tb, cfg)
	require.NoError(tb, s.Migrate(context.Background()))
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTest(t, nil) })
}

var testTime = time.Date(2025, 6, 7, 8, 9, 10, 654321000, time.UTC)

func createSession(t testing.TB, s *Store, id string, runnable bool) {
	t.Helper()
	_, err := s.SessionCreate(context.Background(), &store.SessionCreateParams{
		Session: store.SessionRow{
			ID: id, AgentName: "agent", AgentVersion: 1, Status: "queued", Runnable: runnable,
			CreatedAt: testTime, UpdatedAt: testTime,
		},
		Events: []store.NewEvent{{Type: "session.created", Time: testTime, Data: json.RawMessage(`{}`)}},
	})
	require.NoError(t, err)
}

func appendParams(id string, expected int64, n int) *store.EventAppendParams {
	p := &store.EventAppendParams{
		SessionID: id, ExpectedSeq: expected, Status: "running",
		State: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, expected+int64(n))), UpdatedAt: testTime,
	}
	for i := range n {
		p.Events = append(p.Events, store.NewEvent{
			Type: "test.event", Time: testTime, Data: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`),
		})
	}
	return p
}

// openBefore opens a database with the migrations before the one named
// migration applied, and writes query (with args) into it: a database as
// an earlier release left it, for a test of that migration to Migrate.
func openBefore(t testing.TB, migration, query string, args ...any) *Store {
	t.Helper()
	s := openTest(t, nil)
	ms, err := storeutil.LoadMigrations(migrationFS)
	require.NoError(t, err)
	i := slices.IndexFunc(ms, func(m storeutil.Migration) bool { return m.Name == migration })
	require.GreaterOrEqual(t, i, 0, "no migration %s", migration)
	for _, m := range ms[:i] {
		raw(t, s, func(w *writer) error { return w.applyMigration(m, len(ms), s) })
	}
	raw(t, s, func(w *writer) error {
		_, err := w.conn.ExecContext(context.Background(), query, args...)
		return err
	})
	return s
}

// benchMigrate times Migrate from the migration named on, b.N times, each
// on a database openBefore fills with query (not timed).
func benchMigrate(b *testing.B, migration, query string) {
	for range b.N {
		b.StopTimer()
		s := openBefore(b, migration, query)
		b.StartTimer()
		if err := s.Migrate(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// storedNum returns session id's number as its row holds it.
func storedNum(t testing.TB, s *Store, id string) int64 {
	t.Helper()
	var num int64
	raw(t, s, func(w *writer) error {
		return w.conn.QueryRowContext(context.Background(), `SELECT num FROM sessions WHERE id = ?`, id).Scan(&num)
	})
	return num
}

// raw runs fn on the writer, outside any batch.
func raw(t testing.TB, s *Store, fn func(w *writer) error) {
	t.Helper()
	require.NoError(t, s.w.do(context.Background(), &request{raw: fn}))
}

func TestSchemaNewerThanDriverRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "newer.db")
	s, err := Open(t.Context(), path, nil)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	current, known, err := s.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Equal(t, known, current)
	require.GreaterOrEqual(t, known, 1)

	future := known + 5
	raw(t, s, func(w *writer) error {
		_, err := w.conn.ExecContext(context.Background(),
			`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, future)
		return err
	})
	err = s.Migrate(t.Context())
	require.Error(t, err)
	require.Contains(t, err.Error(), strconv.Itoa(future))
	require.Contains(t, err.Error(), strconv.Itoa(known))
	require.Error(t, s.Ping(t.Context()), "a newer schema is not ready")
	require.NoError(t, s.Close())

	// Still refused by a fresh process.
	s = openPath(t, path, nil)
	err = s.Migrate(t.Context())
	require.ErrorContains(t, err, fmt.Sprintf("database schema version %d is newer than this driver's schema version %d", future, known))
	current, known2, err := s.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Equal(t, future, current)
	require.Equal(t, known, known2)
}

func TestUnmigratedIsNotReady(t *testing.T) {
	s := openTest(t, nil)
	current, known, err := s.SchemaVersion(t.Context())
	require.NoError(t, err)
	require.Equal(t, 0, current)
	require.Positive(t, known)
	err = s.Ping(t.Context())
	require.ErrorContains(t, err, "run migrations")
	require.NoError(t, s.Migrate(t.Context()))
	require.NoError(t, s.Ping(t.Context()))
}

func TestDataSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reopen.db")
	s, err := Open(t.Context(), path, nil)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	createSession(t, s, "ses_keep", true)
	_, err = s.EventAppend(t.Context(), appendParams("ses_keep", 1, 2))
	require.NoError(t, err)
	_, err = s.AgentInsert(t.Context(), &store.AgentInsertParams{Project: "default", Name: "a", Version: 1, Spec: json.RawMessage(`{"x":1}`), CreatedAt: testTime})
	require.NoError(t, err)
	data := []byte("kept")
	require.NoError(t, s.BlobPut(t.Context(), storeutil.HexSHA256(data), data))
	require.NoError(t, s.Close())

	s = openPath(t, path, nil)
	require.NoError(t, s.Ping(t.Context()), "a migrated database is ready without migrating again")
	row, err := s.SessionGet(t.Context(), "ses_keep")
	require.NoError(t, err)
	require.Equal(t, int64(3), row.LastSeq)
	require.JSONEq(t, `{"seq":3}`, string(row.State))
	events, err := s.EventList(t.Context(), "ses_keep", 0, 10)
	require.NoError(t, err)
	require.Len(t, events, 3)
	a, err := s.AgentGet(t.Context(), "default", "a", 0)
	require.NoError(t, err)
	require.Equal(t, testTime, a.CreatedAt)
	got, err := s.BlobGet(t.Context(), storeutil.HexSHA256(data))
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestPragmas(t *testing.T) {
	s := openTest(t, &Config{BusyTimeout: 1500 * time.Millisecond})
	raw(t, s, func(w *writer) error {
		ctx := context.Background()
		var mode string
		var sync, fk, busy int
		if err := w.conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			return err
		}
		if err := w.conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			return err
		}
		if err := w.conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
			return err
		}
		if err := w.conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			return err
		}
		if mode != "wal" || sync != 2 || fk != 1 || busy != 1500 {
			return fmt.Errorf("writer pragmas: journal_mode=%s synchronous=%d foreign_keys=%d busy_timeout=%d", mode, sync, fk, busy)
		}
		return nil
	})

	// Every read connection is query-only with the same busy timeout.
	conn, err := s.read.Conn(t.Context())
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Close()) }()
	var queryOnly, busy int
	require.NoError(t, conn.QueryRowContext(t.Context(), "PRAGMA query_only").Scan(&queryOnly))
	require.NoError(t, conn.QueryRowContext(t.Context(), "PRAGMA busy_timeout").Scan(&busy))
	require.Equal(t, 1, queryOnly)
	require.Equal(t, 1500, busy)
}

func TestTimesAreMicrosecondsUTC(t *testing.T) {
	s := openMigrated(t, nil)
	loc := time.FixedZone("UTC+5", 5*3600)
	local := time.Date(2025, 1, 2, 8, 4, 5, 123456789, loc) // nanoseconds are truncated
	want := time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC)
	events, err := s.SessionCreate(t.Context(), &store.SessionCreateParams{
		Session: store.SessionRow{ID: "ses_t", AgentName: "a", AgentVersion: 1, Status: "queued", WakeAt: &local, CreatedAt: local},
		Events:  []store.NewEvent{{Type: "session.created", Time: local}},
	})
	require.NoError(t, err)
	require.Equal(t, want, events[0].Time, "returned events are what is stored")
	row, err := s.SessionGet(t.Context(), "ses_t")
	require.NoError(t, err)
	require.Equal(t, want, row.CreatedAt)
	require.Equal(t, want, row.UpdatedAt, "a zero UpdatedAt is CreatedAt")
	require.Equal(t, want, *row.WakeAt)
	stored, err := s.EventList(t.Context(), "ses_t", 0, 1)
	require.NoError(t, err)
	require.Equal(t, want, stored[0].Time)
	require.Nil(t, stored[0].Data, "empty data is stored as NULL and read back as nil")
}

func TestValidation(t *testing.T) {
	s := openMigrated(t, nil)
	ctx := t.Context()
	createSession(t, s, "ses_v", false)
	badDigest := strings.Repeat("ab", 32)

	withAppend := func(mod func(p *store.EventAppendParams)) func() error {
		return func() error {
			p := appendParams("ses_v", 1, 1)
			mod(p)
			_, err := s.EventAppend(ctx, p)
			return err
		}
	}
	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"no events", withAppend(func(p *store.EventAppendParams) { p.Events = nil }), "events"},
		{"bad event json", withAppend(func(p *store.EventAppendParams) { p.Events[0].Data = json.RawMessage(`{`) }), "events[0].data"},
		{"zero event time", withAppend(func(p *store.EventAppendParams) { p.Events[0].Time = time.Time{} }), "events[0].time"},
		{"empty event type", withAppend(func(p *store.EventAppendParams) { p.Events[0].Type = "" }), "events[0].type"},
		{"empty status", withAppend(func(p *store.EventAppendParams) { p.Status = "" }), "status"},
		{"bad state json", withAppend(func(p *store.EventAppendParams) { p.State = json.RawMessage(`nope`) }), "state"},
		{"negative seq", withAppend(func(p *store.EventAppendParams) { p.ExpectedSeq = -1 }), "expected_seq"},
		{"fence without owner", withAppend(func(p *store.EventAppendParams) { p.Fence = &store.Lease{Epoch: 1} }), "fence.owner"},
		{"blob digest mismatch", withAppend(func(p *store.EventAppendParams) {
			p.Blobs = []store.BlobWrite{{SHA256: badDigest, Data: []byte("x")}}
		}), "blobs[0].sha256"},
		{"unknown doc kind", withAppend(func(p *store.EventAppendParams) {
			p.Docs = []store.DocWrite{{Kind: "widget", ID: "w", CreatedAt: testTime}}
		}), "docs[0].kind"},
		{"doc of another session", withAppend(func(p *store.EventAppendParams) {
			p.Docs = []store.DocWrite{{Kind: store.DocTurn, ID: "t", SessionID: "ses_other", CreatedAt: testTime}}
		}), "docs[0].session_id"},
		{"session without id", func() error {
			_, err := s.SessionCreate(ctx, &store.SessionCreateParams{Session: store.SessionRow{AgentName: "a", AgentVersion: 1, Status: "q", CreatedAt: testTime}})
			return err
		}, "session.id"},
		{"agent version 0", func() error {
			_, err := s.AgentInsert(ctx, &store.AgentInsertParams{Project: "default", Name: "a", Version: 0, CreatedAt: testTime})
			return err
		}, "version"},
		{"claim limit 0", func() error {
			_, err := s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "w", Now: testTime, ExpiresAt: testTime.Add(time.Second)})
			return err
		}, "limit"},
		{"claim expiring before now", func() error {
			_, err := s.LeaseClaim(ctx, &store.LeaseClaimParams{Owner: "w", Now: testTime, ExpiresAt: testTime, Limit: 1})
			return err
		}, "expires_at"},
		{"renew epoch 0", func() error {
			return s.LeaseRenew(ctx, store.Lease{SessionID: "ses_v", Owner: "w"}, testTime)
		}, "lease.epoch"},
		{"blob put mismatch", func() error { return s.BlobPut(ctx, badDigest, []byte("x")) }, "sha256"},
		{"blob get uppercase", func() error {
			_, err := s.BlobGet(ctx, strings.ToUpper(badDigest))
			return err
		}, "sha256"},
		{"session list limit", func() error {
			_, err := s.SessionList(ctx, &store.SessionListParams{Limit: 5000})
			return err
		}, "limit"},
		{"event list negative after", func() error {
			_, err := s.EventList(ctx, "ses_v", -1, 10)
			return err
		}, "after_seq"},
		{"idempotency status", func() error {
			return s.IdempotencyPut(ctx, &store.IdempotencyRow{Scope: "s", Key: "k", BodySHA256: "x", Status: 42, CreatedAt: testTime})
		}, "status"},
		{"expire leases without owner", func() error {
			_, err := s.LeaseExpireOwner(ctx, "", testTime)
			return err
		}, "owner"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.field)
			for _, sentinel := range []error{store.ErrNotFound, store.ErrConflict, store.ErrLeaseLost, store.ErrClosed} {
				require.NotErrorIs(t, err, sentinel, "bad input is not a %v", sentinel)
			}
		})
	}
	row, err := s.SessionGet(ctx, "ses_v")
	require.NoError(t, err)
	require.Equal(t, int64(1), row.LastSeq, "no bad input wrote anything")
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(t.Context(), "", nil)
	require.ErrorContains(t, err, "path")
	_, err = Open(t.Context(), filepath.Join(t.TempDir(), "missing", "dir", "x.db"), nil)
	require.Error(t, err, "the caller makes the data directory")
	_, err = Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), &Config{MaxBatch: -1})
	require.ErrorContains(t, err, "MaxBatch")
	_, err = Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), &Config{ReadConns: -2})
	require.ErrorContains(t, err, "ReadConns")
}

func TestOddPathCharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir?with#odd%chars")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "db file?.sqlite")
	s := openPath(t, path, nil)
	require.NoError(t, s.Migrate(t.Context()))
	_, err := os.Stat(path)
	require.NoError(t, err, "the database is at exactly the given path")
}

// TestLoadMigrations checks the embedded migrations; the numbering rules
// are storeutil's, tested there.
func TestLoadMigrations(t *testing.T) {
	ms, err := storeutil.LoadMigrations(migrationFS)
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	require.Equal(t, 1, ms[0].Version)
}

// queryPlan returns the details of EXPLAIN QUERY PLAN for query, run on
// the writer's connection.
func queryPlan(t *testing.T, s *Store, query string, args ...any) []string {
	t.Helper()
	var plan []string
	raw(t, s, func(w *writer) error {
		rows, err := w.conn.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
		if err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				return err
			}
			plan = append(plan, detail)
		}
		return rows.Err()
	})
	return plan
}

func TestClaimUsesPartialIndexes(t *testing.T) {
	s := openMigrated(t, nil)
	joined := strings.Join(queryPlan(t, s, claimableSQL, 0, "node-a", 0, 0, 0, "node-a", 0, 10), "\n")
	require.Contains(t, joined, "sessions_runnable", joined)
	require.Contains(t, joined, "sessions_wake", joined)
}

func TestSubscribersClosedByClose(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "sub.db"), nil)
	require.NoError(t, err)
	ch, cancel := s.Subscribe(t.Context())
	defer cancel()
	require.NoError(t, s.Close())
	_, ok := <-ch
	require.False(t, ok, "Close closes the subscribers' channels")
	late, lateCancel := s.Subscribe(t.Context())
	lateCancel()
	_, ok = <-late
	require.False(t, ok, "a subscription after Close is closed")
}

func TestCancelledContextWritesNothing(t *testing.T) {
	s := openMigrated(t, nil)
	createSession(t, s, "ses_c", false)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.EventAppend(ctx, appendParams("ses_c", 1, 1))
	require.ErrorIs(t, err, context.Canceled)
	row, err := s.SessionGet(t.Context(), "ses_c")
	require.NoError(t, err)
	require.Equal(t, int64(1), row.LastSeq)
}

// TestClosePendingAppendsFinish: appends racing with Close either commit
// durably (and say so) or return ErrClosed, never anything else.
func TestClosePendingAppendsFinish(t *testing.T) {
	path := filepath.Join(t.TempDir(), "close.db")
	s, err := Open(t.Context(), path, nil)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	const writers = 16
	for i := range writers {
		createSession(t, s, fmt.Sprintf("ses_%d", i), false)
	}
	acked := make([]int64, writers)
	errs := make([]error, writers)
	started := make(chan struct{}, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			last := int64(1)
			for n := 0; ; n++ {
				if n == 1 {
					started <- struct{}{}
				}
				_, err := s.EventAppend(context.Background(), appendParams(fmt.Sprintf("ses_%d", i), last, 1))
				if err != nil {
					errs[i] = err
					return
				}
				last++
				acked[i] = last
			}
		})
	}
	for range writers {
		<-started
	}
	require.NoError(t, s.Close())
	wg.Wait()
	for i, err := range errs {
		require.ErrorIs(t, err, store.ErrClosed, "writer %d", i)
	}

	s = openPath(t, path, nil)
	for i := range writers {
		row, err := s.SessionGet(t.Context(), fmt.Sprintf("ses_%d", i))
		require.NoError(t, err)
		require.Equal(t, acked[i], row.LastSeq, "writer %d: every acknowledged append and nothing else", i)
	}
}
