package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
	"github.com/stretchr/testify/require"
)

// notification decodes the body of a request a receiver got.
func notification(t *testing.T, got received) lt.WebhookNotification {
	t.Helper()
	var n lt.WebhookNotification
	require.NoError(t, json.Unmarshal(got.Body, &n))
	return n
}

// requireSignedBy requires that got carries a signature by secret.
func requireSignedBy(t *testing.T, secret string, got received) {
	t.Helper()
	ts, err := strconv.ParseInt(got.Timestamp, 10, 64)
	require.NoError(t, err)
	ok, err := Verify(secret, got.ID, ts, got.Body, got.Signature)
	require.NoError(t, err)
	require.True(t, ok, "%s is signed with the expected secret", got.ID)
}

// createTree creates a root session with webhookURL, its sub-agent
// "child" and the child's "grandchild", a second apart: a scan of every
// session (newest first) reaches the grandchild before its parent and
// root.
func (e *env) createTree(webhookURL string) {
	e.createSession("root", webhookURL)
	e.clock.Advance(time.Second)
	e.createSubagent("child", "root")
	e.clock.Advance(time.Second)
	e.createSubagent("grandchild", "child")
}

// A sub-agent, and a sub-agent of it, have no webhook_url of their own:
// their notifications go to their root's, signed with the root's secret,
// and name the root; the root's own are as they were. A tree whose root
// has no webhook_url notifies nobody (there is no endpoint either).
func TestSubagentsNotifyTheirRootsWebhookURL(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	e.createTree(r.srv.URL + "/hook")
	e.createSession("quiet", "")
	e.createSubagent("quiet-child", "quiet")
	d, _ := e.start(allowFor(t, r))
	rootSecret, err := d.SessionSecret(t.Context(), "root")
	require.NoError(t, err)

	seqGrandchild := e.status("grandchild", lt.SessionRequiresAction)
	e.status("quiet-child", lt.SessionRequiresAction)
	eventually(t, func() bool { return len(r.requests()) == 1 }, "the grandchild's requires_action delivered")
	seqChild := e.status("child", lt.SessionRequiresAction)
	eventually(t, func() bool { return len(r.requests()) == 2 }, "the child's requires_action delivered")
	seqRoot := e.status("root", lt.SessionIdle)
	eventually(t, func() bool { return e.allDelivered(3) }, "the root's idle delivered")

	want := map[string]lt.WebhookNotification{
		"grandchild": {Type: lt.WebhookSessionRequiresAction, SessionID: "grandchild", EventSeq: seqGrandchild, RootSessionID: "root"},
		"child":      {Type: lt.WebhookSessionRequiresAction, SessionID: "child", EventSeq: seqChild, RootSessionID: "root"},
		"root":       {Type: lt.WebhookSessionIdle, SessionID: "root", EventSeq: seqRoot},
	}
	got := r.requests()
	require.Len(t, got, 3)
	for _, req := range got {
		n := notification(t, req)
		require.Equal(t, want[n.SessionID], n)
		require.Equal(t, deliveryID("", n.SessionID, n.EventSeq, n.Type), req.ID)
		requireSignedBy(t, rootSecret, req)
	}
	require.JSONEq(t, `{"type": "session.idle", "session_id": "root", "event_seq": `+strconv.FormatInt(seqRoot, 10)+`}`,
		string(got[2].Body), "the root's own body is as it was")
	for _, row := range e.deliveries() {
		require.Equal(t, r.srv.URL+"/hook", row.URL)
		require.Empty(t, row.EndpointID)
	}
	e.clock.Advance(time.Hour) // past a rescan
	require.Len(t, e.deliveries(), 3, "nothing for the tree whose root has no webhook_url")
}

// A sub-agent's notification that failed is retried by the next run, which
// has read nothing of the tree yet: the same webhook-id, signed with the
// root's secret; what the sub-agent did while no dispatcher ran is sent
// too, once.
func TestSubagentNotificationRetriedAfterARestart(t *testing.T) {
	e := newEnv(t)
	var down atomic.Bool
	down.Store(true)
	r := newReceiver(t, func(_ int, w http.ResponseWriter) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	e.createTree(r.srv.URL)
	d, stop := e.start(allowFor(t, r))
	rootSecret, err := d.SessionSecret(t.Context(), "root")
	require.NoError(t, err)
	seqAction := e.status("grandchild", lt.SessionRequiresAction)
	eventually(t, func() bool { rows := e.deliveries(); return len(rows) == 1 && rows[0].Attempts == 1 }, "first attempt failed")
	stop()

	seqIdle := e.status("grandchild", lt.SessionIdle)
	down.Store(false)
	e.start(allowFor(t, r))
	e.clock.Advance(DefaultSchedule[1])
	eventually(t, func() bool { return e.allDelivered(2) }, "the retry and the notification missed while stopped delivered")

	requests := map[string]int{}
	for _, req := range r.requests() {
		requireSignedBy(t, rootSecret, req)
		n := notification(t, req)
		require.Equal(t, "root", n.RootSessionID)
		require.Equal(t, "grandchild", n.SessionID)
		requests[req.ID]++
	}
	require.Equal(t, map[string]int{
		deliveryID("", "grandchild", seqAction, lt.WebhookSessionRequiresAction): 2, // the 503 and its retry
		deliveryID("", "grandchild", seqIdle, lt.WebhookSessionIdle):             1,
	}, requests)
}

// failingSessionGet is a store whose SessionGet of one session fails while
// fail is set, as a database that is briefly unreachable does.
type failingSessionGet struct {
	store.Store
	id       string
	fail     atomic.Bool
	failures atomic.Int64
}

func (s *failingSessionGet) SessionGet(ctx context.Context, id string) (*store.SessionRow, error) {
	if id == s.id && s.fail.Load() {
		s.failures.Add(1)
		return nil, errors.New("connection reset")
	}
	return s.Store.SessionGet(ctx, id)
}

// A parent that cannot be read is not taken for a root without a
// webhook_url: the sub-agent's notification to its root's is neither
// dropped nor sent elsewhere, nor is the cursor moved past it for the
// endpoint's sake; the next scan, reading the parent, sends both.
func TestUnreadableParentIsNotTakenForNoURL(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	require.NoError(t, e.st.WebhookEndpointCreate(t.Context(), &store.WebhookEndpointRow{
		ID: "whe_all", Project: lt.DefaultProject, URL: r.srv.URL + "/endpoint", Events: []string{},
		Secrets: []string{NewSecret()}, CreatedAt: e.clock.Now(),
	}))
	e.createTree(r.srv.URL + "/root")
	seq := e.status("grandchild", lt.SessionRequiresAction)

	st := &failingSessionGet{Store: e.st, id: "root"}
	st.fail.Store(true)
	e.startOn(st, allowFor(t, r))
	rescanAt := e.clock.Now().Add(DefaultRescanInterval)
	eventually(t, func() bool { return st.failures.Load() > 0 && e.clock.hasWaiter(rescanAt) },
		"the scan failed on the root and waits for the next")
	require.Empty(t, e.deliveries())

	st.fail.Store(false)
	e.clock.Advance(DefaultRescanInterval)
	eventually(t, func() bool { return e.allDelivered(2) }, "the next scan sends both")
	urls := map[string]string{}
	for _, row := range e.deliveries() {
		urls[row.URL] = string(row.Body)
	}
	want := lt.WebhookNotification{Type: lt.WebhookSessionRequiresAction, SessionID: "grandchild", EventSeq: seq}
	endpointBody, _ := json.Marshal(want)
	want.RootSessionID = "root"
	rootBody, _ := json.Marshal(want)
	require.Equal(t, map[string]string{r.srv.URL + "/endpoint": string(endpointBody), r.srv.URL + "/root": string(rootBody)}, urls)
}
