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

	"github.com/longhaul-dev/longhaul/internal/journal"
)

// newID returns a fresh, time-ordered id with a type prefix (ses_, turn_).
func newID(prefix string, now time.Time) string {
	return prefix + strings.ToLower(ulid.MustNew(ulid.Timestamp(now), rand.Reader).String())
}

// derivedID returns an id that depends only on its parts, so a resumed worker
// derives exactly the ids (effects, actions, idempotency keys) the dead one
// derived for the same call (checkpointID's are made otherwise).
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

// effectID is the ledger's id of a call's effect: the id the journal gave
// the call if it was started before, else the one derived from the call.
// Its derivation stays that of the earlier releases: during a rolling
// upgrade a node of the previous release may resume a call this one
// started, and it derives the id rather than reading it, so a new form
// would open a second effect for the call. Taking the journal's id first
// lets a later release change the form (as checkpointID did), once no
// node derives it.
func effectID(c *journal.Call, sessionID, turnID string, step int) string {
	if c.EffectID != "" {
		return c.EffectID
	}
	return derivedID("eff_", sessionID, turnID, step, c.Index)
}

// checkpointID is the id of the checkpoint at seq of a session: derived
// from both, so a worker that resumes after a crash derives the same one.
// Nothing derives a checkpoint's id again to find it (a checkpoint is
// named by its event), so its form may change between releases.
//
// It begins with the session's own id when the engine made that id (a
// ULID, or a sub-agent's hash) and ends with seq, twelve digits: a
// session's checkpoints sort by their position, and those of the sessions
// created here by their age, so the checkpoints table's id index takes a
// step's row where the newest sessions' rows are, on a page its commit
// writes anyway, rather than on a page at random (and now and then a page
// split there); a sub-agent's hash places its session's rows at random,
// but together. No separator: a fork knows the ids of the engine's shapes
// by their shape alone (fork.go's idToken). A session id of another shape
// (an import's) gets the earlier form, a hash.
func checkpointID(sessionID string, seq int64) string {
	own := strings.TrimPrefix(sessionID, "ses_")
	if len(own) != 26 && len(own) != 32 || strings.IndexFunc(own, notIDChar) >= 0 || seq < 0 || seq > 999_999_999_999 {
		return derivedID("ckpt_", sessionID, seq)
	}
	return fmt.Sprintf("ckpt_%s%012d", own, seq)
}

// notIDChar reports whether r is not in the ids the engine makes: lowercase
// Crockford base32 (newID) or hex (derivedID).
func notIDChar(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'z') }
