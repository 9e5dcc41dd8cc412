package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// needChromium skips without Chromium, except under CI, which has it.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must have chromium: %v", err)
		}
		t.Skip("chromium is not installed: the browser tests need Debian's chromium")
	}
}

// TestBrowserTool: the scripted model opens a page, reads it, types and
// clicks, takes a screenshot (an artifact) and gets clear errors for bad
// arguments; open, read and screenshot are read calls, the others
// irreversible, and an agent's effect overrides the per-action class.
func TestBrowserTool(t *testing.T) {
	needChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<html><head><title>Shop</title></head><body><p>Price: 12 EUR</p><a href="/cart">Cart</a>
<input id="q"><button id="buy" onclick="document.title='Bought '+document.getElementById('q').value">Buy</button></body></html>`)
	}))
	defer srv.Close()
	p := &planProvider{plan: []model.Response{
		call("browser", fmt.Sprintf(`{"action":"open","url":%q,"purpose":"check the price"}`, srv.URL+"/")),
		call("browser", `{"action":"read"}`),
		call("browser", `{"action":"type","selector":"#q","text":"two"}`),
		call("browser", `{"action":"click","selector":"#buy"}`),
		call("browser", `{"action":"screenshot"}`),
		call("browser", `{"action":"click"}`),
		call("browser", `{"action":"fly"}`),
		call("browser", `{"action":"close"}`),
		// Not in environment.network.allow: refused before the browser moves.
		call("browser", fmt.Sprintf(`{"action":"open","url":%q}`, strings.Replace(srv.URL, "127.0.0.1", "127.0.0.2", 1)+"/")),
		{Text: "done"},
	}}
	// In bubblewrap, as a server runs it: the browser reaches the test's
	// site only through the session's egress proxy.
	h, sp := browserHarness(t, p, srv.URL)
	s := create(t, h, sp, nil)
	// The test's site is allowed for the session by a person.
	allowSite(t, h, s.ID, "http://"+strings.TrimPrefix(srv.URL, "http://"), lt.ScopeSession)
	// A browser takes seconds to start on a busy machine: wait longer than
	// waitStatus does.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got, err := h.eng.GetSession(context.Background(), s.ID)
		require.NoError(t, err)
		if got.Status == lt.SessionIdle {
			break
		}
		if time.Now().After(deadline) {
			dumpEvents(t, h, s.ID)
			t.Fatalf("session %s: status %s, want idle", s.ID, got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}

	requested := events(t, h, s.ID, lt.EventToolRequested)
	var classes []lt.EffectClass
	for _, ev := range requested {
		classes = append(classes, data[lt.ToolRequestedData](t, ev).Class)
	}
	require.Equal(t, []lt.EffectClass{lt.EffectRead, lt.EffectRead, lt.EffectIrreversible, lt.EffectIrreversible, lt.EffectRead,
		lt.EffectIrreversible, lt.EffectIrreversible, lt.EffectIrreversible, lt.EffectRead}, classes)

	outputs := map[int]string{}
	for _, ev := range events(t, h, s.ID, lt.EventToolCompleted) {
		d := data[lt.ToolCompletedData](t, ev)
		outputs[d.Index+10*d.Step] = string(d.Output)
	}
	var all []string
	for _, o := range outputs {
		all = append(all, o)
	}
	joined := strings.Join(all, "\n")
	require.Contains(t, joined, "Price: 12 EUR", "read returns the page's text")
	require.Contains(t, joined, srv.URL+"/cart", "read lists the links")
	require.Contains(t, joined, "Bought two", "type and click acted on the page")

	arts := events(t, h, s.ID, lt.EventArtifactCreated)
	require.Len(t, arts, 1, "the screenshot is an artifact")
	a := data[lt.ArtifactCreatedData](t, arts[0]).Artifact
	require.Equal(t, "image/png", a.ContentType)
	require.False(t, a.Final)
	require.Contains(t, joined, a.ID, "the model is told the artifact's id")

	failures := toolFailures(t, h, s.ID)
	require.Len(t, failures, 3)
	require.Contains(t, failures[0], "arguments.selector: is required for action click")
	require.Contains(t, failures[1], "arguments.action")
	// Not in environment.network.allow: refused before the browser moved,
	// nobody asked.
	require.Contains(t, failures[2], "is not in this agent's network allowlist")
	require.Len(t, events(t, h, s.ID, lt.EventActionRequired), 1, "only the listed site was asked about")

	// Every request went through the session's egress proxy; the unlisted
	// address was never even tried.
	var allowed, refused int
	for _, ev := range events(t, h, s.ID, lt.EventNetworkConnection) {
		d := data[lt.NetworkConnectionData](t, ev)
		require.Equal(t, "browser", d.Tool)
		switch {
		case d.Allowed && d.Host == "127.0.0.1":
			allowed++
		case !d.Allowed && d.Host == "127.0.0.2":
			refused++
		case !d.Allowed:
			// Chromium's own background requests: refused like any.
		default:
			t.Fatalf("unexpected connection %+v", d)
		}
	}
	require.Positive(t, allowed, "the page was fetched through the proxy")
	require.Zero(t, refused, "the unlisted address was refused before any connection")
}

func dumpEvents(t *testing.T, h *harness, id string) {
	for _, ev := range events(t, h, id) {
		t.Logf("%d %s %s", ev.Seq, ev.Type, clipStr(string(ev.Data), 4000))
	}
}

func clipStr(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// TestBrowserApprovalEvidence: a policy asks before the browser acts on a
// page; the approval shows the page's URL, the element and the purpose.
// The session parks meanwhile (its browser stops); approving runs the
// click on the same page, which the browser that starts again reopens.
func TestBrowserApprovalEvidence(t *testing.T) {
	needChromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><title>Shop</title></head><body><button id="buy" onclick="document.title='Bought'">Buy</button></body></html>`)
	}))
	defer srv.Close()
	p := &planProvider{plan: []model.Response{
		call("browser", fmt.Sprintf(`{"action":"open","url":%q,"purpose":"buy the lamp"}`, srv.URL+"/shop")),
		call("browser", `{"action":"click","selector":"#buy","purpose":"buy the lamp"}`),
		{Text: "done"},
	}}
	h, sp := browserHarness(t, p, srv.URL)
	sp.Policies = []lt.Policy{{Name: "clicks", Tool: "browser", When: `args.action == "click"`, Decision: lt.PolicyAsk}}
	s := create(t, h, sp, nil)
	allowSite(t, h, s.ID, "http://"+strings.TrimPrefix(srv.URL, "http://"), lt.ScopeSession)
	var a lt.Action
	waitUntil(t, 3*time.Minute, func() bool {
		got, err := h.eng.GetSession(context.Background(), s.ID)
		require.NoError(t, err)
		if len(got.RequiredActions) == 1 && got.RequiredActions[0].Type == lt.ActionApproval {
			a = got.RequiredActions[0]
			return true
		}
		return false
	})
	require.Equal(t, lt.ActionApproval, a.Type)
	ev := strings.Join(a.Evidence, "\n")
	require.Contains(t, ev, "Browser action click on the page at URL "+srv.URL+"/shop on the element #buy")
	require.Contains(t, ev, "The agent's stated purpose: buy the lamp")
	decide(t, h, s.ID, a.ID, &lt.Decision{Decision: lt.DecisionApprove})
	waitUntil(t, 3*time.Minute, func() bool {
		got, err := h.eng.GetSession(context.Background(), s.ID)
		require.NoError(t, err)
		return got.Status == lt.SessionIdle
	})
	var clicked bool
	for _, e := range events(t, h, s.ID, lt.EventToolCompleted) {
		clicked = clicked || strings.Contains(string(e.Data), `"title":"Bought"`)
	}
	require.True(t, clicked, "the approved click ran")
}

// waitUntil polls cond until it holds, failing the test after timeout (a
// browser takes seconds to start on a busy machine).
func waitUntil(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
