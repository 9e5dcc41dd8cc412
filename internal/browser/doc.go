// Package browser runs a session's headless Chromium and drives it over the
// DevTools protocol (github.com/chromedp/chromedp): Session.Do runs the
// browser tool's actions (open, click, type, press, read, screenshot, back,
// close) and implements tool.BrowserDriver.
//
// Where the browser runs: in the session's sandbox, started by the caller's
// StartFunc (the engine's: Environment.Start, as MCP stdio servers are) on
// the first action and stopped by Close when the session parks or ends, or
// by the close action. It holds no more than the sandbox gives a shell
// command: the same mounts, user, seccomp filter and limits, but the
// address-space limit (sandbox.StartRequest.UnboundedAddressSpace: V8
// reserves terabytes of address space it never touches). Chromium's own
// sandbox needs user namespaces, which the session's sandbox refuses, so it
// runs with --no-sandbox: the session's sandbox is the boundary. Its /dev/shm
// is not used (--disable-dev-shm-usage: the sandbox's is small), its caches
// and settings go to the sandbox's /tmp, and its profile is in the workspace
// (Config.ProfileDir), so cookies are part of checkpoints; the stale
// profile lock a killed browser leaves is removed before each start, and
// its TMPDIR is /tmp (its singleton socket's path must fit a Unix
// socket's). Chromium writes its cookie store only now and then, and the
// browser stops whenever the session parks, so the state that must outlive
// it (the cookies and the page's address) is read over the protocol after
// each action and handed to Config.SaveState when it changed; a browser
// that starts gets it back from Config.LoadState (the engine keeps it in
// the profile directory) and reopens the page. A browser whose main
// process dies alone (a crash, the kernel's OOM killer) is noticed by its
// broken DevTools pipe, at once: the action it hits, or the next one,
// fails saying the browser stopped rather than with an error of the page,
// and the one after starts a browser again with that state.
//
// What it reaches: every request goes through Config.Proxy, the session's
// egress proxy as the sandbox sees it (--proxy-server, with loopback not
// bypassed), so environment.network.allow and the refusal of the server's
// own control plane hold for every request a page makes. A sandbox that
// confines nothing (the local backend) gives no proxy: the browser then
// reaches what the server reaches, as a shell command would.
//
// Logins (login.go): the login action fills a vault login secret's user
// name and password into a page's form over the protocol (Config.Login
// hands it over, only for a page on one of its hosts), checked on the page
// itself in the call that fills it: the page and the form's target on the
// secret's hosts, a form sent by POST, the password into a password field
// only. Every answer of Do is redacted of every vault value
// (Config.Redactor), the page's text, links, address, title and errors
// alike, and a screenshot is refused while the page shows a value. The
// profile keeps no history or session files (profile.go), where a page's
// address and title would otherwise be left in the workspace. This is
// where DESIGN's "secrets never enter the sandbox" bends, and it is said
// plainly: Chromium runs in the sandbox, so the typed password is in its
// memory and in the page, as when a person types it. Only the secret's
// hosts receive it (every other request of the page still goes through
// the egress proxy), and the model cannot read it back: outputs are
// redacted and no field's value is ever returned.
//
// Which sites it visits is not its decision (permission.go): every request
// a page makes is paused by the DevTools Fetch domain and judged by the
// action's tool.BrowserSites, the application's rule. A top-level
// navigation to a site the rule does not allow (a redirect, a link, a
// script) is stopped and reported in the answer (tool.BrowserAnswer.
// Blocked), for the engine to ask a person (browser_permission) or to
// refuse; a subresource the rule does not allow fails. A driver given no
// rule lets everything through to the proxy.
//
// Who may drive it: the DevTools protocol runs over a pipe
// (--remote-debugging-pipe): the browser reads commands on its fd 3 and
// writes answers on its fd 4, which the start command joins to the
// program's stdin and stdout, the pipes the server holds. There is no
// DevTools port at all: nothing in the sandbox but the browser itself,
// nothing in another session's sandbox and nothing on the network can
// connect to it, which a loopback listener (even one bridged by a hidden
// command) could not promise, since every process of the sandbox shares its
// loopback.
//
// It imports chromedp, internal/tool (the request and answer types) and
// internal/redact (answers are redacted of the vault's values). Who
// may import it: internal/engine and tests.
package browser
