package storeutil

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

// Checks validates parameters before a driver touches its database: bad
// input is refused with an error naming the field and wrapping no sentinel.
// The rules are the store interface's contract, so every driver refuses the
// same input with the same message; the only driver-specific rule is
// StrictText.
type Checks struct {
	// StrictText refuses text and JSON that hold a NUL byte or invalid UTF-8,
	// which PostgreSQL's text and jsonb columns cannot store. SQLite stores
	// any bytes, so it leaves this off.
	StrictText bool
	// DocKinds holds the driver's projection kinds (only its keys are read:
	// the driver maps each kind to its table).
	DocKinds map[store.DocKind]string
	// JSONInDatabase leaves a JSON document's validity (and, with
	// StrictText, its UTF-8) to the database, for a driver whose database
	// parses every document it stores as JSON and refuses what is not
	// (PostgreSQL's json input), so that a hot write's documents are not
	// parsed twice. Such a driver must run Checks without it on a write
	// that failed, so bad input is still refused with its field's name
	// and before any other error. A document longer than
	// MaxJSONLeftToDatabase is checked all the same (see there).
	JSONInDatabase bool

	// encoded skips JSON's syntax in JSON (an encoded append's documents,
	// EventAppendParams.Encoded); set on a copy by EventAppend only.
	encoded bool
}

// Bounds that are part of the interface's contract, the same for every
// driver.
const (
	// MaxClaim bounds one LeaseClaim; a worker asks for the sessions it can
	// run now.
	MaxClaim = 1000
	// MaxWebhookPage bounds a page of WebhookDue and WebhookDeliveryList, and
	// a webhook claim.
	MaxWebhookPage = 1000
	// MaxSecretCiphertext and MaxSecretNonce bound a stored secret. The vault
	// enforces tighter ones (a value of at most 8 KiB); these only keep a
	// wrong caller from writing nonsense.
	MaxSecretCiphertext = 64 << 10
	MaxSecretNonce      = 64
	// MaxJSONLeftToDatabase is the longest document Checks.JSONInDatabase
	// leaves to the database: encoding/json refuses JSON nested deeper than
	// 10,000 levels, which PostgreSQL accepts, and a document of at most
	// 20,000 bytes cannot nest that deep and still be valid. In every other
	// respect PostgreSQL's json grammar and UTF-8 are encoding/json's
	// (the PostgreSQL driver's TestJSONRefusedAsChecksRefuseIt).
	MaxJSONLeftToDatabase = 20000
)

// ID requires a non-empty identifier that Text accepts.
func (c Checks) ID(field, v string) error {
	if v == "" {
		return fmt.Errorf("%s is empty", field)
	}
	return c.Text(field, v)
}

// Text refuses what the driver's text columns cannot store; empty is allowed.
func (c Checks) Text(field, v string) error {
	if !c.StrictText {
		return nil
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%s contains a NUL byte", field)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	return nil
}

// Time requires a set time whose year both drivers' encodings hold (SQLite's
// UnixMicro overflows outside about ±292,000 years; PostgreSQL's timestamptz
// ends earlier still).
func (Checks) Time(field string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%s is zero", field)
	}
	if y := t.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%s %s is out of range (years 1-9999)", field, t)
	}
	return nil
}

// JSON accepts an empty document or valid JSON.
func (c Checks) JSON(field string, doc json.RawMessage) error {
	if c.JSONInDatabase && len(doc) <= MaxJSONLeftToDatabase {
		return nil
	}
	if len(doc) != 0 && !c.encoded && !json.Valid(doc) {
		return fmt.Errorf("%s is not valid JSON", field)
	}
	// json.Valid accepts invalid UTF-8 inside strings.
	if c.StrictText && !utf8.Valid(doc) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	return nil
}

// SHA256 requires the lowercase hex form used as blob keys.
func (Checks) SHA256(field, digest string) error {
	if len(digest) != 64 {
		return fmt.Errorf("%s must be 64 lowercase hex digits, got %d characters", field, len(digest))
	}
	if _, err := hex.DecodeString(digest); err != nil || strings.ToLower(digest) != digest {
		return fmt.Errorf("%s must be 64 lowercase hex digits", field)
	}
	return nil
}

// Owners checks the arguments of BlobOwn and BlobsOwned: a project and
// blob digests.
func (c Checks) Owners(project string, digests []string) error {
	if err := c.ID("project", project); err != nil {
		return err
	}
	for i, d := range digests {
		if err := c.SHA256(fmt.Sprintf("digests[%d]", i), d); err != nil {
			return err
		}
	}
	return nil
}

// Blob requires digest to be the lowercase hex SHA-256 of data: a blob
// stored under the wrong key would be served as other content forever.
func (c Checks) Blob(field, digest string, data []byte) error {
	if err := c.SHA256(field, digest); err != nil {
		return err
	}
	if HexSHA256(data) != digest {
		return fmt.Errorf("%s %s is not the SHA-256 of the data", field, digest)
	}
	return nil
}

// BlobMap checks every blob of a BlobPutMany (digest to bytes) and lists
// them as writes.
func (c Checks) BlobMap(blobs map[string][]byte) ([]store.BlobWrite, error) {
	writes := make([]store.BlobWrite, 0, len(blobs))
	for digest, data := range blobs {
		if err := c.Blob("sha256", digest, data); err != nil {
			return nil, err
		}
		writes = append(writes, store.BlobWrite{SHA256: digest, Data: data})
	}
	return writes, nil
}

// HexSHA256 is the blob key of data.
func HexSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Blobs checks every blob of a write.
func (c Checks) Blobs(blobs []store.BlobWrite) error {
	for i := range blobs {
		if err := c.Blob(fmt.Sprintf("blobs[%d].sha256", i), blobs[i].SHA256, blobs[i].Data); err != nil {
			return err
		}
	}
	return nil
}

// NewEvents checks the events of an append. A field's name is built only
// for an error: an append carries several events, and a step appends one.
func (c Checks) NewEvents(events []store.NewEvent) error {
	for i := range events {
		if err := c.newEvent(&events[i]); err != nil {
			return fmt.Errorf("events[%d].%w", i, err)
		}
	}
	return nil
}

// newEvent checks one event; its errors name the field within the event.
func (c Checks) newEvent(e *store.NewEvent) error {
	if err := c.ID("type", e.Type); err != nil {
		return err
	}
	if err := c.Time("time", e.Time); err != nil {
		return err
	}
	if e.Step < 0 {
		return fmt.Errorf("step must not be negative, got %d", e.Step)
	}
	if err := c.Text("turn_id", e.TurnID); err != nil {
		return err
	}
	if err := c.Text("worker_id", e.WorkerID); err != nil {
		return err
	}
	return c.JSON("data", e.Data)
}

// Docs checks projection writes.
func (c Checks) Docs(docs []store.DocWrite) error {
	for i := range docs {
		if err := c.doc(&docs[i]); err != nil {
			return fmt.Errorf("docs[%d].%w", i, err)
		}
	}
	return nil
}

// doc checks one projection write; its errors name the field within it.
func (c Checks) doc(d *store.DocWrite) error {
	if _, ok := c.DocKinds[d.Kind]; !ok {
		return fmt.Errorf("kind %q is not a projection kind", d.Kind)
	}
	if err := c.ID("id", d.ID); err != nil {
		return err
	}
	if err := c.Text("session_id", d.SessionID); err != nil {
		return err
	}
	if err := c.Text("status", d.Status); err != nil {
		return err
	}
	if err := c.JSON("doc", d.Doc); err != nil {
		return err
	}
	return c.Time("created_at", d.CreatedAt)
}

// Lease checks a lease held by a caller.
func (c Checks) Lease(l store.Lease) error {
	if err := c.ID("lease.session_id", l.SessionID); err != nil {
		return err
	}
	if err := c.ID("lease.owner", l.Owner); err != nil {
		return err
	}
	if l.Epoch < 1 {
		return fmt.Errorf("lease.epoch must be at least 1 (a claim sets it), got %d", l.Epoch)
	}
	return nil
}

// LeaseClaim checks a claim of at most MaxClaim sessions.
func (c Checks) LeaseClaim(p *store.LeaseClaimParams) error {
	if p == nil {
		return errors.New("params are nil")
	}
	return c.claim(p.Owner, p.Now, "expires_at", p.ExpiresAt, p.ExpiresAt.After(p.Now), p.Limit, MaxClaim)
}

// claim checks what a claim of leases or of webhook deliveries carries: who
// claims, from now until end (endsAfter says whether end is after now, as
// the claim compares them) and how many at most.
func (c Checks) claim(owner string, now time.Time, endField string, end time.Time, endsAfter bool, limit, maxLimit int) error {
	if err := c.ID("owner", owner); err != nil {
		return err
	}
	if err := c.Time("now", now); err != nil {
		return err
	}
	if err := c.Time(endField, end); err != nil {
		return err
	}
	if !endsAfter {
		return fmt.Errorf("%s %s must be after now %s", endField, end, now)
	}
	if limit < 1 || limit > maxLimit {
		return fmt.Errorf("limit must be between 1 and %d, got %d", maxLimit, limit)
	}
	return nil
}
