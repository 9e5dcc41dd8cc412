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

// effectID is the ledger's id of a call's effect: the id the journal
// gives the call if it was started before (by this build or an older one,
// which derived ids otherwise), else a new one of the session's
// (sessionScopedID).
func effectID(c *journal.Call, sessionID, turnID string, step int) string {
	if c.EffectID != "" {
		return c.EffectID
	}
	return sessionScopedID("eff_", sessionID, derivedID("", sessionID, turnID, step, c.Index)[:16])
}

// checkpointID is the id of the checkpoint at seq of a session: derived
// from both, so a worker that resumes after a crash derives the same one.
func checkpointID(sessionID string, seq int64) string {
	return sessionScopedID("ckpt_", sessionID, fmt.Sprintf("%012d", seq))
}

// sessionScopedID returns prefix, the session's own id without its prefix,
// and suffix, which is lowercase hex or digits. A session's id is
// time-ordered (newID), so the effects and checkpoints, one of each a step,
// sort by their session and its age: their tables' id indexes take a
// step's rows where the newest sessions' rows are, one page the commit
// writes already, rather than in a page at random, one more page to write
// (and now and then a page split) a row. No separator: a fork finds the ids
// a journal mentions by their shape (fork.go's idToken).
func sessionScopedID(prefix, sessionID, suffix string) string {
	return prefix + strings.TrimPrefix(sessionID, "ses_") + suffix
}
