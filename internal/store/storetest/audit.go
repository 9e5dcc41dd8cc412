package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// auditRow is a well-formed entry at t0+d.
func auditRow(d time.Duration, name string) *store.AuditRow {
	return &store.AuditRow{
		Time:      at(d),
		KeyID:     "key_" + name,
		ActorName: name,
		ActorRole: "operator",
		Remote:    "192.0.2.7",
		Method:    "POST",
		Route:     "POST /v1/sessions/{id}/cancel",
		Targets:   map[string]string{"id": "ses_" + name},
		Status:    200,
		RequestID: "req-" + name,
	}
}

// testAudit: appends are numbered in order and read back as written,
// oldest first; since, actor (key id, name or a refused key's prefix),
// after and limit select; pruning deletes by age only, and again is a
// no-op.
func testAudit(t *testing.T, h *harness) {
	list, err := h.s.AuditList(h.ctx, &store.AuditListParams{})
	require.NoError(t, err)
	require.Empty(t, list)

	alice := auditRow(time.Second, "alice")
	bob := auditRow(2*time.Second, "bob")
	refused := &store.AuditRow{
		Time: at(3 * time.Second), KeyPrefix: "lh_abcdefgh", Remote: "198.51.100.1",
		Method: "GET", Route: "GET /v1/sessions", Status: 401, RequestID: "req-refused",
	}
	alice2 := auditRow(4*time.Second, "alice")
	alice2.Route, alice2.Method, alice2.Status = "DELETE /v1/keys/{id}", "DELETE", 404
	alice2.Targets = map[string]string{"id": "key_x"}
	var seqs []int64
	for _, r := range []*store.AuditRow{alice, bob, refused, alice2} {
		seq, err := h.s.AuditAppend(h.ctx, r)
		require.NoError(t, err)
		if len(seqs) > 0 {
			require.Greater(t, seq, seqs[len(seqs)-1], "seq grows with every append")
		}
		seqs = append(seqs, seq)
		r.Seq = seq
	}

	list, err = h.s.AuditList(h.ctx, &store.AuditListParams{})
	require.NoError(t, err)
	require.Equal(t, []*store.AuditRow{alice, bob, refused, alice2}, list, "oldest first, as written")

	for name, tc := range map[string]struct {
		p    store.AuditListParams
		want []*store.AuditRow
	}{
		"since":          {store.AuditListParams{Since: at(2 * time.Second)}, []*store.AuditRow{bob, refused, alice2}},
		"actor by name":  {store.AuditListParams{Actor: "alice"}, []*store.AuditRow{alice, alice2}},
		"actor by id":    {store.AuditListParams{Actor: "key_bob"}, []*store.AuditRow{bob}},
		"actor prefix":   {store.AuditListParams{Actor: "lh_abcdefgh"}, []*store.AuditRow{refused}},
		"unknown actor":  {store.AuditListParams{Actor: "carol"}, nil},
		"after":          {store.AuditListParams{After: seqs[1]}, []*store.AuditRow{refused, alice2}},
		"limit":          {store.AuditListParams{Limit: 2}, []*store.AuditRow{alice, bob}},
		"after and name": {store.AuditListParams{After: seqs[0], Actor: "alice", Limit: 1}, []*store.AuditRow{alice2}},
	} {
		got, err := h.s.AuditList(h.ctx, &tc.p)
		require.NoError(t, err, name)
		require.Equal(t, tc.want, got, name)
	}

	n, err := h.s.AuditPrune(h.ctx, at(3*time.Second))
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "the entries before the cut")
	n, err = h.s.AuditPrune(h.ctx, at(3*time.Second))
	require.NoError(t, err)
	require.Zero(t, n, "pruning again deletes nothing")
	list, err = h.s.AuditList(h.ctx, &store.AuditListParams{})
	require.NoError(t, err)
	require.Equal(t, []*store.AuditRow{refused, alice2}, list)

	// A number is never given twice, even once the newest entries are gone.
	_, err = h.s.AuditPrune(h.ctx, at(time.Hour))
	require.NoError(t, err)
	seq, err := h.s.AuditAppend(h.ctx, auditRow(5*time.Second, "carol"))
	require.NoError(t, err)
	require.Greater(t, seq, seqs[3])
}

// testAuditInvalid: malformed entries and parameters are refused before
// anything is written or read.
func testAuditInvalid(t *testing.T, h *harness) {
	for name, mod := range map[string]func(*store.AuditRow){
		"zero time":      func(r *store.AuditRow) { r.Time = time.Time{} },
		"empty method":   func(r *store.AuditRow) { r.Method = "" },
		"status 0":       func(r *store.AuditRow) { r.Status = 0 },
		"status 600":     func(r *store.AuditRow) { r.Status = 600 },
		"empty target":   func(r *store.AuditRow) { r.Targets = map[string]string{"": "x"} },
		"too many targs": func(r *store.AuditRow) { r.Targets = manyTargets(17) },
	} {
		r := auditRow(time.Second, "bad")
		mod(r)
		_, err := h.s.AuditAppend(h.ctx, r)
		require.Error(t, err, name)
	}
	_, err := h.s.AuditAppend(h.ctx, nil)
	require.Error(t, err)
	for name, p := range map[string]*store.AuditListParams{
		"nil":            nil,
		"negative limit": {Limit: -1},
		"limit too big":  {Limit: 1001},
		"negative after": {After: -1},
	} {
		_, err := h.s.AuditList(h.ctx, p)
		require.Error(t, err, name)
	}
	_, err = h.s.AuditPrune(h.ctx, time.Time{})
	require.Error(t, err, "a zero cut would be a mistake, not a wish to keep everything")
	list, err := h.s.AuditList(h.ctx, &store.AuditListParams{})
	require.NoError(t, err)
	require.Empty(t, list, "nothing was written")
}

func manyTargets(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[string(rune('a'+i))] = "x"
	}
	return m
}

// testAuditClosed: every audit method of a closed store is ErrClosed.
func testAuditClosed(t *testing.T, h *harness) {
	require.NoError(t, h.s.Close())
	_, err := h.s.AuditAppend(h.ctx, auditRow(time.Second, "closed"))
	require.ErrorIs(t, err, store.ErrClosed, "AuditAppend")
	_, err = h.s.AuditList(h.ctx, &store.AuditListParams{})
	require.ErrorIs(t, err, store.ErrClosed, "AuditList")
	_, err = h.s.AuditPrune(h.ctx, t0)
	require.ErrorIs(t, err, store.ErrClosed, "AuditPrune")
}

// testAuditPruneConcurrent: nodes that prune at once (each every hour)
// delete each entry once between them, and none fails for the others.
func testAuditPruneConcurrent(t *testing.T, h *harness) {
	const entries, nodes = 40, 4
	for i := range entries {
		_, err := h.s.AuditAppend(h.ctx, auditRow(time.Duration(i)*time.Second, fmt.Sprintf("k%d", i)))
		require.NoError(t, err)
	}
	deleted := make(chan int64, nodes)
	var wg sync.WaitGroup
	for range nodes {
		wg.Go(func() {
			n, err := h.s.AuditPrune(h.ctx, at(time.Duration(entries/2)*time.Second))
			assert.NoError(t, err)
			deleted <- n
		})
	}
	wg.Wait()
	close(deleted)
	var total int64
	for n := range deleted {
		total += n
	}
	require.EqualValues(t, entries/2, total, "each old entry deleted once")
	list, err := h.s.AuditList(h.ctx, &store.AuditListParams{})
	require.NoError(t, err)
	require.Len(t, list, entries/2)
	require.Equal(t, at(time.Duration(entries/2)*time.Second), list[0].Time)
}
