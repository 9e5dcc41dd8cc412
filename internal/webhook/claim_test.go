package webhook

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
	"github.com/stretchr/testify/require"
)

// Two nodes' dispatchers (two node ids) run on one store while sessions
// change: every notification is delivered, each attempt of it is made by
// one node under its claim and recorded once, and the receiver answers 2xx
// to each webhook-id exactly once. The first attempt of every notification
// fails, so the retries are claimed by both nodes too.
func TestTwoNodesDeliverEachNotificationOnce(t *testing.T) {
	const sessions = 8
	e := newEnv(t)
	var r *receiver
	r = newReceiver(t, func(n int, w http.ResponseWriter) {
		got := r.requests()
		seen := 0
		for _, g := range got[:n] {
			if g.ID == got[n-1].ID {
				seen++
			}
		}
		if seen == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	require.NoError(t, e.st.WebhookEndpointCreate(t.Context(), &store.WebhookEndpointRow{
		Project: lt.DefaultProject, ID: "whe_all", URL: r.srv.URL + "/endpoint", Events: []string{}, Secrets: []string{NewSecret()}, CreatedAt: e.clock.Now(),
	}))
	nodes := []string{"node-a", "node-b"}
	for _, node := range nodes {
		cfg := allowFor(t, r)
		cfg.NodeID = node
		cfg.Concurrency = 2
		e.start(cfg)
	}
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		e.createSession(id, r.srv.URL+"/session")
		e.status(id, lt.SessionRequiresAction)
		e.status(id, lt.SessionIdle)
	}
	const want = sessions * 2 * 2 // two notifications, to two targets
	eventually(t, func() bool {
		rows := e.deliveries()
		for _, row := range rows {
			if row.Attempts != 1 {
				return false
			}
		}
		return len(rows) == want
	}, "every first attempt recorded")
	e.clock.Advance(DefaultSchedule[1])
	eventually(t, func() bool {
		rows := e.deliveries()
		for _, row := range rows {
			if row.Status != store.WebhookDelivered {
				return false
			}
		}
		return len(rows) == want
	}, "every notification delivered")

	requests := map[string]int{}
	for _, got := range r.requests() {
		requests[got.ID]++
	}
	require.Len(t, requests, want)
	for _, row := range e.deliveries() {
		require.Empty(t, row.ClaimedBy, row.ID)
		require.Len(t, row.AttemptList, 2, row.ID)
		for i, a := range row.AttemptList {
			require.Equal(t, i+1, a.Attempt, row.ID)
			require.Contains(t, nodes, a.Owner, row.ID)
		}
		require.Equal(t, 503, row.AttemptList[0].StatusCode, row.ID)
		require.Equal(t, 200, row.AttemptList[1].StatusCode, row.ID)
		require.Equal(t, len(row.AttemptList), requests[row.ID],
			"%s: one request per recorded attempt (no attempt duplicated, one 2xx)", row.ID)
	}
	e.clock.Advance(time.Hour)
	require.Len(t, r.requests(), 2*want, "nothing more")
}

// gatedStore holds its first WebhookEnqueue until release is closed, after
// closing arrived: the scan that makes it has read the session's events
// and the cursor, and has not yet moved the cursor.
type gatedStore struct {
	store.Store
	once             sync.Once
	arrived, release chan struct{}
}

func newGatedStore(st store.Store) *gatedStore {
	return &gatedStore{Store: st, arrived: make(chan struct{}), release: make(chan struct{})}
}

func (s *gatedStore) WebhookEnqueue(ctx context.Context, sessionID string, fromCursor, cursor int64, rows []*store.WebhookDeliveryRow) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.arrived)
		<-s.release
	}
	return s.Store.WebhookEnqueue(ctx, sessionID, fromCursor, cursor, rows)
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		require.FailNow(t, "timed out waiting", what)
	}
}

// Two nodes scan one session at the same moment, from the same cursor, one
// having read further than the other. The cursor moves once per event
// range and the loser picks up where the winner stopped, so, whichever
// wins, every notification of every event is enqueued exactly once, none
// is lost, and neither scan fails.
func TestConcurrentScansEnqueueOnceAndLoseNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// bothGated: the scan that read further also waits, so it moves
		// the cursor after the other (and conflicts); otherwise it moves
		// it first, and the other conflicts.
		bothGated bool
	}{
		{name: "the scan that read less conflicts"},
		{name: "the scan that read more conflicts", bothGated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			require.NoError(t, e.st.WebhookEndpointCreate(t.Context(), &store.WebhookEndpointRow{
				Project: lt.DefaultProject, ID: "whe_all", URL: "https://hooks.example.com/endpoint", Events: []string{}, Secrets: []string{NewSecret()},
				CreatedAt: e.clock.Now(),
			}))
			e.createSession("s1", "https://hooks.example.com/session")
			seqAction := e.status("s1", lt.SessionRequiresAction)
			seqIdle := e.status("s1", lt.SessionIdle)

			gateA, gateB := newGatedStore(e.st), newGatedStore(e.st)
			if !tc.bothGated {
				close(gateB.release)
			}
			a, err := New(gateA, &Config{Clock: e.clock, NodeID: "node-a"})
			require.NoError(t, err)
			b, err := New(gateB, &Config{Clock: e.clock, NodeID: "node-b"})
			require.NoError(t, err)

			errA := make(chan error, 1)
			go func() { errA <- a.scanSession(context.Background(), "s1", 0, nil) }()
			waitClosed(t, gateA.arrived, "node-a read the events up to idle")
			e.status("s1", lt.SessionRunning)
			seqFailed := e.status("s1", lt.SessionFailed)
			errB := make(chan error, 1)
			go func() { errB <- b.scanSession(context.Background(), "s1", 0, nil) }()
			waitClosed(t, gateB.arrived, "node-b read the events up to failed")
			if tc.bothGated {
				close(gateA.release)
				require.NoError(t, <-errA)
				close(gateB.release)
				require.NoError(t, <-errB)
			} else {
				require.NoError(t, <-errB)
				close(gateA.release)
				require.NoError(t, <-errA)
			}

			type key struct {
				target string
				seq    int64
				typ    string
			}
			got := map[key]int{}
			for _, row := range e.deliveries() {
				got[key{row.EndpointID, row.EventSeq, row.Type}]++
			}
			want := map[key]int{}
			for _, target := range []string{"", "whe_all"} {
				want[key{target, seqAction, lt.WebhookSessionRequiresAction}] = 1
				want[key{target, seqIdle, lt.WebhookSessionIdle}] = 1
				want[key{target, seqFailed, lt.WebhookSessionFailed}] = 1
			}
			require.Equal(t, want, got)
			ws, err := e.st.WebhookSessionInit(t.Context(), "s1", NewSecret())
			require.NoError(t, err)
			require.Equal(t, seqFailed, ws.Cursor)
		})
	}
}

// enqueueOne has a dispatcher that is never started enqueue the
// session's notifications, and returns the one delivery.
func (e *env) enqueueOne(sessionID string) *store.WebhookDeliveryRow {
	e.t.Helper()
	d, err := New(e.st, &Config{Clock: e.clock})
	require.NoError(e.t, err)
	require.NoError(e.t, d.scanSession(e.t.Context(), sessionID, 0, nil))
	rows := e.deliveries()
	require.Len(e.t, rows, 1)
	return rows[0]
}

// claimAs claims every due delivery for owner, as a dispatcher with the
// default claim length would, and returns the end of the claims.
func (e *env) claimAs(owner string) time.Time {
	e.t.Helper()
	now := e.clock.Now()
	until := now.Add(DefaultTimeout + DefaultClaimMargin)
	rows, err := e.st.WebhookClaimDue(e.t.Context(), &store.WebhookClaimParams{Owner: owner, Now: now, Until: until, Limit: 10})
	require.NoError(e.t, err)
	require.NotEmpty(e.t, rows)
	return until
}

// A node that died mid-attempt leaves its claim; when the claim runs out,
// another node sends the delivery, with the same webhook-id. The log shows
// the dead node's attempt, whose outcome nobody knows (the receiver may
// have it), then the new one; the dead node's own record, should it
// arrive, is refused.
func TestExpiredClaimIsSentByAnotherNode(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	e.createSession("s1", r.srv.URL)
	e.status("s1", lt.SessionIdle)
	row := e.enqueueOne("s1")
	until := e.claimAs("node-dead")

	cfg := allowFor(t, r)
	cfg.NodeID = "node-b"
	e.start(cfg)
	eventually(t, func() bool { return e.clock.hasWaiter(until) }, "node-b sleeps until the claim runs out")
	require.Empty(t, r.requests(), "nothing is sent while the claim lasts")
	e.clock.Advance(until.Sub(e.clock.Now()))
	eventually(t, func() bool { return e.deliveries()[0].Status == store.WebhookDelivered }, "node-b delivers")

	got := r.requests()
	require.Len(t, got, 1)
	require.Equal(t, row.ID, got[0].ID, "the same webhook-id")
	list := e.deliveries()[0].AttemptList
	require.Len(t, list, 2)
	require.Equal(t, store.WebhookAttemptRow{Attempt: 1, Owner: "node-dead", At: until, Error: store.LostAttemptError}, list[0])
	require.Equal(t, "node-b", list[1].Owner)
	require.Equal(t, 2, list[1].Attempt)
	require.Equal(t, 200, list[1].StatusCode)
	require.ErrorIs(t, e.st.WebhookRecordAttempt(t.Context(), &store.WebhookAttemptParams{
		DeliveryID: row.ID, Status: store.WebhookDelivered, Now: e.clock.Now(),
		Attempt: store.WebhookAttemptRow{Attempt: 1, Owner: "node-dead", At: e.clock.Now(), StatusCode: 200},
	}), store.ErrLeaseLost, "the dead node's late attempt")
}

// A node restarting with its id releases the claims its previous run
// died with: their deliveries are sent at once, not when the claims run
// out.
func TestStartReleasesThePreviousRunsClaims(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	e.createSession("s1", r.srv.URL)
	e.status("s1", lt.SessionIdle)
	row := e.enqueueOne("s1")
	e.claimAs("node-a")

	cfg := allowFor(t, r)
	cfg.NodeID = "node-a"
	e.start(cfg)
	eventually(t, func() bool { return e.deliveries()[0].Status == store.WebhookDelivered }, "delivered without waiting")
	require.Equal(t, t0, e.clock.Now(), "the clock never moved")
	got := r.requests()
	require.Len(t, got, 1)
	require.Equal(t, row.ID, got[0].ID)
	list := e.deliveries()[0].AttemptList
	require.Len(t, list, 2, "the attempt the previous run died with, then this run's")
	require.Equal(t, store.WebhookAttemptRow{Attempt: 1, Owner: "node-a", At: t0, Error: store.LostAttemptError}, list[0])
	require.Equal(t, 200, list[1].StatusCode)
}

// Stop abandons a request in flight unrecorded and releases its claim, so
// another node sends the delivery at once, with the same webhook-id.
func TestStopReleasesAbandonedClaims(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	r := newReceiver(t, func(n int, _ http.ResponseWriter) {
		if n == 1 {
			<-release
		}
	})
	t.Cleanup(func() { close(release) })
	e.createSession("s1", r.srv.URL)
	cfg := allowFor(t, r)
	cfg.NodeID = "node-a"
	a, stopA := e.start(cfg)
	require.Equal(t, "node-a", a.NodeID())
	e.status("s1", lt.SessionIdle)
	eventually(t, func() bool { return len(r.requests()) == 1 }, "node-a's request arrived")
	row := e.deliveries()[0]
	require.Equal(t, "node-a", row.ClaimedBy)
	stopA()

	row = e.deliveries()[0]
	require.Equal(t, store.WebhookPending, row.Status)
	require.Empty(t, row.ClaimedBy, "released")
	require.Equal(t, t0, *row.NextAttemptAt, "due at once")
	require.Empty(t, row.AttemptList, "the abandoned attempt is not one")

	cfg.NodeID = "node-b"
	e.start(cfg)
	eventually(t, func() bool { return e.deliveries()[0].Status == store.WebhookDelivered }, "node-b delivers")
	got := r.requests()
	require.Len(t, got, 2)
	require.Equal(t, got[0].ID, got[1].ID, "the same webhook-id")
	list := e.deliveries()[0].AttemptList
	require.Len(t, list, 1)
	require.Equal(t, store.WebhookAttemptRow{Attempt: 1, Owner: "node-b", At: t0, StatusCode: 200, Duration: list[0].Duration}, list[0])
}

// New refuses a claim shorter than an attempt may last and a node id that
// cannot be stored as is, naming the field; without a node id, each
// dispatcher gets its own.
func TestNewClaimConfig(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{ClaimTTL: DefaultTimeout}, "ClaimTTL"},
		{Config{Timeout: time.Minute, ClaimTTL: 30 * time.Second}, "ClaimTTL"},
		{Config{NodeID: "node a"}, "NodeID"},
		{Config{NodeID: "node\x00"}, "NodeID"},
		{Config{NodeID: "\xff"}, "NodeID"},
		{Config{NodeID: string(make([]byte, maxNodeIDLength+1))}, "NodeID"},
	} {
		_, err := New(e.st, &tc.cfg)
		require.ErrorContains(t, err, tc.field, "%+v", tc.cfg)
	}
	a, err := New(e.st, nil)
	require.NoError(t, err)
	b, err := New(e.st, nil)
	require.NoError(t, err)
	require.NotEmpty(t, a.NodeID())
	require.NotEqual(t, a.NodeID(), b.NodeID())
	c, err := New(e.st, &Config{NodeID: "node-c", ClaimTTL: DefaultTimeout + time.Second})
	require.NoError(t, err)
	require.Equal(t, "node-c", c.NodeID())
	require.Equal(t, DefaultTimeout+time.Second, c.claimTTL)
}
