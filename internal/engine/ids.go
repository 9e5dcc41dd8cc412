package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
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
//
// The hashed bytes are each part as fmt's %v prints it, followed by a NUL.
// Strings and integers (every id's parts on a step's path) are written
// without fmt, into a buffer on the stack: the same bytes, without the
// reflection and the allocations of a formatted print.
func derivedID(prefix string, parts ...any) string {
	var stack [256]byte
	buf := stack[:0]
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			buf = append(buf, v...)
		case int:
			buf = strconv.AppendInt(buf, int64(v), 10)
		case int64:
			buf = strconv.AppendInt(buf, v, 10)
		default:
			buf = fmt.Appendf(buf, "%v", v)
		}
		buf = append(buf, 0)
	}
	sum := sha256.Sum256(buf)
	var out [64]byte
	id := append(out[:0], prefix...)
	id = hex.AppendEncode(id, sum[:16])
	return string(id)
}

// idempotencyKey is the key of one tool call: session, turn, step, call index.
func idempotencyKey(sessionID, turnID string, step, index int) string {
	return derivedID("lhk_", sessionID, turnID, step, index)
}

func effectID(sessionID, turnID string, step, index int) string {
	return derivedID("eff_", sessionID, turnID, step, index)
}
