package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// groupOf returns a request per append, as EventAppend queues them.
func groupOf(t *testing.T, appends ...*store.EventAppendParams) []*request {
	t.Helper()
	group := make([]*request, len(appends))
	for i, p := range appends {
		_, _, build, err := prepareAppend(p)
		require.NoError(t, err)
		group[i] = &request{ctx: context.Background(), build: build, done: make(chan error, 1)}
	}
	return group
}

// txOf returns the ids of the transactions that wrote the session's events
// after seq 1 (its creation).
func txOf(t *testing.T, s *Store, session string) []string {
	t.Helper()
	var ids []string
	err := s.query(context.Background(), func(rows pgx.Rows) error {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	}, `SELECT DISTINCT xmin::text FROM events WHERE session_id = $1 AND seq > 1`, session)
	require.NoError(t, err)
	return ids
}

// A group commits in one transaction, and a write that fails in it fails
// alone: the others commit, and the failed one keeps nothing.
func TestGroupCommitsTogetherAndFailsAlone(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	for _, id := range []string{"ses_a", "ses_b", "ses_c", "ses_d"} {
		createSession(t, s, id, false)
	}
	// ses_d's doc id is ses_a's: the upsert refuses it.
	withDoc := func(p *store.EventAppendParams, id string) *store.EventAppendParams {
		p.Docs = []store.DocWrite{{Kind: store.DocTurn, ID: id, SessionID: p.SessionID, Status: "running",
			Doc: json.RawMessage(`{}`), CreatedAt: testTime}}
		return p
	}
	group := groupOf(t,
		withDoc(appendParams("ses_a", 1, 2), "turn_a"),
		appendParams("ses_b", 7, 1), // a stale seq
		appendParams("ses_c", 1, 3),
		withDoc(appendParams("ses_d", 1, 1), "turn_a"),
	)
	s.committer.commit(group)

	require.NoError(t, <-group[0].done)
	require.ErrorIs(t, <-group[1].done, errAppendRefused)
	require.NoError(t, <-group[2].done)
	require.ErrorIs(t, <-group[3].done, store.ErrConflict)

	for id, want := range map[string]int64{"ses_a": 3, "ses_b": 1, "ses_c": 4, "ses_d": 1} {
		row, err := s.SessionGet(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, want, row.LastSeq, id)
		events, err := s.EventList(context.Background(), id, 0, 0)
		require.NoError(t, err)
		require.Len(t, events, int(want), id)
	}
	a, c := txOf(t, s, "ses_a"), txOf(t, s, "ses_c")
	require.Len(t, a, 1)
	require.Equal(t, a, c, "the appends that succeeded share one transaction")
}

// An append whose JSON only the server refuses (appendChecks) fails alone
// in its group: the others commit together.
func TestGroupWithJSONTheServerRefuses(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	for _, id := range []string{"ses_a", "ses_b", "ses_c"} {
		createSession(t, s, id, false)
	}
	bad := appendParams("ses_b", 1, 2)
	bad.Events[1].Data = json.RawMessage(`{"a":01}`)
	group := groupOf(t, appendParams("ses_a", 1, 2), bad, appendParams("ses_c", 1, 1))
	s.committer.commit(group)

	require.NoError(t, <-group[0].done)
	require.Error(t, <-group[1].done)
	require.NoError(t, <-group[2].done)
	for id, want := range map[string]int64{"ses_a": 3, "ses_b": 1, "ses_c": 2} {
		row, err := s.SessionGet(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, want, row.LastSeq, id)
	}
	require.Equal(t, txOf(t, s, "ses_a"), txOf(t, s, "ses_c"), "the appends that succeeded share one transaction")
	_, err := s.EventAppend(context.Background(), bad)
	require.EqualError(t, err, "append events: events[1].data is not valid JSON")
}

// Appends sent at once by many callers, some of them stale, each get their
// own answer, and the journal holds exactly the ones that succeeded.
func TestConcurrentAppendsThroughTheCommitter(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, &Config{MaxConns: 4})
	const sessions, rounds = 16, 5
	for i := range sessions {
		createSession(t, s, fmt.Sprintf("ses_%d", i), false)
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*rounds*2)
	for i := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("ses_%d", i)
			last := int64(1)
			for range rounds {
				// A stale copy of the same append races the real one.
				stale := appendParams(id, last-1, 1)
				var inner sync.WaitGroup
				inner.Go(func() {
					if _, err := s.EventAppend(context.Background(), stale); !errors.Is(err, store.ErrConflict) {
						errs <- fmt.Errorf("%s stale append: got %v, want a conflict", id, err)
					}
				})
				if _, err := s.EventAppend(context.Background(), appendParams(id, last, 2)); err != nil {
					errs <- fmt.Errorf("%s: %w", id, err)
				}
				inner.Wait()
				last += 2
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range sessions {
		events, err := s.EventList(context.Background(), fmt.Sprintf("ses_%d", i), 0, 0)
		require.NoError(t, err)
		require.Len(t, events, 1+2*rounds)
	}
}
