package engine_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The tests in this file run in synctest bubbles, where time is what they
// test: the engine runs on its real clock (no fakeClock), which the
// bubble's virtual time drives, so a lease's 30 s or a ten-minute model call
// take no real time, and when something happens can be asserted exactly.
// The whole stack runs inside the bubble, the SQLite store included
// (modernc.org/sqlite is pure Go: no cgo thread, and its file I/O is a
// syscall the goroutine runs through, not a block the bubble waits on).
// What cannot run in a bubble: anything that waits on the network or on a
// process (a shell tool's command, an MCP server), since such a wait is not
// durable and the virtual clock would stand still through it.

// newBubbleHarness starts an engine with its real clock; it must be called
// inside the bubble, so that every goroutine the engine and database/sql
// start belongs to it. The scheduler polls once a second, as by default: at
// the 10 ms of the other tests, an hour of virtual time would be 360,000
// polls of the database.
func newBubbleHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, pollInterval: time.Second}
	h.store = openStore(t, dir)
	t.Cleanup(func() { h.store.Close() })
	h.start("node-a")
	return h
}

// settle lets virtual time pass by d, then waits until every goroutine of
// the bubble is blocked: whatever was due by then has happened.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// offsets returns when each event of the session's journal of the given
// types was written, counted from start.
func offsets(t *testing.T, h *harness, id string, start time.Time, types ...string) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, ev := range events(t, h, id, types...) {
		out = append(out, ev.Time.Sub(start))
	}
	return out
}

func (h *harness) session(id string) *lt.Session {
	h.t.Helper()
	s, err := h.eng.GetSession(context.Background(), id)
	require.NoError(h.t, err)
	return s
}

// TestSynctestLeaseRenewalAndExpiry: a worker renews its lease every third
// of the TTL while it works; when its node dies the lease runs out exactly
// one TTL after the last renewal, not a moment earlier does another node
// take the session, and at that moment it does, with a higher epoch, and
// runs the call again.
func TestSynctestLeaseRenewalAndExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t)
		ctx := context.Background()
		start := time.Now()
		// The model thinks for nine minutes: node A is mid-call, holding
		// the lease, when it dies. (Not ten: that is the model call's
		// timeout, Config.ModelTimeout, and a call answering at the very
		// moment its deadline passes may fail or not, as the two timers
		// firing at the same virtual instant are run.)
		s := create(t, h, spec(t, `[{"text":"thought it over","delay_ms":540000}]`), nil)

		settle(25 * time.Second)
		row, err := h.store.SessionGet(ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, "node-a", row.Lease.Owner)
		require.Equal(t, int64(1), row.Lease.Epoch)
		require.Equal(t, 50*time.Second, row.Lease.ExpiresAt.Sub(start), "claimed at 0 s for 30 s, renewed at 10 s and 20 s")

		hard, cancel := context.WithCancel(ctx)
		cancel()
		require.NoError(t, h.eng.Stop(hard)) // node A dies holding the lease
		h.start("node-b")

		settle(25*time.Second - time.Nanosecond) // a nanosecond before expiry
		row, err = h.store.SessionGet(ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, "node-a", row.Lease.Owner, "claimed before the lease expired")

		settle(time.Nanosecond) // the lease expires; node B's poll is due
		row, err = h.store.SessionGet(ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, "node-b", row.Lease.Owner)
		require.Equal(t, int64(2), row.Lease.Epoch)
		require.Equal(t, 80*time.Second, row.Lease.ExpiresAt.Sub(start), "claimed at 50 s for 30 s")

		settle(10 * time.Minute)
		require.Equal(t, lt.SessionIdle, h.session(s.ID).Status)
		require.Equal(t, []time.Duration{0, 50 * time.Second}, offsets(t, h, s.ID, start, lt.EventModelRequested),
			"node B re-ran the call the moment it took the session")
		require.Equal(t, []time.Duration{50*time.Second + 9*time.Minute}, offsets(t, h, s.ID, start, lt.EventModelResponded))
		checkJournal(t, h.store, s.ID)
	})
}

// TestSynctestModelRetryBackoff: each retry of a failed model call starts
// exactly the backoff the journal records after the failure (jittered
// within its half-open range), and a longer Retry-After is waited in full.
func TestSynctestModelRetryBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t)
		start := time.Now()
		sp := spec(t, `[{"error":{"status":500}},{"error":{"status":503}},{"error":{"status":429,"retry_after_seconds":10}},{"text":"ok"}]`)
		// Backoffs whose jitter steps (a 1024th of half the backoff) are
		// whole milliseconds: the store keeps event times to the
		// microsecond, while the state the writer stores keeps the clock's
		// nanoseconds, so a sub-microsecond time would make the replayed
		// state differ from the stored one (checkJournal).
		sp.Retry = &lt.RetryPolicy{MaxAttempts: 4, InitialBackoffMS: 2048, MaxBackoffMS: 4096}
		s := create(t, h, sp, nil)
		settle(time.Minute)
		require.Equal(t, lt.SessionIdle, h.session(s.ID).Status)

		failed := events(t, h, s.ID, lt.EventModelFailed)
		requested := offsets(t, h, s.ID, start, lt.EventModelRequested)
		require.Len(t, failed, 3)
		require.Len(t, requested, 4)
		for i, ev := range failed {
			d := data[lt.ModelFailedData](t, ev)
			require.Equal(t, i+1, d.Attempt)
			require.True(t, d.Retry)
			wait := requested[i+1] - ev.Time.Sub(start)
			require.Equal(t, wait.Milliseconds(), d.RetryInMS, "attempt %d waited what the journal says", i+2)
			switch i {
			case 0: // equal jitter on 2,048 ms
				require.True(t, wait >= 1024*time.Millisecond && wait < 2048*time.Millisecond, "wait %v", wait)
			case 1: // 4,096 ms, the ceiling
				require.True(t, wait >= 2048*time.Millisecond && wait < 4096*time.Millisecond, "wait %v", wait)
			case 2: // Retry-After is longer
				require.Equal(t, 10*time.Second, wait)
			}
		}
		checkJournal(t, h.store, s.ID)
	})
}

// TestSynctestSleepTimer: a sleeping session wakes exactly when its timer
// is due (the scheduler's claim sees the wake time pass), not before.
func TestSynctestSleepTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t)
		start := time.Now()
		s := create(t, h, spec(t, `[{"tool_calls":[{"name":"sleep","arguments":{"seconds":600}}]},{"text":"awake"}]`,
			lt.ToolSpec{Name: "sleep"}), nil)
		synctest.Wait()
		require.Equal(t, lt.SessionWaiting, h.session(s.ID).Status)
		require.Equal(t, []time.Duration{0}, offsets(t, h, s.ID, start, lt.EventWaitStarted))

		settle(600*time.Second - time.Nanosecond)
		require.Equal(t, lt.SessionWaiting, h.session(s.ID).Status, "woken early")
		require.Empty(t, events(t, h, s.ID, lt.EventToolCompleted))

		settle(time.Nanosecond)
		require.Equal(t, lt.SessionIdle, h.session(s.ID).Status)
		require.Equal(t, []time.Duration{600 * time.Second}, offsets(t, h, s.ID, start, lt.EventToolCompleted))
		require.Equal(t, "awake", mustTurnOutput(t, h, h.session(s.ID)))
		checkJournal(t, h.store, s.ID)
	})
}

// TestSynctestWallTime: max_wall_seconds and turn_timeout_seconds cut a
// model call in flight at the very moment they run out, and the turn
// fails with the limit's stop reason.
func TestSynctestWallTime(t *testing.T) {
	slow := `[{"text":"thought it over","delay_ms":600000}]`
	for name, tc := range map[string]struct {
		budget      *lt.Budget
		timeout     int64
		at          time.Duration
		reason      string
		interrupted string
	}{
		"max_wall_seconds":     {budget: &lt.Budget{MaxWallSeconds: 60}, at: time.Minute, reason: lt.StopBudgetExceeded, interrupted: "max_wall_seconds"},
		"turn_timeout_seconds": {timeout: 45, at: 45 * time.Second, reason: lt.StopTimeout, interrupted: "turn_timeout"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newBubbleHarness(t)
				start := time.Now()
				sp := spec(t, slow)
				sp.TurnTimeoutSeconds = tc.timeout
				s := create(t, h, sp, tc.budget)

				settle(tc.at - time.Nanosecond)
				require.Equal(t, lt.SessionRunning, h.session(s.ID).Status)
				require.Empty(t, events(t, h, s.ID, lt.EventModelFailed))

				settle(time.Nanosecond)
				got := h.session(s.ID)
				require.Equal(t, lt.SessionFailed, got.Status)
				require.Equal(t, tc.reason, *got.StopReason)
				failed := events(t, h, s.ID, lt.EventModelFailed)
				require.Len(t, failed, 1)
				require.Equal(t, tc.at, failed[0].Time.Sub(start))
				d := data[lt.ModelFailedData](t, failed[0])
				require.Equal(t, tc.interrupted, d.Interrupted)
				require.Equal(t, tc.at.Milliseconds(), d.DurationMS)
				require.Equal(t, []time.Duration{tc.at}, offsets(t, h, s.ID, start, lt.EventTurnFailed))
				checkJournal(t, h.store, s.ID)
			})
		})
	}
}
