package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
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

// TestMapErrUnavailable: the server going away (pg_ctl stop, a failover, a
// refused or broken connection) is the store's ErrUnavailable, so a worker
// starts over instead of failing a session's turn; an answer to the
// statement, or the caller's own context ending, is not.
func TestMapErrUnavailable(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"},
		&pgconn.PgError{Code: "57P02", Message: "crash shutdown"},
		&pgconn.PgError{Code: "57P03", Message: "the database system is starting up"},
		&pgconn.PgError{Code: "08006", Message: "connection failure"},
		io.ErrUnexpectedEOF,
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
	} {
		got := mapErr(fmt.Errorf("append events: %w", err))
		require.ErrorIs(t, got, store.ErrUnavailable, "%v", err)
		require.ErrorIs(t, got, err, "the driver's error stays in the chain")
		require.True(t, isSentinel(got))
	}
	for _, err := range []error{
		&pgconn.PgError{Code: "23505", Message: "duplicate key"},
		&pgconn.PgError{Code: "53100", Message: "disk full"},
		&pgconn.PgError{Code: "57014", Message: "canceling statement due to user request"},
		context.Canceled,
		context.DeadlineExceeded,
		errors.New("something else"),
	} {
		require.NotErrorIs(t, mapErr(fmt.Errorf("append events: %w", err)), store.ErrUnavailable, "%v", err)
	}
}
