package postgres

import (
	"encoding/json"
	"time"
)

// Times are TIMESTAMPTZ: microsecond precision (pgx truncates finer digits
// as it sends them, like the SQLite driver's UnixMicro), returned in UTC.

// stored returns t as the database will store it.
func stored(t time.Time) time.Time { return time.UnixMicro(t.UnixMicro()).UTC() }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// jsonArg sends an empty document as NULL and any other as its text (the
// JSON columns keep it verbatim).
func jsonArg(doc json.RawMessage) any {
	if len(doc) == 0 {
		return nil
	}
	return string(doc)
}

// fromJSON returns a scanned JSON column: nil for NULL.
func fromJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// nullText sends "" as NULL.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// rowScanner is a pgx.Row or pgx.Rows.
type rowScanner interface{ Scan(dest ...any) error }
