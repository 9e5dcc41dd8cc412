package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/journal"
)

// derivedIDByFmt is derivedID as it was written first: every part printed
// with fmt's %v. The ids of journals written before must stay derivable.
func derivedIDByFmt(prefix string, parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%v\x00", p)
	}
	return prefix + hex.EncodeToString(h.Sum(nil))[:32]
}

// TestDerivedIDAsPrintedByFmt: the parts written without fmt hash to the
// same id as fmt's %v gives, for every kind of part the engine passes and
// for the long, negative, empty and non-ASCII ones.
func TestDerivedIDAsPrintedByFmt(t *testing.T) {
	long := strings.Repeat("ses_01jabcdefghjkmnpqrstvwxyz", 12) // past the stack buffer
	cases := [][]any{
		{},
		{""},
		{"ses_01j", "turn_01j", 3, 0},
		{"ses_01j", "turn_01j", 0, 12, "approval"},
		{"ses_01j", "model", 1 << 20, -7},
		{"ses_01j", "turn_01j", "monitor", int64(123456789012), 4},
		{"ses_01j", "turn_01j", int64(-1), int64(math.MinInt64), math.MaxInt},
		{"ses_01j", "turn_01j", 2, "budget", "cost_usd", 1.5, 7, 9},
		{"ses_01j", "turn_01j", 2, "budget", "tokens", 0.1 + 0.2, 1e21, float32(2.5)},
		{"ses_01j", true, false, uint(7), int32(-3), nil},
		{"ses_\x00x", "é€\xff", long, long},
	}
	for _, parts := range cases {
		for _, prefix := range []string{"", "act_", "eff_", "lhk_", "tres_"} {
			require.Equal(t, derivedIDByFmt(prefix, parts...), derivedID(prefix, parts...), "prefix %q, parts %#v", prefix, parts)
		}
	}
}

// TestSessionScopedIDs: an effect's and a checkpoint's ids sort by their
// session's age (a later session's after an earlier one's, whatever their
// steps), a session's checkpoints by their position, and each has the shape
// a fork renames (idToken); a sub-agent's session, whose id is a hash,
// scopes them too. The same parts give the same id, as a resumed worker
// needs.
func TestSessionScopedIDs(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	older, newer := newID("ses_", t0), newID("ses_", t0.Add(time.Millisecond))
	child := derivedID("ses_", older, "turn_x", 3, 0, "subagent")
	call := func(index int) *journal.Call { return &journal.Call{Index: index} }
	for _, sid := range []string{older, newer, child} {
		e1 := effectID(call(0), sid, "turn_a", 9)
		require.Equal(t, e1, effectID(call(0), sid, "turn_a", 9), "derived again, the same")
		require.NotEqual(t, e1, effectID(call(1), sid, "turn_a", 9))
		require.NotEqual(t, e1, effectID(call(0), sid, "turn_b", 9))
		for _, id := range []string{e1, checkpointID(sid, 7)} {
			require.True(t, idToken.MatchString(`"`+id+`"`), "%s: a fork renames it", id)
			require.Contains(t, id, strings.TrimPrefix(sid, "ses_"))
		}
	}
	require.Less(t, effectID(call(5), older, "turn_z", 99), effectID(call(0), newer, "turn_a", 1))
	require.Less(t, checkpointID(older, 1_000_000), checkpointID(newer, 1))
	require.Less(t, checkpointID(newer, 9), checkpointID(newer, 10))
	require.Less(t, checkpointID(newer, 99_999), checkpointID(newer, 100_000))
}

// TestEffectIDOfAStartedCallIsKept: a call started before, by this build or
// an older one that derived effect ids otherwise, keeps the id the journal
// gave it, so that its retry after a crash or an upgrade updates the same
// effect in the ledger rather than opening another.
func TestEffectIDOfAStartedCallIsKept(t *testing.T) {
	sid := newID("ses_", time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	old := derivedID("eff_", sid, "turn_a", 2, 0) // an older build's
	c := &journal.Call{Index: 0, EffectID: old, Attempts: 1}
	require.Equal(t, old, effectID(c, sid, "turn_a", 2))
	c.EffectID = ""
	require.NotEqual(t, old, effectID(c, sid, "turn_a", 2), "a call not started yet: this build's id")
}
