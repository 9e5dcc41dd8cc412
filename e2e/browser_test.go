package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
)

// browserTimeout bounds one wait in a page: the UI answers in milliseconds,
// but CI's two cores may be busy with the rest of the suite.
const browserTimeout = 45 * time.Second

// findChromium returns the browser to drive: $LONGHAUL_CHROMIUM, else the
// first of Debian's chromium and its usual other names on PATH.
func findChromium() string {
	if p := os.Getenv("LONGHAUL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one headless Chromium for a test, its tabs watched for
// exceptions, console errors and Content-Security-Policy violations, which
// fail the test when it ends.
type browser struct {
	t     *testing.T
	root  context.Context // the first tab: the browser lives as long as it
	shots string          // where screenshots go

	mu       sync.Mutex
	problems []string
}

// screenshotDir is $LONGHAUL_SCREENSHOTS (created if needed), else a
// temporary directory of the test; the test logs which.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LONGHAUL_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else {
		dir = filepath.Join(dir, t.Name())
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	t.Logf("screenshots of this test are written to %s (set LONGHAUL_SCREENSHOTS to keep them)", dir)
	return dir
}

// startBrowser starts Chromium, or skips the test when there is none,
// except under CI=true, where a missing browser fails it: .ci/run installs
// one, and a browser suite that skips itself in CI tests nothing.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	path := findChromium()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium on PATH: CI must install it (.ci/run installs Debian's chromium)")
		}
		t.Skip("no chromium on PATH: install Debian's chromium (or set LONGHAUL_CHROMIUM) to run the web UI browser tests")
	}
	// The flags that let Chromium start as root in a container without a
	// display or a network: no sandbox (root cannot have one), no GPU, and
	// none of the background traffic that a closed network refuses.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &browser{t: t, root: ctx, shots: screenshotDir(t)}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser; it must not carry a timeout.
	require.NoError(t, chromedp.Do(ctx), "start %s", path)
	b.watch(ctx, "tab 1")
	t.Cleanup(b.checkProblems)
	return b
}

// tab opens another tab of the same browser (its own sessionStorage, as a
// second browser window of one person would have).
func (b *browser) tab(name string) context.Context {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.root)
	b.t.Cleanup(cancel)
	require.NoError(b.t, chromedp.Do(ctx), "open %s", name)
	b.watch(ctx, name)
	return ctx
}

// Browser log lines that are answers the UI expects and handles (a 401 that
// shows the sign-in screen, a 400 it shows next to the field), and an event
// stream cut mid-way: the server of each test is killed (SIGKILL) before
// the browser's problems are read, and an EventSource that loses its
// connection reconnects with Last-Event-ID, which is how the UI follows a
// session across restarts (a stream the server ends badly shows as
// missing events in the tests that watch them).
//
// A 403 is expected from GET /v1/me alone: the sign-in probe of a key the
// server tells nothing (a runner's), which the sign-in form shows. Once the
// test's end kills its server, a request the page still had in flight fails
// however the kernel ended its socket (reset, refused, closed, or not
// connected yet: Chromium's ERR_SOCKET_NOT_CONNECTED, seen once in CI when
// the inbox's refresh of resolved actions met the kill).
var (
	expectedConsole = regexp.MustCompile(`Failed to load resource: the server responded with a status of (400|401|404|409)`)
	refusedProbe    = regexp.MustCompile(`Failed to load resource: the server responded with a status of 403`)
	requestLost     = regexp.MustCompile(`Failed to load resource: net::ERR_(CONNECTION_RESET|CONNECTION_REFUSED|CONNECTION_CLOSED|SOCKET_NOT_CONNECTED|EMPTY_RESPONSE|INCOMPLETE_CHUNKED_ENCODING)`)
	streamCut       = regexp.MustCompile(`Failed to load resource: net::ERR_(INCOMPLETE_CHUNKED_ENCODING|CONNECTION_RESET|EMPTY_RESPONSE)`)
)

// watch records what a page reports as going wrong.
func (b *browser) watch(ctx context.Context, name string) {
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			bad := m.IsException() || m.Type == chromedp.ConsoleError ||
				strings.Contains(m.Text, "Content Security Policy") || m.Source == "security"
			if !bad || expectedConsole.MatchString(m.Text) || streamCut.MatchString(m.Text) && strings.Contains(m.URL, "/events/stream") ||
				refusedProbe.MatchString(m.Text) && strings.HasSuffix(m.URL, "/v1/me") {
				continue
			}
			if _, ending := serversStopping.Load(b.t); ending && requestLost.MatchString(m.Text) {
				continue // the test is over and its server killed under the page
			}
			b.mu.Lock()
			b.problems = append(b.problems, fmt.Sprintf("%s: %s (%s:%d)", name, m.String(), m.URL, m.Line))
			b.mu.Unlock()
		}
	}()
}

func (b *browser) checkProblems() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		b.t.Errorf("the pages reported %d problems:\n%s", len(b.problems), strings.Join(b.problems, "\n"))
	}
}

// do runs actions in a tab, bounded by browserTimeout, and fails the test
// with what was being done.
func (b *browser) do(ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	c, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	require.NoError(b.t, chromedp.Do(c, actions...), what)
}

// waitJS waits until the JavaScript expression is true in the page (polled
// on every animation frame, so nothing sleeps).
func (b *browser) waitJS(ctx context.Context, what, expr string) {
	b.t.Helper()
	c, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	_, err := chromedp.Run(c, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(browserTimeout)))
	if err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
		b.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, body)
	}
}

// eval evaluates expr in the page (awaiting a promise) and decodes its
// value into out.
func (b *browser) eval(ctx context.Context, expr string, out any) {
	b.t.Helper()
	c, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	raw, err := chromedp.Run(c, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err, "evaluate %s", expr)
	if out != nil {
		require.NoError(b.t, json.Unmarshal(raw, out), "decode the value of %s: %s", expr, raw)
	}
}

// text returns the text of the first element matching the CSS selector.
func (b *browser) text(ctx context.Context, sel string) string {
	b.t.Helper()
	var s string
	b.eval(ctx, fmt.Sprintf(`(document.querySelector(%s) || {}).innerText || ""`, jsString(sel)), &s)
	return s
}

// setValue sets an input's or a textarea's value as typing would, firing
// the input event the page listens to.
func (b *browser) setValue(ctx context.Context, sel, value string) {
	b.t.Helper()
	var ok bool
	b.eval(ctx, fmt.Sprintf(`(() => { const el = document.querySelector(%s); if (!el) return false;
		el.focus(); el.value = %s; el.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`,
		jsString(sel), jsString(value)), &ok)
	require.True(b.t, ok, "no element %s to type into", sel)
}

// click clicks the first element matching the CSS selector once it is
// visible, as a person would: with the mouse, at the element's center.
//
// A mouse click lands where the element was when it was aimed at, so the
// element is first scrolled to the middle of the window, where the sticky
// top bar never covers it, and the click is checked to have reached an
// element the selector matches. A page that moved between the aim and the
// click (a card re-rendered above the element, a panel that changed the
// page's height) sent it elsewhere: it is logged and made again.
func (b *browser) click(ctx context.Context, sel string) {
	b.t.Helper()
	deadline := time.Now().Add(browserTimeout)
	for {
		armed := b.try(ctx, fmt.Sprintf(armClickJS, jsString(sel)), nil) == nil
		c, cancel := context.WithTimeout(ctx, browserTimeout)
		err := chromedp.Do(c, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
		cancel()
		// A page that re-renders (a live listing, on the event stream's
		// news) may replace the node between its lookup and the click,
		// before any mouse event is sent: look it up again.
		if err != nil && strings.Contains(err.Error(), "Could not find node with given id") && time.Now().Before(deadline) {
			continue
		}
		require.NoError(b.t, err, "click "+sel)
		// null: the click's page is gone (it navigated), or nothing was
		// armed; nothing to check then.
		var landed *bool
		if !armed || b.try(ctx, landedClickJS, &landed) != nil || landed == nil || *landed {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("click %s: every click landed elsewhere (the page kept moving under it)", sel)
		}
		b.t.Logf("click %s: the click landed elsewhere (the page moved under it); clicking again", sel)
	}
}

// armClickJS (given the selector as a JavaScript string) scrolls the first
// element the selector matches, if there is one yet, to the middle of the
// window, and records whether the next clicks reach an element it
// matches (an element made after this too).
const armClickJS = `(() => {
	const sel = %s;
	const el = document.querySelector(sel);
	if (el) el.scrollIntoView({block: 'center', inline: 'center'});
	const prev = window.__lhClick;
	if (prev) document.removeEventListener('click', prev.listen, true);
	const c = {hit: false};
	c.listen = (e) => { if (e.target instanceof Element && e.target.closest(sel)) c.hit = true; };
	document.addEventListener('click', c.listen, true);
	window.__lhClick = c;
	return null;
})()`

// landedClickJS says whether a click armed by armClickJS reached its
// element (null if this page armed none), and disarms it.
const landedClickJS = `(() => {
	const c = window.__lhClick;
	if (!c) return null;
	document.removeEventListener('click', c.listen, true);
	delete window.__lhClick;
	return c.hit;
})()`

// try is eval for a check whose failure is not the test's: it returns the
// error (a page that navigated away meanwhile has no context to evaluate
// in) rather than failing.
func (b *browser) try(ctx context.Context, expr string, out any) error {
	c, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	raw, err := chromedp.Run(c, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// screenshot saves the whole page as name.png.
func (b *browser) screenshot(ctx context.Context, name string) {
	b.t.Helper()
	c, cancel := context.WithTimeout(ctx, browserTimeout)
	defer cancel()
	// From the top: a sticky header would otherwise be drawn where the
	// page was scrolled to.
	_, err := chromedp.Run(c, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	require.NoError(b.t, err, "scroll to the top for %s", name)
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	require.NoError(b.t, err, "screenshot %s", name)
	path := filepath.Join(b.shots, name+".png")
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
	b.t.Logf("screenshot %s", path)
}

// phone makes the tab's viewport a phone's (390x844, touch) until reset.
func (b *browser) phone(ctx context.Context) {
	b.t.Helper()
	b.do(ctx, "emulate a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
}

// desktop makes the tab's viewport a laptop's again (1280x900).
func (b *browser) desktop(ctx context.Context) {
	b.t.Helper()
	b.do(ctx, "emulate a laptop", chromedp.EmulateViewport(1280, 900))
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// navigate loads url in the tab and waits until the app has started (it
// replaces the "Loading…" line of the page).
func navigate(url string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(url),
		chromedp.Poll[chromedp.Void](`document.querySelector('#app .loading') === null`, chromedp.WithPollingTimeout(browserTimeout)),
	)
}

// goTo follows an in-app link (a new hash), as a click in the navigation
// does: the page is not reloaded, the route's view is built anew.
func (b *browser) goTo(ctx context.Context, hash string) {
	b.t.Helper()
	b.eval(ctx, fmt.Sprintf(`location.hash = %s`, jsString(hash)), nil)
}

// keyedClient is a client of srv that sends key.
func keyedClient(t *testing.T, srv *server, key string) *client.Client {
	t.Helper()
	c, err := client.New(srv.url, &client.Config{APIKey: key, MaxRetries: -1})
	require.NoError(t, err)
	return c
}
