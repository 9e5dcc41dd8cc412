package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// newID returns a fresh, time-ordered id with a type prefix (ses_, turn_).
func newID(prefix string, now time.Time) string {
	return prefix + strings.ToLower(ulid.MustNew(ulid.Timestamp(now), rand.Reader).String())
}

// derivedID returns an id that depends only on its parts, so a resumed worker
// derives exactly the ids (effects, actions, idempotency keys) the dead one
// derived for the same call.
func derivedID(prefix string, parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%v\x00", p)
	}
	return prefix + hex.EncodeToString(h.Sum(nil))[:32]
}

// idempotencyKey is the key of one tool call: session, turn, step, call index.
func idempotencyKey(sessionID, turnID string, step, index int) string {
	return derivedID("lhk_", sessionID, turnID, step, index)
}

func effectID(sessionID, turnID string, step, index int) string {
	return derivedID("eff_", sessionID, turnID, step, index)
}
