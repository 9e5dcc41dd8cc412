package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// testSessionCountByStatus: counts follow the sessions' status as appends
// change it; statuses without sessions are absent.
func testSessionCountByStatus(t *testing.T, h *harness) {
	counts, err := h.s.SessionCountByStatus(h.ctx)
	require.NoError(t, err)
	require.Empty(t, counts)

	for _, id := range []string{"ses_a", "ses_b", "ses_c"} {
		h.createSession(id)
	}
	h.createSession("ses_d", func(p *store.SessionCreateParams) { p.Session.Status = "idle" })
	counts, err = h.s.SessionCountByStatus(h.ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"queued": 3, "idle": 1}, counts)

	h.append("ses_a", 1, 1) // appendParams sets status running
	h.append("ses_b", 1, 1, func(p *store.EventAppendParams) { p.Status = "idle" })
	counts, err = h.s.SessionCountByStatus(h.ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"queued": 1, "running": 1, "idle": 2}, counts)
}

// testActionPendingStats: pending actions only, by the document's type,
// with the oldest creation time of each type; a resolution removes an
// action from the counts.
func testActionPendingStats(t *testing.T, h *harness) {
	stats, err := h.s.ActionPendingStats(h.ctx)
	require.NoError(t, err)
	require.Empty(t, stats)

	h.createSession("ses_a")
	h.createSession("ses_b")
	h.append("ses_a", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{
			actionDoc("act_a1", "pending", "approval", at(3*time.Second)),
			actionDoc("act_a2", "resolved", "approval", at(time.Second)),
			actionDoc("act_a3", "pending", "input", at(5*time.Second)),
			doc(store.DocTurn, "turn_a", "pending", `{"type":"approval"}`, at(0)),
		}
	})
	h.append("ses_b", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{
			actionDoc("act_b1", "pending", "approval", at(2*time.Second)),
			actionDoc("act_b2", "cancelled", "budget", at(time.Second)),
		}
	})
	stats, err = h.s.ActionPendingStats(h.ctx)
	require.NoError(t, err)
	require.Equal(t, []store.ActionTypeStats{
		{Type: "approval", Count: 2, OldestCreatedAt: at(2 * time.Second)},
		{Type: "input", Count: 1, OldestCreatedAt: at(5 * time.Second)},
	}, stats)

	h.append("ses_b", 2, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{actionDoc("act_b1", "resolved", "approval", at(2*time.Second))}
	})
	stats, err = h.s.ActionPendingStats(h.ctx)
	require.NoError(t, err)
	require.Equal(t, []store.ActionTypeStats{
		{Type: "approval", Count: 1, OldestCreatedAt: at(3 * time.Second)},
		{Type: "input", Count: 1, OldestCreatedAt: at(5 * time.Second)},
	}, stats)
}
