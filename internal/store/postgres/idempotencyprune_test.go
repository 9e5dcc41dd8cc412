package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// TestIdempotencyPruneSparesAClaimRenewedMeanwhile: a prune picks a claim
// that lapsed long ago while a run takes it over (its UPDATE holds the row,
// not committed yet). The prune's DELETE waits for the row and, once the
// takeover commits, finds it renewed: the claim stays, and its run keeps
// the key (and the seed that names what it makes). The sub-select alone
// would delete it: it reads the rows as they were when the DELETE began.
func TestIdempotencyPruneSparesAClaimRenewedMeanwhile(t *testing.T) {
	t.Parallel()
	s := openMigrated(t, nil)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	sum := sha256.Sum256([]byte(`{}`))
	c := &store.IdempotencyClaim{
		Scope: "POST /v1/sessions", Key: "renewed", BodySHA256: hex.EncodeToString(sum[:]), Seed: "seed-1", Token: "tok-1", Owner: "node-a",
		ExpiresAt: t0.Add(30 * time.Second), CreatedAt: t0,
	}
	res, err := s.IdempotencyClaim(ctx, c, t0)
	require.NoError(t, err)
	require.NotNil(t, res.Claimed)
	require.NoError(t, s.IdempotencyRelease(ctx, c.Scope, c.Key, c.Token, false, t0.Add(time.Second)))

	// The takeover, two hours on, holds the row uncommitted.
	// A connection of its own: the store's pool is small in tests.
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	_, err = tx.Exec(ctx, `UPDATE idempotency_claims SET token = 'tok-2', expires_at = $1 WHERE scope = $2 AND key = $3`,
		t0.Add(2*time.Hour+30*time.Second), c.Scope, c.Key)
	require.NoError(t, err)

	type pruned struct {
		n   int64
		err error
	}
	done := make(chan pruned, 1)
	go func() {
		n, err := s.IdempotencyPrune(ctx, t0.Add(time.Hour))
		done <- pruned{n, err}
	}()
	poll(t, "the prune waits for the takeover's row", func() bool {
		// Not on conn: its transaction would read pg_stat_activity once,
		// as it was at the first poll (before the prune waited, maybe).
		var waiting bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'transactionid' AND NOT l.granted AND a.query LIKE 'DELETE FROM idempotency_claims%')`).Scan(&waiting)
		require.NoError(t, err)
		return waiting
	})
	require.NoError(t, tx.Commit(ctx))
	p := <-done
	require.NoError(t, p.err)
	require.Zero(t, p.n, "nothing is deleted: the claim was renewed")

	held, err := s.IdempotencyClaim(ctx, &store.IdempotencyClaim{
		Scope: c.Scope, Key: c.Key, BodySHA256: c.BodySHA256, Seed: "seed-3", Token: "tok-3", Owner: "node-b",
		ExpiresAt: t0.Add(3 * time.Hour), CreatedAt: t0.Add(2 * time.Hour),
	}, t0.Add(2*time.Hour))
	require.NoError(t, err)
	require.NotNil(t, held.Held, "the renewed claim is still held")
	require.Equal(t, "tok-2", held.Held.Token)
	require.Equal(t, "seed-1", held.Held.Seed)
}
