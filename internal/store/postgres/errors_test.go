package postgres

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// TestMapErrDiskFull: PostgreSQL's disk_full is the store's ErrStorageFull
// (a 507 for an API client, a pause for a worker), keeping the server's
// error in the chain for the log; the other resource errors of its class
// are not about storage.
func TestMapErrDiskFull(t *testing.T) {
	t.Parallel()
	full := &pgconn.PgError{Code: "53100", Message: "could not extend file: No space left on device"}
	err := mapErr(fmt.Errorf("append events: %w", full))
	require.ErrorIs(t, err, store.ErrStorageFull)
	require.ErrorAs(t, err, new(*pgconn.PgError))
	require.True(t, isSentinel(err))

	oom := &pgconn.PgError{Code: "53200", Message: "out of memory"}
	require.NotErrorIs(t, mapErr(oom), store.ErrStorageFull)
}
