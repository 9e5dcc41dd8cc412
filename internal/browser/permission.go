package browser

import (
	"context"
	"net/http"
	"net/url"
	"sync"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// Site permission: every request a page makes is paused by the DevTools
// Fetch domain and judged before it leaves the browser, so that a redirect,
// a link or a script cannot take the browser to a site the application did
// not allow (tool.BrowserSites decides; this package never does):
//
//   - a top-level navigation (the main frame's document: an open, a
//     redirect, a link, a script moving the page) goes on only to a site
//     Sites.Navigate allows; any other is stopped (failed when the action
//     itself navigates, else answered 204 so the page stays), and the first
//     one of the action is reported in its answer
//     (tool.BrowserAnswer.Blocked), for the engine to ask a person or to
//     refuse;
//   - a subresource (a script, an image, a style, a frame, a fetch) goes on
//     only when Sites.Subresource allows it for the page's site; any other
//     is failed without asking anyone;
//   - between actions (a page moving by itself, a timer), a navigation goes
//     on only within the page's own site; the page stays otherwise.
//
// The proxy stays the network's boundary (environment.network.allow);
// this is the person's boundary within it. The Fetch domain is enabled on
// the browser's own session, so that the requests of the browser's other
// targets are paused too, not only the tab's: a new tab's (a link with a
// target, a window.open: tested), and, as far as Chromium pauses them
// there, a worker's or a service worker's (not tested). Only the tab's
// main frame navigates; anything else is judged as a subresource of its
// page. WebSocket connections are not
// seen by the Fetch domain: they are held by the proxy alone.

// gate is the state the Fetch handler judges requests by. It has its own
// lock: the handler runs while an action holds Session.mu.
type gate struct {
	mu sync.Mutex
	// sites judges the current action's requests (nil between actions).
	sites tool.BrowserSites
	// last is the last action's rule, for subresources between actions
	// (nil until an action gave one: a driver used without one lets
	// everything through).
	last tool.BrowserSites
	// page is the site of the document the main frame last navigated to.
	page string
	// blocked is the action's first navigation refused.
	blocked *tool.BrowserBlocked
	// navigating: the action itself navigates (open, back) and waits for
	// the navigation's end, which a refusal must end too.
	navigating bool
}

// begin sets the rule of an action.
func (g *gate) begin(sites tool.BrowserSites, navigating bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sites, g.blocked, g.navigating = sites, nil, navigating
	if sites != nil {
		// Between actions the page keeps only what lasts past this one: a
		// site allowed once loads nothing more after its call.
		g.last = sites.Lasting()
	}
}

// end returns the action's first refused navigation and ends the action.
func (g *gate) end() *tool.BrowserBlocked {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.blocked
	g.sites, g.blocked, g.navigating = nil, nil, false
	return b
}

// refused reports whether the current action's navigation was refused.
func (g *gate) refused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blocked != nil
}

// started drops what the start of the browser blocked (a page it
// reopened, on a site no longer allowed: the start waits for that
// navigation's end, so it was begun as navigating): the action's own
// requests are what its answer reports, and navigating is the action's.
func (g *gate) started(navigating bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blocked, g.navigating = nil, navigating
}

// reset forgets the page's site: a browser that starts is on a blank page.
func (g *gate) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.page = ""
}

// verdict is what becomes of a paused request.
type verdict int

const (
	// proceed: the request goes on.
	proceed verdict = iota
	// fail: the request fails (net::ERR_BLOCKED_BY_CLIENT); a refused
	// navigation of an open or a back ends on Chromium's error page, and
	// the action's answer says why.
	fail
	// stay: a refused navigation the page started (a link, a script, a
	// form) is answered 204 No Content, which leaves the page where it
	// was, instead of an error page in its place.
	stay
)

// judge decides one paused request.
func (g *gate) judge(rawURL string, topLevel bool) verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sites == nil && g.last == nil {
		return proceed // no rule given: the network's boundary alone
	}
	refused := fail
	if topLevel && !g.navigating {
		refused = stay
	}
	origin, ok := tool.BrowserOrigin(rawURL)
	if !ok {
		if nonNetwork(rawURL) {
			return proceed
		}
		return refused
	}
	if !topLevel {
		rule := g.sites
		if rule == nil {
			rule = g.last
		}
		// The page's own site must be allowed now, not only when it was
		// opened: a page allowed once (an earlier call) may not go on
		// sending requests at a later click, or on a timer.
		if rule.Navigate(g.page) == tool.SiteAllowed && rule.Subresource(g.page, origin) {
			return proceed
		}
		return fail
	}
	if g.sites == nil {
		// Between actions: the page moves by itself only within its site,
		// and only while that site is allowed past the last action.
		if origin == g.page && g.last.Navigate(origin) == tool.SiteAllowed {
			return proceed
		}
		return stay
	}
	v := g.sites.Navigate(origin)
	if v == tool.SiteAllowed {
		g.page = origin
		return proceed
	}
	if g.blocked == nil {
		g.blocked = &tool.BrowserBlocked{Origin: origin, URL: rawURL, Verdict: v}
	}
	return refused
}

// nonNetwork reports whether a URL that is not http or https stays inside
// the browser (data:, blob:, about:): those go on; any other scheme fails.
func nonNetwork(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "data", "blob", "about":
		return true
	}
	return false
}

// intercept pauses every request of the tab and judges it until the tab
// ends. It runs in a goroutine of its own: chromedp's event loop must not
// run commands.
func (s *Session) intercept(tab context.Context) error {
	c := chromedp.FromContext(tab)
	if c == nil || c.Target == nil {
		return nil
	}
	mainFrame := cdp.FrameID(c.Target.TargetID)
	// On the browser's own session, not the tab's: the requests of the
	// browser's other targets (a new tab from a link with a target or a
	// window.open, which the tab's Fetch domain never sees) are paused
	// too. Only the tab's main frame navigates (top); anything else is
	// judged as a subresource of the tab's page.
	b := c.Browser
	events := chromedp.BrowserEvents(tab, fetch.RequestPaused)
	if _, err := cdp.Call(tab, b, fetch.Enable, fetch.EnableParams{}); err != nil {
		return err
	}
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			top := ev.ResourceType == network.ResourceTypeDocument && ev.FrameID == mainFrame
			u := ""
			if ev.Request != nil {
				u = ev.Request.URL
			}
			v := s.gate.judge(u, top)
			switch v {
			case proceed:
				_, err = cdp.Call(tab, b, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			case stay:
				_, err = cdp.Call(tab, b, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: http.StatusNoContent})
			default:
				_, err = cdp.Call(tab, b, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
			}
			if err != nil && tab.Err() != nil {
				return
			}
		}
	}()
	return nil
}
