package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// PostgreSQL error codes the driver interprets.
const (
	codeUniqueViolation      = "23505"
	codeForeignKeyViolation  = "23503"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	// codeDiskFull is disk_full; the class 53 (insufficient resources)
	// holds it with out_of_memory and too_many_connections, which are not
	// about storage.
	codeDiskFull = "53100"
	// The server going away: admin_shutdown (pg_ctl stop, a failover),
	// crash_shutdown, cannot_connect_now (starting or shutting down);
	// class 08 is connection_exception.
	codeAdminShutdown    = "57P01"
	codeCrashShutdown    = "57P02"
	codeCannotConnectNow = "57P03"
	classConnection      = "08"
)

// mapErr translates driver errors to the store's sentinels at the package
// boundary, keeping the driver's error in the chain for the log. Once Close
// has started, a failure that is not the database's answer (a closed pool, a
// connection torn down) is store.ErrClosed.
func (s *Store) mapErr(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if s.closed.Load() && !errors.As(err, &pgErr) && !isSentinel(err) {
		return fmt.Errorf("%w: %w", store.ErrClosed, err)
	}
	return mapErr(err)
}

func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeUniqueViolation:
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case codeForeignKeyViolation:
			// Every foreign key names a session, except the attempts' one,
			// whose delivery is read first.
			return fmt.Errorf("session: %w: %w", store.ErrNotFound, err)
		case codeDiskFull:
			return fmt.Errorf("%w: %w", store.ErrStorageFull, err)
		}
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// unavailable reports an error that says the database is out of reach or
// dropped the connection, rather than an answer to the statement: a worker
// that meets one starts over from the journal once the database is back,
// instead of failing the session's turn.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up (a context error is a net.Error too)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow:
			return true
		}
		return strings.HasPrefix(pgErr.Code, classConnection)
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}

func isSentinel(err error) bool {
	for _, s := range []error{store.ErrNotFound, store.ErrConflict, store.ErrLeaseLost, store.ErrClosed, store.ErrStorageFull, store.ErrUnavailable} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// retryable reports a transaction PostgreSQL aborted as a whole and that can
// run again from the start.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == codeSerializationFailure || pgErr.Code == codeDeadlockDetected
}

// scrub keeps a password out of an error's message. pgx's connection errors
// name the user, host and database but not the password; this is the
// belt to those braces, for any error that reaches a caller or a log while
// the connection string's password is known.
func scrub(err error, password string) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return &scrubbedError{msg: strings.ReplaceAll(err.Error(), password, "xxxxx"), err: err}
}

// scrubbedError is an error whose message had a password masked; Unwrap
// still lets errors.Is and errors.As see the cause.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
