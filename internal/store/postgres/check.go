package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// Validation: bad input is refused before it reaches the database, with an
// error naming the field and wrapping no sentinel. The rules are the SQLite
// driver's, so both refuse the same input.

func checkID(field, v string) error {
	if v == "" {
		return fmt.Errorf("%s is empty", field)
	}
	return checkText(field, v)
}

// checkText refuses what a TEXT column cannot store (PostgreSQL text is
// valid UTF-8 without NUL bytes); empty is allowed.
func checkText(field, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%s contains a NUL byte", field)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	return nil
}

func checkTime(field string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%s is zero", field)
	}
	if y := t.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%s %s is out of range (years 1-9999)", field, t)
	}
	return nil
}

func checkJSON(field string, doc json.RawMessage) error {
	if len(doc) != 0 && !json.Valid(doc) {
		return fmt.Errorf("%s is not valid JSON", field)
	}
	if !utf8.Valid(doc) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	return nil
}

// checkSHA256 requires the lowercase hex form used as blob keys.
func checkSHA256(field, digest string) error {
	if len(digest) != 64 {
		return fmt.Errorf("%s must be 64 lowercase hex digits, got %d characters", field, len(digest))
	}
	if _, err := hex.DecodeString(digest); err != nil || strings.ToLower(digest) != digest {
		return fmt.Errorf("%s must be 64 lowercase hex digits", field)
	}
	return nil
}

// checkBlob requires digest to be the lowercase hex SHA-256 of data: a blob
// stored under the wrong key would be served as other content forever.
func checkBlob(field, digest string, data []byte) error {
	if err := checkSHA256(field, digest); err != nil {
		return err
	}
	if hexSHA256(data) != digest {
		return fmt.Errorf("%s %s is not the SHA-256 of the data", field, digest)
	}
	return nil
}

func hexSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func checkBlobs(blobs []store.BlobWrite) error {
	for i := range blobs {
		if err := checkBlob(fmt.Sprintf("blobs[%d].sha256", i), blobs[i].SHA256, blobs[i].Data); err != nil {
			return err
		}
	}
	return nil
}

func checkNewEvents(events []store.NewEvent) error {
	for i := range events {
		e := &events[i]
		if err := checkID(fmt.Sprintf("events[%d].type", i), e.Type); err != nil {
			return err
		}
		if err := checkTime(fmt.Sprintf("events[%d].time", i), e.Time); err != nil {
			return err
		}
		if e.Step < 0 {
			return fmt.Errorf("events[%d].step must not be negative, got %d", i, e.Step)
		}
		if err := checkText(fmt.Sprintf("events[%d].turn_id", i), e.TurnID); err != nil {
			return err
		}
		if err := checkText(fmt.Sprintf("events[%d].worker_id", i), e.WorkerID); err != nil {
			return err
		}
		if err := checkJSON(fmt.Sprintf("events[%d].data", i), e.Data); err != nil {
			return err
		}
	}
	return nil
}

func checkDocs(docs []store.DocWrite) error {
	for i := range docs {
		d := &docs[i]
		if _, ok := docTables[d.Kind]; !ok {
			return fmt.Errorf("docs[%d].kind %q is not a projection kind", i, d.Kind)
		}
		if err := checkID(fmt.Sprintf("docs[%d].id", i), d.ID); err != nil {
			return err
		}
		if err := checkText(fmt.Sprintf("docs[%d].session_id", i), d.SessionID); err != nil {
			return err
		}
		if err := checkText(fmt.Sprintf("docs[%d].status", i), d.Status); err != nil {
			return err
		}
		if err := checkJSON(fmt.Sprintf("docs[%d].doc", i), d.Doc); err != nil {
			return err
		}
		if err := checkTime(fmt.Sprintf("docs[%d].created_at", i), d.CreatedAt); err != nil {
			return err
		}
	}
	return nil
}

func checkLease(l store.Lease) error {
	if err := checkID("lease.session_id", l.SessionID); err != nil {
		return err
	}
	if err := checkID("lease.owner", l.Owner); err != nil {
		return err
	}
	if l.Epoch < 1 {
		return fmt.Errorf("lease.epoch must be at least 1 (a claim sets it), got %d", l.Epoch)
	}
	return nil
}

func checkLeaseClaim(p *store.LeaseClaimParams) error {
	if p == nil {
		return errors.New("params are nil")
	}
	if err := checkID("owner", p.Owner); err != nil {
		return err
	}
	if err := checkTime("now", p.Now); err != nil {
		return err
	}
	if err := checkTime("expires_at", p.ExpiresAt); err != nil {
		return err
	}
	if !p.ExpiresAt.After(p.Now) {
		return fmt.Errorf("expires_at %s must be after now %s", p.ExpiresAt, p.Now)
	}
	if p.Limit < 1 || p.Limit > maxClaim {
		return fmt.Errorf("limit must be between 1 and %d, got %d", maxClaim, p.Limit)
	}
	return nil
}

// checkLimit applies a list's default and maximum.
func checkLimit(limit, def, maxLimit int) (int, error) {
	switch {
	case limit < 0:
		return 0, fmt.Errorf("limit must not be negative, got %d", limit)
	case limit == 0:
		return def, nil
	case limit > maxLimit:
		return 0, fmt.Errorf("limit must be at most %d, got %d", maxLimit, limit)
	}
	return limit, nil
}
