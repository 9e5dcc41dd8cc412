package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// pendingSite waits for the session's one pending action and checks it is
// a browser_permission for origin.
func pendingSite(t *testing.T, h *harness, id, origin string) lt.Action {
	t.Helper()
	var a lt.Action
	waitUntil(t, 3*time.Minute, func() bool {
		s, err := h.eng.GetSession(context.Background(), id)
		require.NoError(t, err)
		if s.Status == lt.SessionIdle || s.Status == lt.SessionFailed {
			dumpEvents(t, h, id)
			t.Fatalf("session %s ended (%s) while a browser permission was expected", id, s.Status)
		}
		if s.Status != lt.SessionRequiresAction || len(s.RequiredActions) != 1 {
			return false
		}
		a = s.RequiredActions[0]
		return true
	})
	require.Equal(t, lt.ActionBrowserPermission, a.Type, "%+v", a)
	require.Equal(t, origin, a.Origin)
	require.True(t, strings.HasPrefix(a.RequestID, "brq_"), a.RequestID)
	require.Greater(t, len(a.RequestID), len("brq_")+20, "an unguessable id")
	return a
}

// allowSite allows the session's pending browser_permission for origin.
func allowSite(t *testing.T, h *harness, id, origin, scope string) {
	t.Helper()
	a := pendingSite(t, h, id, origin)
	decide(t, h, id, a.ID, &lt.Decision{Decision: lt.DecisionAllow, Scope: scope, RequestID: a.RequestID})
}

// toolFailures are the errors of the session's failed calls, in order.
func toolFailures(t *testing.T, h *harness, id string) []string {
	t.Helper()
	var out []string
	for _, ev := range events(t, h, id, lt.EventToolFailed) {
		out = append(out, data[lt.ToolFailedData](t, ev).Error)
	}
	return out
}

// browserHarness is an engine running sessions in bubblewrap, as a server
// does, and an agent with the browser tool whose allowlist is 127.0.0.1 at
// the ports of sites.
func browserHarness(t *testing.T, p model.Provider, sites ...string) (*harness, *lt.AgentSpec) {
	t.Helper()
	sb, err := sandbox.NewBwrap(sandbox.BwrapOptions{})
	if err != nil {
		t.Skipf("no bubblewrap here: %v", err)
	}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	h.sandbox = sb
	h.restart("node-a")
	var ports []int
	for _, u := range sites {
		ports = append(ports, srvPort(t, u))
	}
	return h, &lt.AgentSpec{
		Model:       lt.ModelSpec{Provider: "plan"},
		Tools:       []lt.ToolSpec{{Name: "browser"}},
		Environment: &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: ports}},
	}
}

func apiError(t *testing.T, err error) *apierror.Error {
	t.Helper()
	var ae *apierror.Error
	require.True(t, errors.As(err, &ae), "want an API error, got %v", err)
	return ae
}

// TestBrowserPermissionDecisions: an open of a site of the allowlist no
// person allowed yet parks the session on a browser_permission action (its
// request_id unguessable, the origin, the purpose); a decision without the
// request_id is a 400 naming it, one naming another request a 409; the
// session survives a restart while it waits; a deny fails the call with the
// person's reason. A site outside the allowlist is refused without asking,
// and an open of a new site without a purpose is an error naming purpose.
// No browser runs: nothing here is allowed.
func TestBrowserPermissionDecisions(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		call("browser", `{"action":"open","url":"http://127.0.0.1:8181/docs","purpose":"read the docs"}`),
		call("browser", `{"action":"open","url":"http://127.0.0.2:8181/"}`),
		call("browser", `{"action":"open","url":"http://127.0.0.1:8181/"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	sp := &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "plan"},
		Tools: []lt.ToolSpec{{Name: "browser"}},
		Environment: &lt.Environment{
			Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{8181}},
		},
	}
	s := create(t, h, sp, nil)
	a := pendingSite(t, h, s.ID, "http://127.0.0.1:8181")
	require.Equal(t, "read the docs", a.Purpose)
	require.Contains(t, strings.Join(a.Evidence, "\n"), "http://127.0.0.1:8181/docs")

	ctx := context.Background()
	_, err := h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionAllow, Scope: lt.ScopeSession})
	ae := apiError(t, err)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Equal(t, "request_id", ae.Field)
	_, err = h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionAllow, Scope: lt.ScopeSession, RequestID: "brq_" + strings.Repeat("a", 26)})
	require.Equal(t, http.StatusConflict, apiError(t, err).Status, "a decision naming another request")
	_, err = h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionAllow, RequestID: a.RequestID})
	require.Equal(t, "scope", apiError(t, err).Field)
	_, err = h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionDeny, RequestID: a.RequestID})
	require.Equal(t, "reason", apiError(t, err).Field)

	// A restart while it waits: the action and its request id are the
	// journal's.
	h.restart("node-b")
	again := pendingSite(t, h, s.ID, "http://127.0.0.1:8181")
	require.Equal(t, a.RequestID, again.RequestID)
	require.Equal(t, a.ID, again.ID)

	deny := &lt.Decision{Decision: lt.DecisionDeny, Reason: "not that site today", RequestID: a.RequestID}
	decide(t, h, s.ID, a.ID, deny)
	// The same decision again answers the first; another is a conflict.
	decide(t, h, s.ID, a.ID, deny)
	_, err = h.eng.DecideAction(ctx, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionAllow, Scope: lt.ScopeOnce, RequestID: a.RequestID})
	require.Equal(t, http.StatusConflict, apiError(t, err).Status)

	// The third open, of the same site without a purpose, is not asked:
	// it names purpose.
	h.waitStatus(s.ID, lt.SessionIdle)
	failures := toolFailures(t, h, s.ID)
	require.Len(t, failures, 3, "%q", failures)
	require.Contains(t, failures[0], "denied the browser access to http://127.0.0.1:8181: not that site today")
	require.Contains(t, failures[1], "http://127.0.0.2:8181 is not in this agent's network allowlist")
	require.Contains(t, failures[2], "arguments.purpose")
	require.Len(t, events(t, h, s.ID, lt.EventActionRequired), 1, "the unlisted site and the open without a purpose asked no one")
}

// TestBrowserLoginAsksForItsSite: a login goes to its page as an open does,
// so a site no person allowed yet raises the browser_permission action
// before the server fills any password into it, a login without a purpose
// names purpose, and one outside the allowlist is refused. No browser runs.
func TestBrowserLoginAsksForItsSite(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		call("browser", `{"action":"login","url":"http://127.0.0.1:8181/login","secret":"SITE_LOGIN","purpose":"sign in to read my orders"}`),
		call("browser", `{"action":"login","url":"http://127.0.0.1:8181/login","secret":"SITE_LOGIN"}`),
		call("browser", `{"action":"login","url":"http://127.0.0.2:8181/login","secret":"SITE_LOGIN","purpose":"elsewhere"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	s := create(t, h, &lt.AgentSpec{
		Model:    lt.ModelSpec{Provider: "plan"},
		Tools:    []lt.ToolSpec{{Name: "browser"}},
		Policies: []lt.Policy{{Name: "logins", Tool: "browser", Decision: lt.PolicyAllow}},
		Environment: &lt.Environment{
			Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{8181}},
		},
	}, nil)
	a := pendingSite(t, h, s.ID, "http://127.0.0.1:8181")
	require.Equal(t, "sign in to read my orders", a.Purpose)
	require.Contains(t, strings.Join(a.Evidence, "\n"), "http://127.0.0.1:8181/login")
	decide(t, h, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionDeny, Reason: "no logins", RequestID: a.RequestID})

	h.waitStatus(s.ID, lt.SessionIdle)
	failures := toolFailures(t, h, s.ID)
	require.Len(t, failures, 3, "%q", failures)
	require.Contains(t, failures[0], "denied the browser access to http://127.0.0.1:8181: no logins")
	require.Contains(t, failures[1], "arguments.purpose: is required to login http://127.0.0.1:8181")
	require.Contains(t, failures[2], "login: refused: http://127.0.0.2:8181 is not in this agent's network allowlist")
	require.Len(t, events(t, h, s.ID, lt.EventActionRequired), 1)
}

// siteLog records the requests a test site received.
type siteLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *siteLog) add(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paths = append(l.paths, p)
}

func (l *siteLog) has(p string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.paths {
		if q == p {
			return true
		}
	}
	return false
}

// TestBrowserPermissionGrants drives Chromium in bubblewrap against two
// sites (two ports of 127.0.0.1): a site allowed for the session is not
// asked again; one allowed once is asked again at the next call; a
// redirect to a site no person allowed raises its own action (and the open
// runs again once allowed); a redirect outside the allowlist is refused;
// a page allowed once sends nothing more at a later call (a click's fetch);
// an image of the other site on an allowed page is never fetched (the
// default subresources rule: same_origin).
func TestBrowserPermissionGrants(t *testing.T) {
	needChromium(t)
	var logB siteLog
	siteB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logB.add(r.URL.Path)
		fmt.Fprint(w, `<html><head><title>Site B</title></head><body><p>This is B.</p>`+
			`<button id="send" onclick="fetch('/after-once', {method: 'POST'})">Send</button></body></html>`)
	}))
	defer siteB.Close()
	siteA := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-b":
			http.Redirect(w, r, siteB.URL+"/landing", http.StatusFound)
		case "/to-unlisted":
			http.Redirect(w, r, strings.Replace(siteB.URL, "127.0.0.1", "127.0.0.2", 1)+"/x", http.StatusFound)
		default:
			fmt.Fprintf(w, `<html><head><title>Site A</title></head><body><p>This is A.</p><img src="%s/pixel.png">`+
				`<a id="pop" target="_blank" href="%s/popup-link">B</a>`+
				`<button id="open" onclick="window.open('%s/popup-script')">B</button></body></html>`, siteB.URL, siteB.URL, siteB.URL)
		}
	}))
	defer siteA.Close()
	originA := "http://" + strings.TrimPrefix(siteA.URL, "http://")
	originB := "http://" + strings.TrimPrefix(siteB.URL, "http://")
	p := &planProvider{plan: []model.Response{
		call("browser", fmt.Sprintf(`{"action":"open","url":%q,"purpose":"read A"}`, siteA.URL+"/")),            // asked: session
		call("browser", fmt.Sprintf(`{"action":"open","url":%q,"purpose":"read A again"}`, siteA.URL+"/2")),     // not asked
		call("browser", `{"action":"click","selector":"#pop"}`),                                                 // a new tab: none opens
		call("browser", `{"action":"click","selector":"#open"}`),                                                // a popup: none opens
		call("browser", fmt.Sprintf(`{"action":"open","url":%q,"purpose":"read B"}`, siteB.URL+"/once")),        // asked: once
		call("browser", `{"action":"click","selector":"#send"}`),                                                // B's page, allowed once: its fetch fails
		call("browser", fmt.Sprintf(`{"action":"open","url":%q,"purpose":"read B again"}`, siteB.URL+"/twice")), // asked again: deny
		call("browser", fmt.Sprintf(`{"action":"open","url":%q,"purpose":"follow A"}`, siteA.URL+"/to-b")),      // redirect: B asked, once
		call("browser", fmt.Sprintf(`{"action":"open","url":%q,"purpose":"follow A"}`, siteA.URL+"/to-unlisted")),
		{Text: "done"},
	}}
	h, sp := browserHarness(t, p, siteA.URL, siteB.URL)
	s := create(t, h, sp, nil)
	allowSite(t, h, s.ID, originA, lt.ScopeSession)
	allowSite(t, h, s.ID, originB, lt.ScopeOnce)
	b2 := pendingSite(t, h, s.ID, originB)
	decide(t, h, s.ID, b2.ID, &lt.Decision{Decision: lt.DecisionDeny, Reason: "once was enough", RequestID: b2.RequestID})
	redirected := pendingSite(t, h, s.ID, originB)
	decide(t, h, s.ID, redirected.ID, &lt.Decision{Decision: lt.DecisionAllow, Scope: lt.ScopeOnce, RequestID: redirected.RequestID})
	require.Contains(t, strings.Join(redirected.Evidence, "\n"), siteA.URL+"/to-b", "the action says where the redirect came from")
	waitUntil(t, 3*time.Minute, func() bool {
		got, err := h.eng.GetSession(context.Background(), s.ID)
		require.NoError(t, err)
		return got.Status == lt.SessionIdle
	})

	asked := events(t, h, s.ID, lt.EventActionRequired)
	require.Len(t, asked, 4, "A once for the session, B at each call (once, denied, the redirect)")
	outputs := ""
	for _, ev := range events(t, h, s.ID, lt.EventToolCompleted) {
		outputs += string(ev.Data) + "\n"
	}
	require.Contains(t, outputs, siteB.URL+"/landing", "the allowed redirect was followed")
	require.Contains(t, outputs, `"title":"Site A"`)
	failures := toolFailures(t, h, s.ID)
	require.Len(t, failures, 2, "%q", failures)
	require.Contains(t, failures[0], "once was enough")
	require.Contains(t, failures[1], "127.0.0.2")
	require.Contains(t, failures[1], "not in this agent's network allowlist")
	require.True(t, logB.has("/once"), "B was visited once allowed")
	require.False(t, logB.has("/twice"), "the denied visit never reached B")
	require.False(t, logB.has("/pixel.png"), "A's page could not pull B's image (subresources same_origin)")
	require.False(t, logB.has("/after-once"), "a page allowed once sends nothing at a later call")
	require.False(t, logB.has("/popup-link"), "a link to a new tab went past the person's rule")
	require.False(t, logB.has("/popup-script"), "a popup went past the person's rule")
}

// TestBrowserSubresourcesValidated: environment.browser.subresources is
// same_origin or allowed_hosts; another value is a 400 naming it.
func TestBrowserSubresourcesValidated(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"text":"ok"}]`, lt.ToolSpec{Name: "browser"})
	sp.Environment = &lt.Environment{Browser: &lt.BrowserSpec{Subresources: "everything"}}
	_, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"})
	ae := apiError(t, err)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.True(t, strings.HasSuffix(ae.Field, "environment.browser.subresources"), ae.Field)
	for _, ok := range []string{lt.SubresourcesSameOrigin, lt.SubresourcesAllowedHosts} {
		sp.Environment.Browser.Subresources = ok
		_, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"})
		require.NoError(t, err)
	}
}
