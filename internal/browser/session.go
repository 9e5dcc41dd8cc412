package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// Process is a program started in the session's sandbox (environment.Process
// is one): the browser, whose DevTools pipe is its stdin and stdout.
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.ReadCloser
	Done() <-chan struct{}
	Stderr() string
	Stop(grace time.Duration)
	Kill()
}

// Launch is how to start the browser: a command for `sh -c` in the
// session's sandbox, and its environment.
type Launch struct {
	Command string
	Env     map[string]string
	// MemoryBytes is the memory the browser may use, all its processes
	// together (sandbox.StartRequest.MemoryBytes; see memory.go).
	MemoryBytes int64
}

// StartFunc starts the browser's program in the session's sandbox.
type StartFunc func(ctx context.Context, l *Launch) (Process, error)

// Defaults of Config.
const (
	// DefaultProgram is Debian's Chromium: its binary itself, not the
	// /usr/bin/chromium launcher script, which sources /etc/chromium.d
	// (not mounted in the sandbox) and fails there.
	DefaultProgram = "/usr/lib/chromium/chromium"
	// DefaultReadBudget is how many characters of a page's text read
	// returns (about 2,000 tokens).
	DefaultReadBudget = 8000
	// DefaultMaxLinks is how many links read lists.
	DefaultMaxLinks = 50
	// DefaultActionTimeout bounds one action.
	DefaultActionTimeout = 60 * time.Second
	// stopGrace is how long a stopping browser gets before it is killed.
	stopGrace = 3 * time.Second
)

// Config configures a Session; nil takes the defaults.
type Config struct {
	// Program is the browser to run (default DefaultProgram).
	Program string
	// Proxy is the proxy every request goes through, as the sandbox sees it
	// ("127.0.0.1:3128"); "" for none (a sandbox that confines nothing).
	Proxy string
	// ProfileDir is the browser's profile directory, relative to the
	// workspace (default ".browser/profile"): in the workspace so that
	// cookies are in its snapshots and survive a restart.
	ProfileDir string
	// ReadBudget is DefaultReadBudget when zero.
	ReadBudget int
	// ActionTimeout is DefaultActionTimeout when zero.
	ActionTimeout time.Duration
	// MemoryBytes bounds the browser's memory (DefaultMemoryBytes when
	// zero; see memory.go).
	MemoryBytes int64
	// SaveState, when set, keeps the browser's state (JSON: its cookies
	// and the page it is on) after every action that changed it, and
	// LoadState gives it back (nil: none kept) to a browser that starts,
	// which sets the cookies and opens the page again. A session's browser
	// stops whenever the session parks (waiting for an approval, say), and
	// Chromium writes its cookie store only now and then, so a server
	// killed with SIGKILL (its browser dies with it) would lose the
	// latest; what SaveState keeps depends on neither.
	SaveState func(ctx context.Context, data []byte) error
	LoadState func(ctx context.Context) ([]byte, error)
	// Login returns the vault login secret name for a login page at dest
	// (its host and port), or a *LoginRefusedError; nil: no logins (see
	// login.go).
	Login func(ctx context.Context, name, dest string) (*tool.LoginSecret, error)
	// Redactor returns what removes the vault's secret values from every
	// answer; nil: nothing is redacted.
	Redactor func(ctx context.Context) (*redact.Redactor, error)
}

// Session is one session's browser: started on its first action, stopped
// by Close (when the session parks or ends). It is safe for concurrent
// use; actions run one at a time.
type Session struct {
	start StartFunc
	cfg   Config

	mu   sync.Mutex
	proc Process
	// tab is the chromedp context of the browser's one tab. chromedp keeps
	// the browser's connection in a context, so this one lives in the
	// struct, from Background, for as long as the browser runs; each action
	// derives its own from it, bounded by the call's context.
	tab       context.Context
	cancelTab context.CancelFunc
	cancelAll context.CancelFunc
	// state is what SaveState was last given.
	state []byte
	// red is the vault's redactor of the action running (see Do).
	red *redact.Redactor
	// page is the address the last action left the browser on.
	page string
	// gate judges every request the browser's pages make (permission.go).
	gate gate
}

// New returns a Session that starts its browser with start.
func New(start StartFunc, cfg *Config) *Session {
	s := &Session{start: start}
	if cfg != nil {
		s.cfg = *cfg
	}
	if s.cfg.Program == "" {
		s.cfg.Program = DefaultProgram
	}
	if s.cfg.ProfileDir == "" {
		s.cfg.ProfileDir = ".browser/profile"
	}
	if s.cfg.ReadBudget <= 0 {
		s.cfg.ReadBudget = DefaultReadBudget
	}
	if s.cfg.ActionTimeout <= 0 {
		s.cfg.ActionTimeout = DefaultActionTimeout
	}
	if s.cfg.MemoryBytes <= 0 {
		s.cfg.MemoryBytes = DefaultMemoryBytes
	}
	return s
}

// Command is the shell command that starts the browser in the sandbox:
// headless, without Chromium's own sandbox (it needs user namespaces,
// which the session's sandbox refuses; the session's sandbox is the
// boundary), with /dev/shm unused (the sandbox's is small), its profile in
// the workspace, its caches in /tmp, every request through the proxy
// (loopback included: <-loopback> undoes Chromium's implicit bypass), and
// the DevTools protocol on a pipe: fd 3 is its stdin and fd 4 its stdout,
// the only way in (see the package documentation).
func (s *Session) Command() string {
	args := []string{
		shellQuote(s.cfg.Program),
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-breakpad", "--mute-audio", quietFeatures, "--hide-scrollbars", "--window-size=1280,800",
		`--user-data-dir="$HOME"/` + shellQuote(s.cfg.ProfileDir),
		`--disk-cache-dir="${TMPDIR:-/tmp}"/browser-cache`,
		"--remote-debugging-pipe", s.heapFlag(),
	}
	args = append(args, quietFlags...)
	if s.cfg.Proxy != "" {
		args = append(args, shellQuote("--proxy-server=http://"+s.cfg.Proxy), shellQuote("--proxy-bypass-list=<-loopback>"))
	} else {
		args = append(args, "--no-proxy-server")
	}
	// Chromium writes its settings and caches under XDG's directories
	// (default: HOME, the workspace); they belong in the sandbox's TMPDIR.
	// Its own TMPDIR is /tmp: it makes its singleton socket there, and a
	// Unix socket's path may not be longer than 107 bytes, which a local
	// backend's TMPDIR (inside the workspace's host path) can exceed.
	// A browser that was killed leaves its profile locked (Singleton*,
	// naming a pid of its own pid namespace, which a new sandbox may
	// reuse): only this Session runs a browser on the profile, so the lock
	// is stale and goes.
	profile := `"$HOME"/` + shellQuote(s.cfg.ProfileDir)
	return `mkdir -p ` + profile + `/Default; ` + unkeptStores(profile) + `rm -f ` + profile + `/SingletonLock ` + profile + `/SingletonSocket ` + profile + `/SingletonCookie; ` +
		`XDG_CONFIG_HOME="${TMPDIR:-/tmp}"/.config XDG_CACHE_HOME="${TMPDIR:-/tmp}"/.cache TMPDIR=/tmp exec ` + strings.Join(args, " ") + " about:blank 3<&0 4>&1 </dev/null >&2"
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ensure starts the browser if it does not run. s.mu is held.
func (s *Session) ensure(ctx context.Context) error {
	if s.proc != nil {
		select {
		case <-s.proc.Done():
			s.stopLocked() // it died: start anew, with the profile it left
		default:
			if !s.connectionLost() {
				return nil
			}
			// Its connection broke: the browser was killed, and its
			// sandbox is not reaped yet. Start anew all the same.
			s.stopLocked()
		}
	}
	p, err := s.start(ctx, &Launch{Command: s.Command(), MemoryBytes: s.cfg.MemoryBytes})
	if err != nil {
		return fmt.Errorf("start the browser: %w", err)
	}
	pipe := chromedp.NewPipeConn(p.Stdout(), p.Stdin())
	allocCtx, cancelAll := chromedp.NewAllocatorContext(context.Background(), pipeAllocator{pipe})
	tab, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(func(string, ...any) {}), chromedp.WithErrorf(func(string, ...any) {}))
	s.proc, s.tab, s.cancelTab, s.cancelAll = p, tab, cancelTab, cancelAll
	// The first action connects, on the tab's own context: chromedp ties
	// the browser's life to the context of the first Run. It is bounded by
	// killing the program, which breaks the pipe.
	kill := time.AfterFunc(s.cfg.ActionTimeout, p.Kill)
	stop := context.AfterFunc(ctx, p.Kill)
	err = chromedp.Do(tab, chromedp.Navigate("about:blank"))
	kill.Stop()
	stop()
	if err != nil {
		stderr := p.Stderr()
		s.stopLocked()
		return fmt.Errorf("start the browser: %w%s", err, tail(stderr))
	}
	s.gate.reset()
	if err := s.intercept(tab); err != nil {
		s.stopLocked()
		return fmt.Errorf("start the browser: intercept its requests: %w", err)
	}
	if err := s.restoreState(ctx); err != nil {
		s.stopLocked()
		return fmt.Errorf("start the browser: %w", err)
	}
	return nil
}

// connectionLost reports whether the DevTools pipe of the running browser
// is gone (its program killed, say). s.mu is held, s.proc set.
func (s *Session) connectionLost() bool {
	c := chromedp.FromContext(s.tab)
	if c == nil || c.Browser == nil {
		return false
	}
	select {
	case <-c.Browser.LostConnection:
		return true
	default:
		return false
	}
}

// savedState is what SaveState keeps.
type savedState struct {
	Cookies []*network.Cookie `json:"cookies"`
	URL     string            `json:"url,omitempty"`
}

// restoreState gives a browser that started the cookies SaveState kept,
// and opens the page it was on. s.mu is held.
func (s *Session) restoreState(ctx context.Context) error {
	if s.cfg.LoadState == nil {
		return nil
	}
	data, err := s.cfg.LoadState(ctx)
	if err != nil || len(data) == 0 {
		return err
	}
	var st savedState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil // not ours to trust: start without it
	}
	params := make([]*network.CookieParam, 0, len(st.Cookies))
	for _, c := range st.Cookies {
		p := &network.CookieParam{
			Name: c.Name, Value: c.Value, Domain: c.Domain, Path: c.Path, Secure: c.Secure, HTTPOnly: c.HTTPOnly,
			SameSite: c.SameSite, Priority: c.Priority, SourceScheme: c.SourceScheme, SourcePort: c.SourcePort,
		}
		if !c.Session && c.Expires > 0 {
			p.Expires = cdp.TimeSinceEpoch(c.Expires)
		}
		params = append(params, p)
	}
	c, cancel := s.actionContext(ctx)
	defer cancel()
	if len(params) > 0 {
		_, err = chromedp.Run(c, func(ctx context.Context, t *chromedp.Target) (cdp.Empty, error) {
			return cdp.Call(ctx, t, storage.SetCookies, storage.SetCookiesParams{Cookies: params})
		})
		if err != nil {
			return fmt.Errorf("restore cookies: %w", err)
		}
	}
	if u, err := url.Parse(st.URL); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		// Through the proxy, like any page: a failure leaves the browser
		// on a blank page, which the next action tells.
		_ = chromedp.Do(c, chromedp.Navigate(st.URL))
		s.page = st.URL
	}
	s.state = data
	return nil
}

// keepState hands the browser's state to SaveState when it changed. s.mu
// is held.
func (s *Session) keepState(ctx, c context.Context) error {
	if s.cfg.SaveState == nil {
		return nil
	}
	res, err := chromedp.Run(c, func(ctx context.Context, t *chromedp.Target) (storage.GetCookiesResult, error) {
		return cdp.Call(ctx, t, storage.GetCookies, storage.GetCookiesParams{})
	})
	if err != nil {
		return fmt.Errorf("read cookies: %w", err)
	}
	st := savedState{Cookies: res.Cookies, URL: s.page}
	if st.Cookies == nil {
		st.Cookies = []*network.Cookie{}
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	// It is kept in the workspace, which the agent can read.
	data = s.red.JSON(data)
	if bytes.Equal(data, s.state) {
		return nil
	}
	if err := s.cfg.SaveState(ctx, data); err != nil {
		return fmt.Errorf("keep the browser's state: %w", err)
	}
	s.state = data
	return nil
}

func tail(stderr string) string {
	stderr = strings.TrimSpace(stderr)
	if stderr == "" {
		return ""
	}
	if len(stderr) > 2000 {
		stderr = stderr[len(stderr)-2000:]
	}
	return "; its output: " + stderr
}

// pipeAllocator gives chromedp the browser the sandbox started, over its
// pipe, instead of starting one itself.
type pipeAllocator struct{ pipe *chromedp.PipeConn }

func (a pipeAllocator) Allocate(ctx context.Context, opts ...chromedp.BrowserOption) (*chromedp.Browser, error) {
	return chromedp.NewBrowserTransport(ctx, a.pipe, opts...)
}

func (a pipeAllocator) Wait() {}

// actionContext is the context of one action: the tab's, ended by the
// call's context and the action timeout.
func (s *Session) actionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithTimeout(s.tab, s.cfg.ActionTimeout)
	stop := context.AfterFunc(ctx, cancel)
	return c, func() { stop(); cancel() }
}

// do runs one action for Do (login.go), red being the vault's redactor.
func (s *Session) do(ctx context.Context, req *tool.BrowserRequest, red *redact.Redactor) (*tool.BrowserAnswer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.red = red
	if req.Action == tool.BrowserClose {
		s.stopLocked()
		return &tool.BrowserAnswer{}, nil
	}
	// A browser that starts reopens its page and waits for it: navigating
	// until it is up.
	s.gate.begin(req.Sites, true)
	blocked := s.gate.end
	defer func() { blocked() }()
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	s.gate.started(req.Action == tool.BrowserOpen || req.Action == tool.BrowserBack || req.Action == tool.BrowserLogin)
	c, cancel := s.actionContext(ctx)
	defer cancel()
	ans := &tool.BrowserAnswer{}
	var err error
	switch req.Action {
	case tool.BrowserOpen:
		err = chromedp.Do(c, chromedp.Navigate(req.URL))
	case tool.BrowserClick, tool.BrowserType:
		if !s.present(c, req.Selector) {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			// Not "no element": there is no page any more.
			if lost := s.lost(); lost != nil {
				return nil, lost
			}
			ans.Error = fmt.Sprintf("%s: no element matches selector %q", req.Action, req.Selector)
			return ans, nil
		}
		if req.Action == tool.BrowserClick {
			settled := s.watchNavigation(c)
			if err = chromedp.Do(c, chromedp.Click(chromedp.CSS(req.Selector), chromedp.NodeVisible)); err == nil {
				settled()
			}
		} else {
			err = chromedp.Do(c, chromedp.SendKeys(chromedp.CSS(req.Selector), req.Text, chromedp.NodeVisible))
		}
	case tool.BrowserPress:
		k, ok := keyOf(req.Key)
		if !ok {
			ans.Error = fmt.Sprintf("arguments.key: unknown key %q (a single character, or one of %s)", req.Key, strings.Join(keyNames(), ", "))
			return ans, nil
		}
		settled := s.watchNavigation(c)
		if err = chromedp.Do(c, chromedp.KeyEvent(k)); err == nil {
			settled()
		}
	case tool.BrowserBack:
		err = chromedp.Do(c, chromedp.NavigateBack())
	case tool.BrowserRead:
		err = s.read(c, req.Selector, ans)
	case tool.BrowserScreenshot:
		if ans.Error = screenshotRefusal(c, red); ans.Error != "" {
			// A page that could not be checked may be a dead browser.
			if lost := s.lost(); lost != nil {
				return nil, lost
			}
			return ans, nil
		}
		ans.PNG, err = chromedp.Run(c, chromedp.CaptureScreenshot())
	case tool.BrowserLogin:
		if err = s.login(ctx, c, req, ans); err == nil && ans.Error != "" {
			return ans, nil
		}
	default:
		ans.Error = fmt.Sprintf("arguments.action: unknown action %q", req.Action)
		return ans, nil
	}
	// A navigation the rule stopped is the answer, not the error it made
	// (net::ERR_BLOCKED_BY_CLIENT).
	ans.Blocked = s.gate.end()
	blocked = func() *tool.BrowserBlocked { return nil }
	if err != nil && ans.Blocked == nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if lost := s.lost(); lost != nil {
			return nil, lost
		}
		ans.Error = fmt.Sprintf("%s: %v%s", req.Action, err, s.memoryNote())
		return ans, nil
	}
	// Where the page is now, whatever the action did.
	ans.URL, _ = chromedp.Run(c, chromedp.Location())
	ans.Title, _ = chromedp.Run(c, chromedp.Title())
	s.page = ans.URL
	if err := s.keepState(ctx, c); err != nil {
		if lost := s.lost(); lost != nil {
			return nil, lost
		}
		return nil, err
	}
	return ans, nil
}

// navigationStartWait is how long a click or a key press is watched for a
// navigation it makes the page start (a link, a form's submission); one
// that starts is waited for until its frame stops loading, so the next
// action reads the new page, not the one it leaves.
const navigationStartWait = 300 * time.Millisecond

// watchNavigation watches the main frame of the page for a navigation
// from now on, and returns the wait for the one the action started, if
// any: until the frame stops loading, a navigation the rule refused ends,
// or c ends (the action's timeout). A page that cannot be watched is not
// waited for.
func (s *Session) watchNavigation(c context.Context) func() {
	tree, err := chromedp.Run(c, func(ctx context.Context, t *chromedp.Target) (page.GetFrameTreeResult, error) {
		return cdp.Call(ctx, t, page.GetFrameTree, cdp.Empty{})
	})
	if err != nil || tree.FrameTree == nil || tree.FrameTree.Frame == nil {
		return func() {}
	}
	main := tree.FrameTree.Frame.ID
	started, stopped := make(chan struct{}, 1), make(chan struct{}, 1)
	signal := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	if chromedp.Listen(c, func(ev any) {
		switch e := ev.(type) {
		case *page.EventFrameRequestedNavigation:
			if e.FrameID == main {
				signal(started)
			}
		case *page.EventFrameStartedLoading:
			if e.FrameID == main {
				signal(started)
			}
		case *page.EventFrameStoppedLoading:
			if e.FrameID == main {
				signal(stopped)
			}
		}
	}) != nil {
		return func() {}
	}
	return func() {
		// A round trip through the page's own task queue first: a
		// navigation the action queued there (a form submitted by a key
		// press is a task of its own) has then been requested, and its
		// event read, before the evaluation's reply. On a loaded machine
		// that can take longer than navigationStartWait. A page that
		// navigates meanwhile fails the evaluation: the events say so.
		_, _ = chromedp.Run(c, chromedp.Evaluate[bool](`new Promise((r) => setTimeout(() => r(true), 0))`, chromedp.EvalAwaitPromise))
		t := time.NewTimer(navigationStartWait)
		defer t.Stop()
		select {
		case <-started:
		case <-t.C:
			return // the action moved nothing
		case <-c.Done():
			return
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopped:
				return
			case <-c.Done():
				return
			case <-tick.C:
				if s.gate.refused() {
					return // answered 204: the page stays where it was
				}
			}
		}
	}
}

// elementWait is how long click and type wait for their element to appear
// (a page still building itself) before saying it is not there.
const elementWait = 5 * time.Second

// present reports whether an element matches sel, waiting up to
// elementWait for one to appear.
// An evaluation that fails (a page replaced meanwhile destroys the
// context it ran in) is tried again until then.
func (s *Session) present(c context.Context, sel string) bool {
	expr := fmt.Sprintf("document.querySelector(%s) !== null", jsString(sel))
	deadline := time.Now().Add(elementWait)
	for {
		found, err := chromedp.Run(c, chromedp.Evaluate[bool](expr))
		if err == nil && found {
			return true
		}
		if c.Err() != nil || time.Now().After(deadline) {
			return false
		}
		select {
		case <-c.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lost reports the browser's death as an error (and forgets it, so the
// next action starts it again), nil while it runs. Its DevTools pipe
// breaks the moment its main process dies (killed alone, by a crash or the
// kernel's OOM killer), before its sandbox is reaped: the process's Done
// waits for the rest of the browser's processes to go and its output to
// drain. A broken pipe is its death all the same, not an error of the
// action ("lost the connection to the browser: EOF") that leaves a dead
// browser in place; its sandbox is reaped first, so that its output and
// whether the memory bound stopped it are known.
func (s *Session) lost() error {
	select {
	case <-s.proc.Done():
	default:
		if !s.connectionLost() {
			return nil
		}
		s.proc.Stop(stopGrace) // stopLocked's Stop then finds it reaped
	}
	stderr, why := s.proc.Stderr(), s.memoryNote()
	s.stopLocked()
	return fmt.Errorf("the browser stopped%s%s", why, tail(stderr))
}

// readScript returns the text of the page (or of the first element matching
// the selector, its only argument) and its links, as JSON.
const readScript = `(function(sel, maxLinks){
  const root = sel ? document.querySelector(sel) : document.body;
  if (!root) return {missing: true};
  const links = [];
  for (const a of root.querySelectorAll('a[href]')) {
    if (links.length >= maxLinks) break;
    links.push({text: (a.innerText || '').trim().slice(0, 200), href: a.href});
  }
  return {text: root.innerText || '', links: links};
})`

type readResult struct {
	Missing bool               `json:"missing"`
	Text    string             `json:"text"`
	Links   []tool.BrowserLink `json:"links"`
}

func (s *Session) read(c context.Context, sel string, ans *tool.BrowserAnswer) error {
	expr := fmt.Sprintf("%s(%s, %d)", readScript, jsString(sel), DefaultMaxLinks)
	r, err := chromedp.Run(c, chromedp.Evaluate[readResult](expr))
	if sel != "" && (err != nil || r.Missing) && s.present(c, sel) {
		// A page still building itself, or still loading after the
		// action before (a press of Enter that submits a form): the
		// element is waited for as click and type wait for theirs.
		r, err = chromedp.Run(c, chromedp.Evaluate[readResult](expr))
	}
	if err != nil {
		return err
	}
	if r.Missing {
		ans.Error = fmt.Sprintf("read: no element matches selector %q", sel)
		return nil
	}
	text := strings.TrimSpace(r.Text)
	if len(text) > s.cfg.ReadBudget {
		cut := s.cfg.ReadBudget
		for cut > 0 && !isRuneStart(text[cut]) {
			cut--
		}
		text, ans.Truncated = text[:cut], true
	}
	ans.Text, ans.Links = text, r.Links
	return nil
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// jsString is s as a JavaScript string literal ("" is null: no selector).
func jsString(s string) string {
	if s == "" {
		return "null"
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var keys = map[string]string{
	"Enter": kb.Enter, "Tab": kb.Tab, "Escape": kb.Escape, "Backspace": kb.Backspace, "Delete": kb.Delete,
	"ArrowUp": kb.ArrowUp, "ArrowDown": kb.ArrowDown, "ArrowLeft": kb.ArrowLeft, "ArrowRight": kb.ArrowRight,
	"Home": kb.Home, "End": kb.End, "PageUp": kb.PageUp, "PageDown": kb.PageDown, "Space": " ",
}

func keyOf(name string) (string, bool) {
	if k, ok := keys[name]; ok {
		return k, true
	}
	if r := []rune(name); len(r) == 1 {
		return name, true
	}
	return "", false
}

func keyNames() []string {
	return []string{"Enter", "Tab", "Escape", "Backspace", "Delete", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Home", "End", "PageUp", "PageDown", "Space"}
}

// Page is the address the browser is on ("" when it does not run): what a
// person asked to approve a click or a key press acts on.
func (s *Session) Page() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return ""
	}
	return s.page
}

// Close stops the browser, if it runs. The profile stays in the workspace.
func (s *Session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// stopLocked ends the connection and the program. s.mu is held.
func (s *Session) stopLocked() {
	if s.proc == nil {
		return
	}
	// Closing the pipe (cancelling the allocator) makes Chromium exit and
	// flush its cookies; Stop kills it if it does not.
	s.cancelTab()
	s.cancelAll()
	s.proc.Stop(stopGrace)
	s.proc, s.tab, s.cancelTab, s.cancelAll, s.state, s.page = nil, nil, nil, nil, nil, ""
}

var _ tool.BrowserDriver = (*Session)(nil)
