package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
	"github.com/stretchr/testify/require"
)

// blockWriter occupies the writer until the returned release is called, so
// that requests pile up in its queue.
func blockWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	entered := make(chan struct{})
	unblock := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.w.do(context.Background(), &request{raw: func(*writer) error {
			close(entered)
			<-unblock
			return nil
		}})
	}()
	<-entered
	return func() {
		close(unblock)
		require.NoError(t, <-done)
	}
}

// waitQueued polls until n requests wait in the writer's queue.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.w.groups.Queued() < n {
		if time.Now().After(deadline) {
			require.FailNow(t, "requests not queued", "want %d, have %d", n, s.w.groups.Queued())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommitOneTransaction: requests queued together commit in one
// transaction, and one that fails is rolled back alone.
func TestGroupCommitOneTransaction(t *testing.T) {
	s := openMigrated(t, nil)
	const n = 10
	for i := range n {
		createSession(t, s, fmt.Sprintf("ses_%d", i), false)
	}
	ch, cancel := s.Subscribe(t.Context())
	defer cancel()

	release := blockWriter(t, s)
	commitsBefore := s.w.commits.Load()
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.EventAppend(context.Background(), appendParams(fmt.Sprintf("ses_%d", i), 1, 2))
		})
	}
	// A stale append in the middle of the batch.
	wg.Go(func() {
		_, errs[n] = s.EventAppend(context.Background(), appendParams("ses_0", 0, 1))
	})
	waitQueued(t, s, n+1)
	release()
	wg.Wait()

	require.Equal(t, commitsBefore+1, s.w.commits.Load(), "one commit for the whole batch")
	for i := range n {
		require.NoError(t, errs[i], "append %d", i)
		row, err := s.SessionGet(t.Context(), fmt.Sprintf("ses_%d", i))
		require.NoError(t, err)
		require.Equal(t, int64(3), row.LastSeq)
	}
	require.ErrorIs(t, errs[n], store.ErrConflict)

	// Every committed append was announced.
	seen := make(map[string]bool)
	for len(seen) < n {
		select {
		case note := <-ch:
			require.Equal(t, store.KindEvents, note.Kind)
			require.Equal(t, int64(3), note.Seq)
			seen[note.SessionID] = true
		case <-time.After(10 * time.Second):
			require.FailNow(t, "notifications missing", "got %d of %d", len(seen), n)
		}
	}
}

// TestGroupCommitMaxBatch: no transaction carries more than MaxBatch
// requests.
func TestGroupCommitMaxBatch(t *testing.T) {
	s := openMigrated(t, &Config{MaxBatch: 4})
	createSession(t, s, "ses_b", false)
	const n = 12
	release := blockWriter(t, s)
	commitsBefore, executedBefore := s.w.commits.Load(), s.w.executed.Load()
	var wg sync.WaitGroup
	errs := make([]error, n)
	data := make([][]byte, n)
	for i := range n {
		data[i] = []byte(fmt.Sprintf("blob %d", i))
		wg.Go(func() { errs[i] = s.BlobPut(context.Background(), storeutil.HexSHA256(data[i]), data[i]) })
	}
	waitQueued(t, s, 4)
	release()
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "put %d", i)
	}
	require.Equal(t, int64(n), s.w.executed.Load()-executedBefore)
	require.GreaterOrEqual(t, s.w.commits.Load()-commitsBefore, int64(n/4), "at most 4 requests per commit")
}

// TestSkippedWhenCallerGaveUp: a request whose context ended while queued is
// not executed.
func TestSkippedWhenCallerGaveUp(t *testing.T) {
	s := openMigrated(t, nil)
	createSession(t, s, "ses_gone", false)
	release := blockWriter(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := s.EventAppend(ctx, appendParams("ses_gone", 1, 1))
		errc <- err
	}()
	waitQueued(t, s, 1)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	release()
	// The writer has drained its queue once a later request is answered.
	_, err := s.EventAppend(t.Context(), appendParams("ses_gone", 1, 1))
	require.NoError(t, err, "the abandoned append did not take seq 2")
}

// TestRawRequestBetweenWritesRunsInOrder: writes queued before a raw request
// commit before it runs, and those queued after it commit after it, though
// all were queued while the writer was busy and run as one group.
func TestRawRequestBetweenWritesRunsInOrder(t *testing.T) {
	s := openMigrated(t, nil)
	createSession(t, s, "ses_r", false)
	release := blockWriter(t, s)
	appended := make(chan error, 2)
	go func() {
		_, err := s.EventAppend(context.Background(), appendParams("ses_r", 1, 1))
		appended <- err
	}()
	waitQueued(t, s, 1)
	var seen int64
	rawDone := make(chan error, 1)
	go func() {
		rawDone <- s.w.do(context.Background(), &request{raw: func(w *writer) error {
			return w.conn.QueryRowContext(context.Background(), `SELECT last_seq FROM sessions WHERE id = 'ses_r'`).Scan(&seen)
		}})
	}()
	waitQueued(t, s, 2)
	go func() {
		_, err := s.EventAppend(context.Background(), appendParams("ses_r", 2, 1))
		appended <- err
	}()
	waitQueued(t, s, 3)
	commits := s.w.commits.Load()
	release()
	require.NoError(t, <-appended)
	require.NoError(t, <-appended)
	require.NoError(t, <-rawDone)
	require.Equal(t, int64(2), seen, "the raw request saw the append before it, not the one after")
	require.Equal(t, commits+2, s.w.commits.Load(), "the appends on either side of it in transactions of their own")
	last, err := s.SessionLastSeq(t.Context(), "ses_r")
	require.NoError(t, err)
	require.Equal(t, int64(3), last)
}

// TestBatchRetriedAfterTransactionLoss: a request whose failure ends the
// whole transaction (as SQLite does on some I/O errors) gets its error; the
// requests before and after it are run again in a new transaction and commit.
func TestBatchRetriedAfterTransactionLoss(t *testing.T) {
	s := openMigrated(t, nil)
	createSession(t, s, "ses_before", false)
	createSession(t, s, "ses_after", false)
	release := blockWriter(t, s)

	errBefore := make(chan error, 1)
	go func() {
		_, err := s.EventAppend(context.Background(), appendParams("ses_before", 1, 1))
		errBefore <- err
	}()
	waitQueued(t, s, 1)
	lossErr := errors.New("transaction lost")
	errLoss := make(chan error, 1)
	go func() {
		errLoss <- s.w.do(context.Background(), &request{run: func(w *writer) ([]store.Notification, error) {
			if _, err := w.exec("ROLLBACK"); err != nil {
				return nil, err
			}
			return nil, lossErr
		}})
	}()
	waitQueued(t, s, 2)
	errAfter := make(chan error, 1)
	go func() {
		_, err := s.EventAppend(context.Background(), appendParams("ses_after", 1, 1))
		errAfter <- err
	}()
	waitQueued(t, s, 3)
	release()

	require.ErrorIs(t, <-errLoss, lossErr)
	require.NoError(t, <-errBefore)
	require.NoError(t, <-errAfter)
	for _, id := range []string{"ses_before", "ses_after"} {
		row, err := s.SessionGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, int64(2), row.LastSeq, id)
	}
}

// TestBareAppendFailingAfterItsWrites: an append runs without a savepoint
// of its own (request.bare). One that fails after its first writes (its
// effect's id belongs to another session) takes the batch down with it:
// it gets its error and leaves nothing behind, and the appends before and
// after it commit in a new transaction.
func TestBareAppendFailingAfterItsWrites(t *testing.T) {
	s := openMigrated(t, nil)
	for _, id := range []string{"ses_before", "ses_bad", "ses_after", "ses_owner"} {
		createSession(t, s, id, false)
	}
	owned := appendParams("ses_owner", 1, 1)
	owned.Docs = []store.DocWrite{{Kind: store.DocEffect, ID: "eff_taken", SessionID: "ses_owner", Status: "succeeded", CreatedAt: testTime}}
	_, err := s.EventAppend(t.Context(), owned)
	require.NoError(t, err)

	release := blockWriter(t, s)
	commitsBefore := s.w.commits.Load()
	ids := []string{"ses_before", "ses_bad", "ses_after"}
	errs := make([]chan error, len(ids))
	for i, id := range ids {
		p := appendParams(id, 1, 2)
		if id == "ses_bad" {
			p.Docs = []store.DocWrite{{Kind: store.DocEffect, ID: "eff_taken", SessionID: id, Status: "succeeded", CreatedAt: testTime}}
		}
		errs[i] = make(chan error, 1)
		go func() {
			_, err := s.EventAppend(context.Background(), p)
			errs[i] <- err
		}()
		waitQueued(t, s, i+1)
	}
	release()
	require.NoError(t, <-errs[0])
	require.ErrorIs(t, <-errs[1], store.ErrConflict)
	require.NoError(t, <-errs[2])
	require.Equal(t, commitsBefore+1, s.w.commits.Load(), "the batch rolled back, the rest committed in one")
	for id, want := range map[string]int64{"ses_before": 3, "ses_bad": 1, "ses_after": 3} {
		row, err := s.SessionGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, want, row.LastSeq, id)
		events, err := s.EventList(t.Context(), id, 0, 0)
		require.NoError(t, err)
		require.Len(t, events, int(want), id)
	}
}
