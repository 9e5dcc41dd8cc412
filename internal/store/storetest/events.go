package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

func testAppendGapFree(t *testing.T, h *harness) {
	h.createSession("ses_gap")
	last := int64(1)
	for range 40 {
		events := h.append("ses_gap", last, 2)
		require.Equal(t, last+1, events[0].Seq)
		require.Equal(t, last+2, events[1].Seq)
		last += 2
	}
	require.Equal(t, last, h.session("ses_gap").LastSeq)
	all := h.allEvents("ses_gap")
	require.Len(t, all, int(last))
	requireJSON(t, fmt.Sprintf(`{"n":%d}`, last), all[last-1].Data)
}

// testSessionLastSeq: the last seq read alone follows every append, each
// reader of a session asking at once gets it, and an unknown session is
// ErrNotFound.
func testSessionLastSeq(t *testing.T, h *harness) {
	h.createSession("ses_seq_a")
	h.createSession("ses_seq_b")
	seq, err := h.s.SessionLastSeq(h.ctx, "ses_seq_a")
	require.NoError(t, err)
	require.Equal(t, int64(1), seq)
	h.append("ses_seq_a", 1, 3)
	seq, err = h.s.SessionLastSeq(h.ctx, "ses_seq_a")
	require.NoError(t, err)
	require.Equal(t, int64(4), seq, "an append committed before the read is seen")

	// Asked at once for two sessions (and twice for one), as runners do:
	// each reader gets its own session's seq.
	var wg sync.WaitGroup
	got := make([]int64, 6)
	errs := make([]error, 6)
	for i := range got {
		id := []string{"ses_seq_a", "ses_seq_b"}[i%2]
		wg.Go(func() { got[i], errs[i] = h.s.SessionLastSeq(h.ctx, id) })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		require.Equal(t, []int64{4, 1}[i%2], got[i], "reader %d", i)
	}

	_, err = h.s.SessionLastSeq(h.ctx, "ses_seq_none")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = h.s.SessionLastSeq(h.ctx, "")
	requireInvalid(t, err, "id")
}

func testAppendConflict(t *testing.T, h *harness) {
	h.createSession("ses_conflict")
	h.append("ses_conflict", 1, 1)
	for _, expected := range []int64{0, 1, 3, 100} {
		p := appendParams("ses_conflict", expected, 2)
		p.Status = "should_not_be_written"
		_, err := h.s.EventAppend(h.ctx, p)
		require.ErrorIs(t, err, store.ErrConflict, "expected seq %d", expected)
	}
	got := h.session("ses_conflict")
	require.Equal(t, int64(2), got.LastSeq)
	require.Equal(t, "running", got.Status, "a refused append writes no projection")
	require.Len(t, h.allEvents("ses_conflict"), 2)
}

func testAppendConcurrentSameSeq(t *testing.T, h *harness) {
	h.createSession("ses_race")
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			p := appendParams("ses_race", 1, 2)
			p.State = json.RawMessage(fmt.Sprintf(`{"writer":%d}`, i))
			_, errs[i] = h.s.EventAppend(h.ctx, p)
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "two appends with the same expected seq both succeeded")
			winner = i
			continue
		}
		require.ErrorIs(t, err, store.ErrConflict)
	}
	require.NotEqual(t, -1, winner, "one append must succeed")
	got := h.session("ses_race")
	require.Equal(t, int64(3), got.LastSeq)
	requireJSON(t, fmt.Sprintf(`{"writer":%d}`, winner), got.State, "the winner's projection is stored")
	require.Len(t, h.allEvents("ses_race"), 3)
}

// testAppendConcurrentRetries has writers race on one session, re-reading
// and retrying on conflict: every event lands exactly once, seqs stay
// gap-free.
func testAppendConcurrentRetries(t *testing.T, h *harness) {
	h.createSession("ses_retry")
	const (
		writers = 6
		each    = 8
	)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; i < each; {
				row, err := h.s.SessionGet(h.ctx, "ses_retry")
				if err != nil {
					errs[w] = err
					return
				}
				p := appendParams("ses_retry", row.LastSeq, 1)
				p.Events[0].WorkerID = fmt.Sprintf("w%d", w)
				p.Events[0].Data = json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				_, err = h.s.EventAppend(h.ctx, p)
				switch {
				case err == nil:
					i++
				case errors.Is(err, store.ErrConflict):
				default:
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	all := h.allEvents("ses_retry")
	require.Len(t, all, 1+writers*each)
	seen := make(map[string]bool)
	for _, e := range all[1:] {
		key := string(e.Data)
		require.False(t, seen[key], "event %s stored twice", key)
		seen[key] = true
	}
}

func testAppendProjection(t *testing.T, h *harness) {
	h.createSession("ses_proj", runnable)
	wake := at(time.Hour)
	h.append("ses_proj", 1, 1, func(p *store.EventAppendParams) {
		p.Status = "waiting"
		p.State = json.RawMessage(`{"status":"waiting","pending":["x"]}`)
		p.UpdatedAt = at(time.Minute)
		p.Runnable = false
		p.WakeAt = &wake
	})
	got := h.session("ses_proj")
	require.Equal(t, "waiting", got.Status)
	requireJSON(t, `{"status":"waiting","pending":["x"]}`, got.State)
	require.Equal(t, at(time.Minute), got.UpdatedAt)
	require.False(t, got.Runnable)
	require.NotNil(t, got.WakeAt)
	require.Equal(t, wake, *got.WakeAt)
	requireJSON(t, `{"goal":"test"}`, got.Spec, "the pinned spec never changes")
	require.Equal(t, t0, got.CreatedAt)

	h.append("ses_proj", 2, 1, func(p *store.EventAppendParams) {
		p.Status = "running"
		p.Runnable = true
		p.WakeAt = nil
	})
	got = h.session("ses_proj")
	require.True(t, got.Runnable)
	require.Nil(t, got.WakeAt, "WakeAt nil clears the wake time")
}

func testEventList(t *testing.T, h *harness) {
	h.createSession("ses_list")
	h.append("ses_list", 1, 9, func(p *store.EventAppendParams) {
		for i := range p.Events {
			p.Events[i].TurnID = "turn_1"
			p.Events[i].Step = i
			p.Events[i].WorkerID = "worker-a"
		}
	})
	page, err := h.s.EventList(h.ctx, "ses_list", 3, 4)
	require.NoError(t, err)
	require.Len(t, page, 4)
	for i, e := range page {
		seq := int64(4 + i)
		require.Equal(t, seq, e.Seq)
		require.Equal(t, "ses_list", e.SessionID)
		require.Equal(t, "test.event", e.Type)
		require.Equal(t, at(time.Duration(seq)*time.Millisecond), e.Time)
		require.Equal(t, time.UTC, e.Time.Location())
		require.Equal(t, "turn_1", e.TurnID)
		require.Equal(t, int(seq-2), e.Step)
		require.Equal(t, "worker-a", e.WorkerID)
		requireJSON(t, fmt.Sprintf(`{"n":%d}`, seq), e.Data)
	}

	rest, err := h.s.EventList(h.ctx, "ses_list", 7, 100)
	require.NoError(t, err)
	require.Len(t, rest, 3)
	require.Equal(t, int64(10), rest[2].Seq)

	none, err := h.s.EventList(h.ctx, "ses_list", 10, 100)
	require.NoError(t, err)
	require.Empty(t, none, "nothing after the last seq is not an error")

	first, err := h.s.EventList(h.ctx, "ses_list", 0, 1)
	require.NoError(t, err)
	require.Len(t, first, 1)
	require.Equal(t, "session.created", first[0].Type)
	require.Empty(t, first[0].TurnID)
}
