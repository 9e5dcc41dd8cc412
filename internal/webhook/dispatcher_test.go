package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
	"github.com/stretchr/testify/require"
)

// A session's webhook_url gets one signed, thin notification per
// notifying status change, in order, with the seq of its event.
func TestSessionWebhookSignedNotifications(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	e.createSession("s1", r.srv.URL+"/hook")
	d, _ := e.start(allowFor(t, r))
	secret, err := d.SessionSecret(t.Context(), "s1")
	require.NoError(t, err)

	e.status("s1", lt.SessionRunning) // notifies nothing
	seqAction := e.status("s1", lt.SessionRequiresAction)
	eventually(t, func() bool { return len(r.requests()) == 1 }, "requires_action delivered")
	seqIdle := e.status("s1", lt.SessionIdle)
	eventually(t, func() bool { return len(r.requests()) == 2 }, "idle delivered")

	want := []lt.WebhookNotification{
		{Type: lt.WebhookSessionRequiresAction, SessionID: "s1", EventSeq: seqAction},
		{Type: lt.WebhookSessionIdle, SessionID: "s1", EventSeq: seqIdle},
	}
	for i, got := range r.requests() {
		var n lt.WebhookNotification
		require.NoError(t, json.Unmarshal(got.Body, &n))
		require.Equal(t, want[i], n)
		require.Equal(t, deliveryID("", "s1", want[i].EventSeq, want[i].Type), got.ID)
		require.Equal(t, strconv.FormatInt(t0.Unix(), 10), got.Timestamp)
		ok, err := Verify(secret, got.ID, t0.Unix(), got.Body, got.Signature)
		require.NoError(t, err)
		require.True(t, ok, "signed with the session's secret")
	}
	eventually(t, func() bool {
		rows := e.deliveries()
		return len(rows) == 2 && rows[0].Status == store.WebhookDelivered && rows[1].Status == store.WebhookDelivered
	}, "both recorded as delivered")
	again, err := d.SessionSecret(t.Context(), "s1")
	require.NoError(t, err)
	require.Equal(t, secret, again, "the secret is created once")
}

// Failures are retried on the specification's schedule with the same
// webhook-id, and after the last attempt the delivery has failed.
func TestRetrySchedule(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	e.createSession("s1", r.srv.URL)
	e.start(allowFor(t, r))
	e.status("s1", lt.SessionFailed)

	for i, wait := range DefaultSchedule {
		if i > 0 {
			// One microsecond short of the delay, nothing is sent.
			e.clock.Advance(wait - time.Microsecond)
			require.Len(t, r.requests(), i, "attempt %d is not early", i+1)
			e.clock.Advance(time.Microsecond)
		}
		eventually(t, func() bool { return len(r.requests()) == i+1 }, "attempt "+strconv.Itoa(i+1))
		eventually(t, func() bool { rows := e.deliveries(); return len(rows) == 1 && rows[0].Attempts == i+1 }, "recorded")
	}
	rows := e.deliveries()
	require.Equal(t, store.WebhookFailed, rows[0].Status)
	require.Nil(t, rows[0].NextAttemptAt)
	require.Len(t, rows[0].AttemptList, len(DefaultSchedule))
	for i, a := range rows[0].AttemptList {
		require.Equal(t, i+1, a.Attempt)
		require.Equal(t, 500, a.StatusCode)
		require.Equal(t, "HTTP 500", a.Error)
		require.Equal(t, t0.Add(totalUntil(i)), a.At)
	}
	for _, got := range r.requests() {
		require.Equal(t, rows[0].ID, got.ID, "the same webhook-id on every retry")
	}
	// Nothing more, however long we wait.
	e.clock.Advance(48 * time.Hour)
	require.Len(t, r.requests(), len(DefaultSchedule))
}

// totalUntil is the time from the first attempt to attempt i (0-based).
func totalUntil(i int) time.Duration {
	var sum time.Duration
	for _, d := range DefaultSchedule[1 : i+1] {
		sum += d
	}
	return sum
}

// A Retry-After longer than the schedule's delay is honoured; a 429 is
// retried like any failure.
func TestRetryAfterHonoured(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	e.createSession("s1", r.srv.URL)
	e.start(allowFor(t, r))
	e.status("s1", lt.SessionIdle)
	eventually(t, func() bool { rows := e.deliveries(); return len(rows) == 1 && rows[0].Attempts == 1 }, "first attempt")
	rows := e.deliveries()
	require.Equal(t, t0.Add(120*time.Second), *rows[0].NextAttemptAt, "Retry-After beats the 5 s step")

	e.clock.Advance(119 * time.Second)
	require.Len(t, r.requests(), 1)
	e.clock.Advance(time.Second)
	eventually(t, func() bool { rows := e.deliveries(); return rows[0].Status == store.WebhookDelivered }, "delivered")
	got := r.requests()
	require.Len(t, got, 2)
	require.Equal(t, got[0].ID, got[1].ID)
	require.Equal(t, strconv.FormatInt(t0.Add(120*time.Second).Unix(), 10), got[1].Timestamp, "a fresh timestamp")
	require.Equal(t, 429, e.deliveries()[0].AttemptList[0].StatusCode)

	require.Equal(t, time.Duration(0), parseRetryAfter("nonsense", t0))
	require.Equal(t, 30*time.Second, parseRetryAfter(t0.Add(30*time.Second).Format(http.TimeFormat), t0))
	require.Equal(t, maxRetryAfter, parseRetryAfter("99999999999", t0))
}

// A 410 disables the endpoint: its delivery stops, its other pending
// deliveries are disabled, and later events do not notify it.
func TestGoneDisablesEndpoint(t *testing.T) {
	e := newEnv(t)
	gone := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	d, _ := e.start(allowFor(t, gone))
	api := NewAPI(d)
	ep, err := api.CreateWebhookEndpoint(t.Context(), &lt.CreateWebhookEndpointRequest{URL: gone.srv.URL})
	require.NoError(t, err)

	e.createSession("s1", "")
	e.status("s1", lt.SessionIdle)
	eventually(t, func() bool { rows := e.deliveries(); return len(rows) == 1 && rows[0].Status == store.WebhookDisabled }, "disabled")
	row, err := e.st.WebhookEndpointGet(t.Context(), ep.ID)
	require.NoError(t, err)
	require.NotNil(t, row.DisabledAt)
	eps, err := api.ListWebhookEndpoints(t.Context(), "")
	require.NoError(t, err)
	require.True(t, eps[0].Disabled)

	e.status("s1", lt.SessionFailed)
	e.clock.Advance(time.Hour)
	require.Len(t, gone.requests(), 1, "a disabled endpoint gets nothing more")
	require.Len(t, e.deliveries(), 1)
}

// Endpoints filter by type and see only events from their creation on.
func TestEndpointFilterAndNoReplay(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	e.createSession("old", "")
	e.status("old", lt.SessionIdle) // before the endpoint: never sent
	e.clock.Advance(time.Second)
	d, _ := e.start(allowFor(t, r))
	_, err := NewAPI(d).CreateWebhookEndpoint(t.Context(), &lt.CreateWebhookEndpointRequest{
		URL: r.srv.URL, Events: []string{lt.WebhookSessionFailed}})
	require.NoError(t, err)
	e.createSession("s1", "")
	e.status("s1", lt.SessionIdle)
	seq := e.status("s1", lt.SessionFailed)
	eventually(t, func() bool { return len(r.requests()) == 1 }, "failed delivered")
	var n lt.WebhookNotification
	require.NoError(t, json.Unmarshal(r.requests()[0].Body, &n))
	require.Equal(t, lt.WebhookNotification{Type: lt.WebhookSessionFailed, SessionID: "s1", EventSeq: seq}, n)
	e.status("old", lt.SessionRunning)
	e.status("s1", lt.SessionRunning)
	e.clock.Advance(2 * time.Minute) // a rescan
	require.Len(t, r.requests(), 1)
	require.Len(t, e.deliveries(), 1)
}

// Loopback (like any private address) is refused unless allowed: the
// attempt is recorded with the reason and nothing reaches the receiver.
func TestPrivateAddressRefused(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	e.createSession("s1", r.srv.URL)
	e.start(Config{Ports: []int{r.port(t)}})
	e.status("s1", lt.SessionIdle)
	eventually(t, func() bool { rows := e.deliveries(); return len(rows) == 1 && rows[0].Attempts == 1 }, "attempted")
	a := e.deliveries()[0].AttemptList[0]
	require.Equal(t, 0, a.StatusCode)
	require.Contains(t, a.Error, "loopback")
	require.Empty(t, r.requests())
}

// A crash (the dispatcher stops with deliveries pending and events not yet
// scanned; a new one starts on the same store) delivers every notification
// exactly once per webhook-id.
func TestCrashDeliversExactlyOnce(t *testing.T) {
	e := newEnv(t)
	var down atomic.Bool
	down.Store(true)
	r := newReceiver(t, func(_ int, w http.ResponseWriter) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	for _, id := range []string{"a", "b", "c"} {
		e.createSession(id, r.srv.URL)
	}
	_, stop := e.start(allowFor(t, r))
	e.status("a", lt.SessionRequiresAction)
	e.status("b", lt.SessionIdle)
	eventually(t, func() bool {
		rows := e.deliveries()
		return len(rows) == 2 && rows[0].Attempts == 1 && rows[1].Attempts == 1
	}, "first attempts failed")
	stop()

	// While no dispatcher runs, more happens.
	e.status("a", lt.SessionIdle)
	e.status("c", lt.SessionCancelled)
	down.Store(false)

	// Two restarts in a row: the second re-scans and must add nothing.
	_, stop2 := e.start(allowFor(t, r))
	e.clock.Advance(5 * time.Second)
	eventually(t, func() bool { return e.allDelivered(4) }, "all four delivered")
	stop2()
	e.start(allowFor(t, r))
	e.clock.Advance(time.Hour)

	okByID := map[string]int{}
	for _, got := range r.requests() {
		if got.ID != "" {
			okByID[got.ID]++
		}
	}
	require.Len(t, okByID, 4, "four notifications")
	delivered := 0
	for _, row := range e.deliveries() {
		require.Equal(t, store.WebhookDelivered, row.Status)
		last := row.AttemptList[len(row.AttemptList)-1]
		require.Equal(t, 200, last.StatusCode)
		delivered++
	}
	require.Equal(t, 4, delivered)
	// Each id was answered 2xx exactly once: its failed attempts (503) are
	// the only other requests.
	for id, n := range okByID {
		var failed int
		for _, row := range e.deliveries() {
			if row.ID == id {
				failed = len(row.AttemptList) - 1
			}
		}
		require.Equal(t, failed+1, n, "requests for %s", id)
	}
}

// Each way a receiver can fail one attempt — a 5xx, a 429, a Retry-After
// shorter than the schedule's step, a dropped connection, a redirect (never
// followed), no answer within the per-attempt timeout — is recorded as that
// attempt's outcome and retried on the schedule with the same webhook-id;
// the retry answered 2xx delivers it.
func TestReceiverFailuresAreRetried(t *testing.T) {
	// Long enough that the retry, answered at once, never times out on a
	// loaded machine.
	const timeout = time.Second
	for _, tc := range []struct {
		name     string
		fail     func(w http.ResponseWriter, release <-chan struct{})
		wantCode int
		wantErr  string
	}{
		{name: "500", wantCode: 500, wantErr: "HTTP 500",
			fail: func(w http.ResponseWriter, _ <-chan struct{}) { w.WriteHeader(http.StatusInternalServerError) }},
		{name: "503 with a Retry-After shorter than the step", wantCode: 503, wantErr: "HTTP 503",
			fail: func(w http.ResponseWriter, _ <-chan struct{}) {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
			}},
		{name: "429 without Retry-After", wantCode: 429, wantErr: "HTTP 429",
			fail: func(w http.ResponseWriter, _ <-chan struct{}) { w.WriteHeader(http.StatusTooManyRequests) }},
		{name: "connection dropped", wantErr: "EOF",
			fail: func(w http.ResponseWriter, _ <-chan struct{}) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = conn.Close()
				}
			}},
		{name: "redirect", wantCode: 307, wantErr: "HTTP 307",
			fail: func(w http.ResponseWriter, _ <-chan struct{}) {
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(http.StatusTemporaryRedirect)
			}},
		{name: "timeout", wantErr: "timeout",
			fail: func(_ http.ResponseWriter, release <-chan struct{}) { <-release }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			release := make(chan struct{})
			r := newReceiver(t, func(n int, w http.ResponseWriter) {
				if n == 1 {
					tc.fail(w, release)
				}
			})
			// Runs before the receiver closes (cleanups run last first),
			// so a held request does not keep it from closing.
			t.Cleanup(func() { close(release) })
			e.createSession("s1", r.srv.URL)
			cfg := allowFor(t, r)
			cfg.Timeout = timeout
			e.start(cfg)
			e.status("s1", lt.SessionIdle)

			eventually(t, func() bool { rows := e.deliveries(); return len(rows) == 1 && rows[0].Attempts == 1 }, "first attempt recorded")
			row := e.deliveries()[0]
			require.Equal(t, store.WebhookPending, row.Status)
			require.Equal(t, t0.Add(DefaultSchedule[1]), *row.NextAttemptAt, "retried on the schedule")
			first := row.AttemptList[0]
			require.Equal(t, tc.wantCode, first.StatusCode)
			require.Contains(t, strings.ToLower(first.Error), strings.ToLower(tc.wantErr))
			if tc.name == "timeout" {
				require.GreaterOrEqual(t, first.Duration, timeout, "the attempt lasted until the timeout")
			}
			require.Len(t, r.requests(), 1, "nothing more before the retry is due (a redirect is not followed)")

			e.clock.Advance(DefaultSchedule[1])
			eventually(t, func() bool { return e.deliveries()[0].Status == store.WebhookDelivered }, "the retry delivers")
			row = e.deliveries()[0]
			require.Len(t, row.AttemptList, 2)
			require.Equal(t, 200, row.AttemptList[1].StatusCode)
			require.Empty(t, row.AttemptList[1].Error)
			got := r.requests()
			require.Len(t, got, 2)
			require.Equal(t, row.ID, got[0].ID)
			require.Equal(t, row.ID, got[1].ID, "the same webhook-id on the retry")
		})
	}
}

// A 410 from a session's webhook_url disables it: the delivery stops, the
// session's other pending delivery is disabled unsent, and later events
// enqueue nothing for it. So does a 410 to a sub-agent's notification,
// sent to its root's webhook_url: the root's is disabled.
func TestGoneDisablesSessionWebhookURL(t *testing.T) {
	for _, gone := range []string{"s1", "s1-child"} {
		t.Run("410 to "+gone, func(t *testing.T) {
			e := newEnv(t)
			r := newReceiver(t, func(n int, w http.ResponseWriter) {
				if n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
				} else {
					w.WriteHeader(http.StatusGone)
				}
			})
			e.createSession("s1", r.srv.URL)
			e.createSubagent("s1-child", "s1")
			e.start(allowFor(t, r))
			seqAction := e.status("s1", lt.SessionRequiresAction)
			eventually(t, func() bool { rows := e.deliveries(); return len(rows) == 1 && rows[0].Attempts == 1 }, "503 recorded")
			seqIdle := e.status(gone, lt.SessionIdle)
			eventually(t, func() bool {
				for _, row := range e.deliveries() {
					if row.Status != store.WebhookDisabled {
						return false
					}
				}
				return len(e.deliveries()) == 2
			}, "both disabled")

			byType := map[string]*store.WebhookDeliveryRow{}
			for _, row := range e.deliveries() {
				byType[row.Type] = row
			}
			goneRow := byType[lt.WebhookSessionIdle]
			require.Equal(t, gone, goneRow.SessionID)
			require.Equal(t, seqIdle, goneRow.EventSeq)
			require.Len(t, goneRow.AttemptList, 1)
			require.Equal(t, 410, goneRow.AttemptList[0].StatusCode)
			pending := byType[lt.WebhookSessionRequiresAction]
			require.Equal(t, seqAction, pending.EventSeq)
			require.Len(t, pending.AttemptList, 1, "its retry is never sent")
			require.Nil(t, pending.NextAttemptAt)
			ws, err := e.st.WebhookSessionInit(t.Context(), "s1", NewSecret())
			require.NoError(t, err)
			require.NotNil(t, ws.DisabledAt)

			for _, id := range []string{"s1", "s1-child"} {
				e.status(id, lt.SessionRunning)
				e.status(id, lt.SessionFailed)
			}
			e.clock.Advance(time.Hour) // past the retry and a rescan
			require.Len(t, r.requests(), 2)
			require.Len(t, e.deliveries(), 2, "nothing enqueued for a disabled webhook_url")
		})
	}
}

// listHook is a store whose first WebhookEndpointList runs hook after it has
// read the list, to create an endpoint at the worst moment for a scan.
type listHook struct {
	store.Store
	once sync.Once
	hook func()
}

func (s *listHook) WebhookEndpointList(ctx context.Context, project string) ([]*store.WebhookEndpointRow, error) {
	rows, err := s.Store.WebhookEndpointList(ctx, project)
	s.once.Do(s.hook)
	return rows, err
}

// An endpoint created while a scan is under way — after the scan read the
// endpoints, before it read the session's new events — is told of the
// events appended after its creation: the cursor does not move past them
// without it.
func TestEndpointCreatedDuringAScanMissesNothing(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	e.createSession("s1", r.srv.URL+"/session")
	require.NoError(t, e.st.WebhookEndpointCreate(t.Context(), &store.WebhookEndpointRow{
		Project: lt.DefaultProject, ID: "whe_old", URL: r.srv.URL + "/old", Events: []string{}, Secrets: []string{NewSecret()}, CreatedAt: e.clock.Now(),
	}))
	listed, resume := make(chan struct{}), make(chan struct{})
	cfg := allowFor(t, r)
	cfg.Clock = e.clock
	d, err := New(&listHook{Store: e.st, hook: func() { close(listed); <-resume }}, &cfg)
	require.NoError(t, err)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, d.Stop(ctx))
	})

	select {
	case <-listed: // the start-up scan has read the endpoints: whe_old
	case <-time.After(5 * time.Second):
		t.Fatal("the dispatcher never listed the endpoints")
	}
	require.NoError(t, e.st.WebhookEndpointCreate(t.Context(), &store.WebhookEndpointRow{
		Project: lt.DefaultProject, ID: "whe_new", URL: r.srv.URL + "/endpoint", Events: []string{}, Secrets: []string{NewSecret()}, CreatedAt: e.clock.Now(),
	}))
	seq := e.status("s1", lt.SessionIdle)
	close(resume)

	eventually(t, func() bool {
		rows := e.deliveries()
		for _, row := range rows {
			if row.Status != store.WebhookDelivered {
				return false
			}
		}
		return len(rows) == 3
	}, "the session's and both endpoints' notifications delivered")
	targets := map[string]int64{}
	for _, row := range e.deliveries() {
		targets[row.EndpointID] = row.EventSeq
	}
	require.Equal(t, map[string]int64{"": seq, "whe_old": seq, "whe_new": seq}, targets)
}

// jumpingClock is a fake clock that another goroutine advances by `by` just
// before the first timer is set: the interleaving in which a wait computed
// from an earlier reading of the clock would wait a second time.
type jumpingClock struct {
	*fakeClock
	by   time.Duration
	once sync.Once
}

func (c *jumpingClock) After(d time.Duration) <-chan time.Time {
	c.once.Do(func() { c.fakeClock.Advance(c.by) })
	return c.fakeClock.After(d)
}

// The wait for the next due delivery ends once the clock reaches it, even
// when the clock moves between reading it and setting the timer (the
// retry in TestReceiverFailuresAreRetried was once never sent so).
func TestNextDueSurvivesAClockMovingMeanwhile(t *testing.T) {
	e := newEnv(t)
	clock := &jumpingClock{fakeClock: e.clock, by: DefaultSchedule[1]}
	d, err := New(e.st, &Config{Clock: clock})
	require.NoError(t, err)
	select {
	case <-d.afterUntil(t0.Add(DefaultSchedule[1])):
	default:
		t.Fatal("the clock reached the due time, but the wait goes on")
	}
	// A due time still ahead is waited for.
	later := d.afterUntil(clock.Now().Add(time.Second))
	select {
	case <-later:
		t.Fatal("fired before its time")
	default:
	}
	clock.Advance(time.Second)
	<-later
}
