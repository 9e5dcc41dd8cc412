package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIdempotencyRecordsExpire runs the real server with
// --idempotency-retention 1h. A key's record older than that, and the
// claim of a request whose server died and whose client never came back,
// lapsed longer ago than that, are deleted when the server starts (and
// every hour): a repeat of either key runs as a new request, with a seed
// of its own. A younger key still replays its first answer. Before, every
// record and every lapsed claim was kept forever.
func TestIdempotencyRecordsExpire(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := startServer(t, "--sandbox", "local", "--idempotency-retention", "1h") // no command runs: no sandbox to start
	hc := &http.Client{Timeout: readyTimeout}
	post := func(key string) idemAnswer {
		t.Helper()
		a, err := idemPost(ctx, hc, srv, key, idemSessionBody(t, key))
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, a.status, "POST with key %s: %s", key, a.body)
		return a
	}
	const oldKey, youngKey, lapsedKey = "retention-old", "retention-young", "retention-lapsed"
	old, young := post(oldKey), post(youngKey)

	// Two hours pass for the old key's record, as the database holds it.
	// The lapsed key's request died on its server two hours ago, after it
	// claimed its key (a claim with its seed) and before it made anything.
	db := openDataDBWith(t, srv, "busy_timeout(5000)")
	ago := (2 * time.Hour).Microseconds()
	res, err := db.ExecContext(ctx, `UPDATE idempotency_keys SET created_at = created_at - ? WHERE key = ?`, ago, oldKey)
	require.NoError(t, err)
	n, err := res.RowsAffected()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the old key's record")
	var scope string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT scope FROM idempotency_keys WHERE key = ?`, youngKey).Scan(&scope))
	sum := sha256.Sum256(idemSessionBody(t, lapsedKey))
	const lapsedSeed = "01kb0000000000000000000000"
	lapsedAt := time.Now().Add(-2 * time.Hour).UnixMicro()
	_, err = db.ExecContext(ctx, `INSERT INTO idempotency_claims (scope, key, body_sha256, seed, token, owner, expires_at, created_at)
VALUES (?, ?, ?, ?, 'dead-run', 'dead-node', ?, ?)`, scope, lapsedKey, hex.EncodeToString(sum[:]), lapsedSeed, lapsedAt, lapsedAt-30e6)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	offset := srv.logSize()
	srv.restart()
	waitFor(t, readyTimeout, "the server's prune of idempotency keys at its start", func() (bool, error) {
		return strings.Contains(srv.logSince(offset), "pruned idempotency keys"), nil
	})
	require.Regexp(t, `pruned idempotency keys.* deleted=2\b`, srv.logSince(offset), "the old record and the lapsed claim")

	again := post(oldKey)
	require.Empty(t, again.replayed, "the old key's repeat was replayed: its record outlived the retention")
	require.NotEqual(t, old.session.ID, again.session.ID, "a repeat after the retention is a new request")

	require.Equal(t, "true", post(youngKey).replayed, "a key younger than the retention replays")
	require.Equal(t, young.session.ID, post(youngKey).session.ID)

	lapsed := post(lapsedKey)
	require.Empty(t, lapsed.replayed)
	require.NotEqual(t, "ses_"+lapsedSeed, lapsed.session.ID,
		"the lapsed claim outlived the retention: its seed named the new request's session")
}
