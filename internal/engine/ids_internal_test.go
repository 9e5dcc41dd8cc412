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

// TestCheckpointIDs: a checkpoint's id sorts by its session's age (a later
// session's after an earlier one's, whatever their positions) and, within
// the session, by its position; it has the shape a fork renames (idToken),
// for a sub-agent's session (a hash) too; the same session and position
// give the same id, as a resumed worker needs. A session id the engine did
// not make (an import's) gets the earlier form.
func TestCheckpointIDs(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	older, newer := newID("ses_", t0), newID("ses_", t0.Add(time.Millisecond))
	child := derivedID("ses_", older, "turn_x", 3, 0, "subagent")
	for _, sid := range []string{older, newer, child} {
		id := checkpointID(sid, 7)
		require.Equal(t, id, checkpointID(sid, 7), "derived again, the same")
		require.NotEqual(t, id, checkpointID(sid, 8))
		require.True(t, idToken.MatchString(id), "%s: a fork renames it", id)
		require.True(t, strings.HasPrefix(id, "ckpt_"+strings.TrimPrefix(sid, "ses_")), id)
	}
	require.Less(t, checkpointID(older, 1_000_000), checkpointID(newer, 1))
	require.Less(t, checkpointID(newer, 9), checkpointID(newer, 10))
	require.Less(t, checkpointID(newer, 99_999), checkpointID(newer, 100_000))
	for _, sid := range []string{"ses_imported-from_elsewhere", "ses_short", "ses_" + strings.Repeat("a", 40), "ses_01M94Z6556VJ6DDM74E92HW49H"} {
		require.Equal(t, derivedID("ckpt_", sid, int64(7)), checkpointID(sid, 7), sid)
		require.True(t, idToken.MatchString(checkpointID(sid, 7)), sid)
	}
}

// TestEffectIDOfAStartedCallIsKept: a call started before keeps the effect
// id the journal gave it, whatever form that is, so that its retry after a
// crash updates the same effect in the ledger rather than opening another;
// a call not started yet gets the id derived from it, as earlier releases
// derived it (a node of the previous release, during a rolling upgrade,
// derives it so).
func TestEffectIDOfAStartedCallIsKept(t *testing.T) {
	sid := newID("ses_", time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	other := "eff_" + strings.TrimPrefix(sid, "ses_") + "3f1c9a0e5b7d2c48" // another release's form
	c := &journal.Call{Index: 0, EffectID: other, Attempts: 1}
	require.Equal(t, other, effectID(c, sid, "turn_a", 2))
	c.EffectID = ""
	require.Equal(t, derivedIDByFmt("eff_", sid, "turn_a", 2, 0), effectID(c, sid, "turn_a", 2), "a call not started yet")
}
