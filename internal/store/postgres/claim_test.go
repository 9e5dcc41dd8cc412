package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
)

// TestClaimConcurrentNodes: three nodes, each with its own pool, claim 200
// runnable sessions at the same time, a few at a time, and process each
// claim with a fenced append that parks the session. No session is claimed
// twice at the same epoch (nor at all: a parked session is not claimable),
// every session is processed exactly once, and no fenced append is refused.
func TestClaimConcurrentNodes(t *testing.T) {
	t.Parallel()
	const (
		sessions = 200
		nodes    = 3
	)
	dsn := pgtest.FreshSchema(t)
	stores := make([]*Store, nodes)
	for i := range stores {
		stores[i] = openDSN(t, dsn, &Config{MaxConns: 4})
	}
	require.NoError(t, stores[0].Migrate(t.Context()))
	for i := range sessions {
		createSession(t, stores[i%nodes], fmt.Sprintf("ses_%03d", i), true)
	}

	type claimKey struct {
		id    string
		epoch int64
	}
	var (
		mu        sync.Mutex
		claims    = make(map[claimKey]string) // -> owner
		byNode    = make([]int, nodes)
		processed atomic.Int64
		failed    = make([]error, nodes)
		wg        sync.WaitGroup
	)
	now := testTime.Add(time.Hour)
	deadline := time.Now().Add(60 * time.Second)
	for n, s := range stores {
		owner := fmt.Sprintf("node-%d", n)
		wg.Go(func() {
			for processed.Load() < sessions {
				if time.Now().After(deadline) {
					failed[n] = errors.New("deadline passed before every session was processed")
					return
				}
				leases, err := s.LeaseClaim(context.Background(), &store.LeaseClaimParams{
					Owner: owner, Now: now, ExpiresAt: now.Add(time.Hour), Limit: 5,
				})
				if err != nil {
					failed[n] = err
					return
				}
				mu.Lock()
				for _, l := range leases {
					k := claimKey{l.SessionID, l.Epoch}
					if prev, dup := claims[k]; dup {
						mu.Unlock()
						failed[n] = fmt.Errorf("%s claimed %s at epoch %d, already claimed by %s", owner, l.SessionID, l.Epoch, prev)
						return
					}
					claims[k] = owner
					byNode[n]++
				}
				mu.Unlock()
				for _, l := range leases {
					p := appendParams(l.SessionID, 1, 1)
					p.Fence = &l
					p.Status = "idle"
					p.Runnable = false
					p.ReleaseLease = true
					p.Events[0].WorkerID = owner
					if _, err := s.EventAppend(context.Background(), p); err != nil {
						failed[n] = fmt.Errorf("%s processing %s: %w", owner, l.SessionID, err)
						return
					}
					processed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	for n, err := range failed {
		require.NoError(t, err, "node %d", n)
	}
	require.Equal(t, int64(sessions), processed.Load())
	require.Len(t, claims, sessions, "each session claimed exactly once")
	for k := range claims {
		require.Equal(t, int64(1), k.epoch, "%s", k.id)
	}
	t.Logf("claims per node: %v", byNode)

	// Every journal has the one processing event, by its claimer.
	for k, owner := range claims {
		events, err := stores[0].EventList(t.Context(), k.id, 0, 10)
		require.NoError(t, err)
		require.Len(t, events, 2, k.id)
		require.Equal(t, owner, events[1].WorkerID, k.id)
		row, err := stores[0].SessionGet(t.Context(), k.id)
		require.NoError(t, err)
		require.Equal(t, "idle", row.Status)
		require.Empty(t, row.Lease.Owner)
	}
	leases, err := stores[1].LeaseClaim(t.Context(), &store.LeaseClaimParams{Owner: "late", Now: now, ExpiresAt: now.Add(time.Hour), Limit: 10})
	require.NoError(t, err)
	require.Empty(t, leases, "nothing is left to claim")
}

// TestClaimUsesPartialIndexes: a claim reads the two partial indexes, not
// every session.
func TestClaimUsesPartialIndexes(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	conn, err := s.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(t.Context()) }()
	// On an empty table the planner would rightly scan it; forbid that to
	// see which indexes the statement can use.
	_, err = tx.Exec(t.Context(), `SET LOCAL enable_seqscan = off`)
	require.NoError(t, err)
	rows, err := tx.Query(t.Context(), `EXPLAIN `+claimSQL, testTime, 10, "w", testTime.Add(time.Minute))
	require.NoError(t, err)
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	require.NoError(t, rows.Err())
	joined := strings.Join(plan, "\n")
	require.Contains(t, joined, "sessions_runnable", joined)
	require.Contains(t, joined, "sessions_wake", joined)
}
