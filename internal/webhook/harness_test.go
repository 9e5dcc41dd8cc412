package webhook

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock moves only when Advance is called.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(start time.Time) *fakeClock { return &fakeClock{now: start} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// hasWaiter reports whether something waits for the clock to reach at
// (a dispatcher's timer), so a test can tell that a dispatcher has looked
// and is sleeping until then.
func (c *fakeClock) hasWaiter(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if w.at.Equal(at) {
			return true
		}
	}
	return false
}

// received is one request a receiver got.
type received struct {
	ID, Timestamp, Signature string
	Body                     []byte
	Header                   http.Header
	// VerifyErr is what the receiver's verify said (nil: verified, or
	// the receiver does not verify).
	VerifyErr error
}

// receiver is an httptest server that answers with respond (200 when nil)
// and records every request.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []received
	respond func(n int, w http.ResponseWriter) // n counts requests from 1
	// verify, when set, checks each request first, as a receiver that
	// checks signatures does: a request it refuses is answered 401.
	verify func(h http.Header, body []byte) error
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter)) *receiver {
	return startReceiver(t, respond, nil)
}

func startReceiver(t *testing.T, respond func(n int, w http.ResponseWriter), verify func(h http.Header, body []byte) error) *receiver {
	r := &receiver{respond: respond, verify: verify}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var verr error
		if r.verify != nil {
			verr = r.verify(req.Header, body)
		}
		r.mu.Lock()
		r.got = append(r.got, received{ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
			Signature: req.Header.Get("webhook-signature"), Body: body, Header: req.Header.Clone(), VerifyErr: verr})
		n := len(r.got)
		respond := r.respond
		r.mu.Unlock()
		if verr != nil {
			http.Error(w, verr.Error(), http.StatusUnauthorized)
			return
		}
		if respond != nil {
			respond(n, w)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func (r *receiver) port(t *testing.T) int {
	_, p, err := net.SplitHostPort(r.srv.Listener.Addr().String())
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// env is a store, a fake clock and helpers to write sessions' journals.
type env struct {
	t     *testing.T
	st    *sqlite.Store
	clock *fakeClock
	seqs  map[string]int64
}

func newEnv(t *testing.T) *env { return newEnvAt(t, t0) }

// newEnvAt is newEnv with the fake clock starting at start (a test whose
// receiver checks timestamps against the real time starts it now).
func newEnvAt(t *testing.T, start time.Time) *env {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "longhaul.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	require.NoError(t, st.Migrate(t.Context()))
	return &env{t: t, st: st, clock: newFakeClock(start), seqs: map[string]int64{}}
}

// createSession creates a session whose session.created names webhookURL.
func (e *env) createSession(id, webhookURL string) {
	e.createSessionIn(lt.DefaultProject, id, webhookURL)
}

// createSessionIn is createSession in project.
func (e *env) createSessionIn(project, id, webhookURL string) {
	e.create(store.SessionRow{ID: id, Project: project}, map[string]any{"webhook_url": webhookURL})
}

// createSubagent creates a sub-agent of parent as spawn_agent does: in the
// default project (its parent's here), linked to parent, with no
// webhook_url of its own.
func (e *env) createSubagent(id, parent string) {
	e.create(store.SessionRow{ID: id, Project: lt.DefaultProject, ParentID: parent}, map[string]any{"parent_id": parent})
}

// create creates the session row (id, project and parent taken from it)
// with a session.created that holds fields besides the usual ones.
func (e *env) create(row store.SessionRow, fields map[string]any) {
	created := map[string]any{"agent": map[string]any{"name": "a", "version": 1}, "input": "hi", "project": row.Project}
	maps.Copy(created, fields)
	data, err := json.Marshal(created)
	require.NoError(e.t, err)
	row.AgentName, row.AgentVersion, row.Status = "a", 1, "queued"
	row.Spec, row.State, row.CreatedAt, row.UpdatedAt = json.RawMessage(`{}`), json.RawMessage(`{}`), e.clock.Now(), e.clock.Now()
	evs, err := e.st.SessionCreate(e.t.Context(), &store.SessionCreateParams{
		Session: row,
		Events:  []store.NewEvent{{Type: lt.EventSessionCreated, Time: e.clock.Now(), Data: data}},
	})
	require.NoError(e.t, err)
	e.seqs[row.ID] = evs[len(evs)-1].Seq
}

// status appends session.status_changed to `to` and returns its seq.
func (e *env) status(id string, to lt.SessionStatus) int64 {
	data, err := json.Marshal(map[string]any{"from": "running", "to": to})
	require.NoError(e.t, err)
	evs, err := e.st.EventAppend(e.t.Context(), &store.EventAppendParams{
		SessionID: id, ExpectedSeq: e.seqs[id], Status: string(to), State: json.RawMessage(`{}`), UpdatedAt: e.clock.Now(),
		Events: []store.NewEvent{{Type: lt.EventSessionStatusChanged, Time: e.clock.Now(), Data: data}},
	})
	require.NoError(e.t, err)
	e.seqs[id] = evs[0].Seq
	return evs[0].Seq
}

// start runs a dispatcher until the returned stop is called (or the test
// ends).
func (e *env) start(cfg Config) (*Dispatcher, func()) { return e.startOn(e.st, cfg) }

// startOn is start over st (e's store, seen through a wrapper).
func (e *env) startOn(st store.Store, cfg Config) (*Dispatcher, func()) {
	cfg.Clock = e.clock
	d, err := New(st, &cfg)
	require.NoError(e.t, err)
	require.NoError(e.t, d.Start(context.Background()))
	require.ErrorContains(e.t, d.Start(context.Background()), "already started")
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(e.t, d.Stop(ctx))
		})
	}
	e.t.Cleanup(stop)
	return d, stop
}

// deliveries lists every delivery, newest first.
func (e *env) deliveries() []*store.WebhookDeliveryRow {
	rows, err := e.st.WebhookDeliveryList(context.Background(), &store.WebhookDeliveryListParams{Limit: 1000})
	require.NoError(e.t, err)
	return rows
}

// allDelivered reports whether the outbox holds n deliveries, every one
// delivered.
func (e *env) allDelivered(n int) bool {
	rows := e.deliveries()
	if len(rows) != n {
		return false
	}
	for _, row := range rows {
		if row.Status != store.WebhookDelivered {
			return false
		}
	}
	return true
}

// eventually polls cond with a deadline (never a fixed sleep).
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 2*time.Millisecond, msg)
}

// allowFor lets a dispatcher reach the receiver on 127.0.0.1.
func allowFor(t *testing.T, r *receiver) Config {
	return Config{AllowPrivate: []string{"127.0.0.1"}, Ports: []int{r.port(t)}}
}
