package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// TestSessionNumberNeverChanges: once a session's row is written, its
// number cannot be changed (029_session_numbers_fixed), by name; its other
// columns can, and the appends go on.
func TestSessionNumberNeverChanges(t *testing.T) {
	s := openMigrated(t, nil)
	createSession(t, s, "ses_a", false)
	_, err := s.EventAppend(t.Context(), appendParams("ses_a", 1, 1))
	require.NoError(t, err)
	for _, q := range []string{
		`UPDATE sessions SET num = num + 1000 WHERE id = 'ses_a'`,
		`UPDATE sessions SET num = NULL WHERE id = 'ses_a'`,
	} {
		err := s.w.do(context.Background(), &request{raw: func(w *writer) error {
			_, err := w.conn.ExecContext(context.Background(), q)
			return err
		}})
		require.ErrorContains(t, err, "sessions.num never changes once written", q)
	}
	raw(t, s, func(w *writer) error {
		_, err := w.conn.ExecContext(context.Background(), `UPDATE sessions SET num = num, agent_name = 'renamed' WHERE id = 'ses_a'`)
		return err
	})
	_, err = s.EventAppend(t.Context(), appendParams("ses_a", 2, 1))
	require.NoError(t, err)
	evs, err := s.EventList(t.Context(), "ses_a", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 3)
}

// TestSessionNumberReadInARolledBackBatchIsNotKept: a number read in a
// transaction that rolls back is forgotten, so a session created there,
// rolled back and created again with another number has its appends at
// that number's positions; one read in a committed transaction is kept.
func TestSessionNumberReadInARolledBackBatchIsNotKept(t *testing.T) {
	s := openMigrated(t, nil)
	ctx := t.Context()
	boom := errors.New("boom")
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		if _, err := w.exec(`INSERT INTO sessions (num, id, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at)
VALUES (500, 'ses_r', 'agent', 1, 'queued', '{}', '{}', 0, 1, 1)`); err != nil {
			return nil, err
		}
		num, err := w.sessionNum("ses_r")
		if err != nil {
			return nil, err
		}
		if num != 500 {
			return nil, fmt.Errorf("read number %d, want 500", num)
		}
		return nil, boom
	}})
	require.ErrorIs(t, err, boom)
	_, known := s.w.nums.get("ses_r")
	require.False(t, known, "read in a transaction that rolled back")

	createSession(t, s, "ses_r", false)
	_, err = s.EventAppend(ctx, appendParams("ses_r", 1, 2))
	require.NoError(t, err)
	evs, err := s.EventList(ctx, "ses_r", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 3, "the appends are at the session's own positions")
	num, known := s.w.nums.known["ses_r"]
	require.True(t, known, "read in a transaction that committed")
	require.Equal(t, storedNum(t, s, "ses_r"), num)
	require.NotEqual(t, int64(500), num)
}

// TestSessionNumsStayBounded: the table keeps up to maxSessionNums
// numbers; one more empties it before the new ones are kept. A number read
// in a transaction rolled back is not kept.
func TestSessionNumsStayBounded(t *testing.T) {
	nums := newSessionNums()
	for i := range maxSessionNums {
		nums.read(fmt.Sprintf("ses_%d", i), int64(i))
		if i%1000 == 999 {
			nums.committed()
		}
	}
	nums.committed()
	require.Len(t, nums.known, maxSessionNums, "all kept up to the bound")
	nums.read("ses_last", 7)
	nums.committed()
	require.Len(t, nums.known, 1, "emptied past the bound, then the new one kept")
	n, ok := nums.get("ses_last")
	require.True(t, ok)
	require.Equal(t, int64(7), n)
	nums.read("ses_gone", 8)
	nums.rolledBack()
	_, ok = nums.get("ses_gone")
	require.False(t, ok)
}

// TestAppendSetsTheIndexedColumnsOnlyWhenOneChanges: an append whose
// status, runnable and wake_at are the session's already runs the UPDATE
// that leaves their indexes alone (NULL or not); one that changes any of
// them runs the one that sets them, and the row then holds them.
func TestAppendSetsTheIndexedColumnsOnlyWhenOneChanges(t *testing.T) {
	s := openMigrated(t, nil)
	ctx := t.Context()
	createSession(t, s, "ses_a", false) // queued, not runnable, no wake
	seq := int64(1)
	appendWith := func(status string, runnable bool, wake *time.Time) {
		t.Helper()
		p := appendParams("ses_a", seq, 1)
		p.Status, p.Runnable, p.WakeAt = status, runnable, wake
		_, err := s.EventAppend(ctx, p)
		require.NoError(t, err)
		seq++
	}
	sets := func() int64 { return s.w.indexedSets.Load() }
	at := time.UnixMicro(1_000_000).UTC()

	appendWith("running", false, nil)
	require.Equal(t, int64(1), sets(), "queued to running")
	appendWith("running", false, nil)
	appendWith("running", false, nil)
	require.Equal(t, int64(1), sets(), "nothing indexed changed, wake_at NULL")
	appendWith("waiting", true, &at)
	require.Equal(t, int64(2), sets())
	appendWith("waiting", true, &at)
	require.Equal(t, int64(2), sets(), "nothing indexed changed, wake_at set")
	appendWith("waiting", false, &at)
	require.Equal(t, int64(3), sets(), "runnable alone changed")

	row, err := s.SessionGet(ctx, "ses_a")
	require.NoError(t, err)
	require.Equal(t, "waiting", row.Status)
	require.False(t, row.Runnable)
	require.NotNil(t, row.WakeAt)
	require.True(t, row.WakeAt.Equal(at))
	require.Equal(t, seq, row.LastSeq)
}

// TestSessionNumberReadInARolledBackSavepointIsNotKept: in a batch of two
// requests, the first creates a session, reads its number and fails, so
// its savepoint takes the session back; the second commits the batch. The
// number is not kept: the session created again gets another one, and its
// appends land at that one's positions.
func TestSessionNumberReadInARolledBackSavepointIsNotKept(t *testing.T) {
	s := openMigrated(t, nil)
	ctx := t.Context()
	boom := errors.New("boom")
	release := blockWriter(t, s)
	first := make(chan error, 1)
	go func() {
		first <- s.w.do(context.Background(), &request{run: func(w *writer) ([]store.Notification, error) {
			if _, err := w.exec(`INSERT INTO sessions (num, id, agent_name, agent_version, status, spec, state, last_seq, created_at, updated_at)
VALUES (500, 'ses_r', 'agent', 1, 'queued', '{}', '{}', 0, 1, 1)`); err != nil {
				return nil, err
			}
			if _, err := w.sessionNum("ses_r"); err != nil {
				return nil, err
			}
			return nil, boom
		}})
	}()
	waitQueued(t, s, 1)
	second := make(chan error, 1)
	go func() {
		_, err := s.SessionCreate(context.Background(), &store.SessionCreateParams{
			Session: store.SessionRow{ID: "ses_other", AgentName: "agent", AgentVersion: 1, Status: "queued", CreatedAt: testTime, UpdatedAt: testTime},
		})
		second <- err
	}()
	waitQueued(t, s, 2)
	release()
	require.ErrorIs(t, <-first, boom)
	require.NoError(t, <-second)
	_, known := s.w.nums.get("ses_r")
	require.False(t, known, "read in a savepoint that was rolled back")

	createSession(t, s, "ses_r", false)
	_, err := s.EventAppend(ctx, appendParams("ses_r", 1, 2))
	require.NoError(t, err)
	evs, err := s.EventList(ctx, "ses_r", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 3, "the appends are at the session's own positions")
}
