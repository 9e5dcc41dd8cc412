package sqlite

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// mapErr translates driver errors to the store's sentinels at the package
// boundary, keeping the driver's error in the chain for the log.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "sql: database is closed") ||
		strings.Contains(err.Error(), "sql: statement is closed") {
		return fmt.Errorf("%w: %w", store.ErrClosed, err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			// Every foreign key names a session.
			return fmt.Errorf("session: %w: %w", store.ErrNotFound, err)
		}
		if se.Code()&0xff == sqlite3.SQLITE_FULL {
			// The volume is full (SQLite's VFS turns ENOSPC into
			// SQLITE_FULL): the statement or transaction was rolled back.
			return fmt.Errorf("%w: %w", store.ErrStorageFull, err)
		}
	}
	if store.IsStorageFull(err) {
		// ENOSPC or EDQUOT surfaced as such (e.g. creating the WAL).
		return fmt.Errorf("%w: %w", store.ErrStorageFull, err)
	}
	return err
}

// isNoTransaction reports the error of a ROLLBACK with no open transaction.
func isNoTransaction(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no transaction is active")
}

// Times are stored as unix microseconds in UTC.

func toMicros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// nullMicros stores a nil time as NULL.
func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// jsonText stores an empty document as NULL and any other as its text.
func jsonText(doc json.RawMessage) any {
	if len(doc) == 0 {
		return nil
	}
	return string(doc)
}

func fromJSONText(v sql.NullString) json.RawMessage {
	if !v.Valid {
		return nil
	}
	return json.RawMessage(v.String)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// checks refuses bad input before it reaches the writer, with the same rules
// and messages as every driver. SQLite stores any bytes as TEXT, so it does
// not refuse NUL bytes or invalid UTF-8.
var checks = storeutil.Checks{DocKinds: docTables}
