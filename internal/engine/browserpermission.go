package engine

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Site permission of the browser tool (issue 21; API.md "Browser actions"):
// which sites the browser may load is the application's decision, never the
// model's nor the browser tool's.
//
//   - A site (scheme, host and port) outside environment.network.allow is
//     refused at once, nobody asked.
//   - The first request for any other site raises a browser_permission
//     action with an unguessable request_id ("brq_…"), the origin and the
//     purpose the model gave; the session parks on it like on an approval
//     (no worker, no goroutine). The decision names the request_id it
//     answers (another is a 409). allow with scope session grants the site
//     for the rest of the session (journal.State.BrowserSites, rebuilt from
//     the journal like everything else); scope once grants it to this one
//     call (journal.Call.BrowserOnce), which then runs (again); deny fails
//     the call with the person's reason.
//   - An open is checked before it runs (checkBrowserSite); a redirect or a
//     script that moves the page during a call is stopped in the browser
//     (internal/browser's Fetch interception) and reported as the answer's
//     Blocked: for a read call (open) it raises its own action and the
//     call runs again once allowed (askBlockedSite); for any other the
//     model is told, and opens the site itself if it needs it.
//   - Subresources follow environment.browser.subresources (siteRule).

// browserRequestPrefix prefixes a browser_permission action's request id.
const browserRequestPrefix = "brq_"

// validateBrowserSpec checks environment.browser.
func validateBrowserSpec(b *lt.BrowserSpec, prefix string) error {
	if b == nil {
		return nil
	}
	switch b.Subresources {
	case "", lt.SubresourcesSameOrigin, lt.SubresourcesAllowedHosts:
		return nil
	}
	return apierror.Invalid(prefix+".subresources", "must be %s or %s, got %q", lt.SubresourcesSameOrigin, lt.SubresourcesAllowedHosts, b.Subresources)
}

// siteRule is the session's tool.BrowserSites for one call.
type siteRule struct {
	// allow is environment.network.allow as a policy (nil: nothing
	// listed, no site allowed).
	allow *egress.Policy
	// granted are the sites a person allowed for the session; once those
	// allowed for this call only.
	granted, once []string
	// anyAllowedHost: subresources from any site of the allowlist
	// (environment.browser.subresources allowed_hosts).
	anyAllowedHost bool
}

// Navigate implements tool.BrowserSites.
func (s *siteRule) Navigate(origin string) tool.SiteVerdict {
	if !s.listed(origin) {
		return tool.SiteRefused
	}
	if slices.Contains(s.granted, origin) || slices.Contains(s.once, origin) {
		return tool.SiteAllowed
	}
	return tool.SiteAsk
}

// Lasting implements tool.BrowserSites: the rule without this call's once
// grants, for what a page does after the call.
func (s *siteRule) Lasting() tool.BrowserSites {
	l := *s
	l.once = nil
	return &l
}

// Subresource implements tool.BrowserSites: by default only from the page's
// own site, so a page cannot pull a third party's script, nor carry what it
// read to another site in an image's address.
func (s *siteRule) Subresource(page, origin string) bool {
	if s.anyAllowedHost {
		return s.listed(origin)
	}
	return page != "" && origin == page
}

// listed reports whether origin's host and port are in the network
// allowlist, as the proxy would judge them before a lookup.
func (s *siteRule) listed(origin string) bool {
	if s.allow == nil {
		return false
	}
	_, hostport, ok := strings.Cut(origin, "://")
	if !ok {
		return false
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return false
	}
	return s.allow.Precheck(host, port) == nil
}

// siteRule is the rule the browser follows during call c.
func (r *runner) siteRule(c *journal.Call) *siteRule {
	rule := &siteRule{granted: slices.Clone(r.st.BrowserSites), once: slices.Clone(c.BrowserOnce)}
	if env := r.spec.Environment; env != nil {
		if n := env.Network; n != nil && len(n.Allow) > 0 {
			p, err := egress.NewPolicy(n.Allow)
			if err == nil {
				p, err = p.WithConfig(egress.Config{Ports: n.Ports})
			}
			if err == nil {
				rule.allow = p
			}
		}
		rule.anyAllowedHost = env.Browser != nil && env.Browser.Subresources == lt.SubresourcesAllowedHosts
	}
	return rule
}

// browserCall is what a browser call's arguments say about where it goes.
type browserCall struct {
	Action  string `json:"action"`
	URL     string `json:"url"`
	Purpose string `json:"purpose"`
}

// checkBrowserSite judges the site a browser open goes to before it runs:
// refused outside the allowlist, a browser_permission action when no
// person allowed it yet (the call waits), on its way when allowed. It
// reports whether the call may run now.
func (r *runner) checkBrowserSite(c *journal.Call) (bool, error) {
	if c.Tool != browserTool || c.Kind != lt.CallBuiltin {
		return true, nil
	}
	if r.env != nil && r.env.browser == (remoteBrowser{}) {
		return true, nil // refused by the tool: no person is asked for a site it cannot visit
	}
	var a browserCall
	// A login opens its page as an open does: the site is the person's
	// decision before the server fills a password into it.
	if json.Unmarshal(c.Arguments, &a) != nil || (a.Action != tool.BrowserOpen && a.Action != tool.BrowserLogin) {
		return true, nil // the tool names what is wrong with its arguments
	}
	origin, ok := tool.BrowserOrigin(a.URL)
	if !ok {
		return true, nil
	}
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	fail := func(msg string) error {
		return r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{
			Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, EffectID: c.EffectID, Error: msg,
		})
	}
	switch r.siteRule(c).Navigate(origin) {
	case tool.SiteAllowed:
		return true, nil
	case tool.SiteRefused:
		return false, fail(fmt.Sprintf("%s: refused: %s is not in this agent's network allowlist (environment.network.allow); no one can allow it from here", a.Action, origin))
	}
	if strings.TrimSpace(a.Purpose) == "" {
		return false, fail(fmt.Sprintf("arguments.purpose: is required to %s %s, a site no person has allowed in this session: say why you visit it (the person asked sees it)", a.Action, origin))
	}
	return false, r.askSite(c, origin, a.URL, a.Purpose, "")
}

// askSite raises the browser_permission action of call c for origin. from
// is the page that led there ("" for an open).
func (r *runner) askSite(c *journal.Call, origin, url, purpose, from string) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	sid := r.st.Session.ID
	evidence := []string{"Address the browser is to load: " + clip(url, 500)}
	if from != "" {
		evidence = append(evidence, "The browser was led there (a redirect, or the page moving itself) while the agent opened "+clip(from, 500))
	}
	if strings.TrimSpace(purpose) != "" {
		evidence = append(evidence, "The agent's stated purpose: "+clip(purpose, 500))
	} else {
		purpose = "(the agent gave none)"
	}
	if text := strings.TrimSpace(r.st.Step.Text); text != "" {
		evidence = append(evidence, "The agent's reasoning for this step: "+clip(text, 2000))
	}
	a := lt.Action{
		ID:        derivedID("act_", sid, turnID, step, c.Index, "browser_permission", origin),
		SessionID: sid, Type: lt.ActionBrowserPermission, Status: lt.ActionPending,
		TurnID: turnID, Step: step, CallID: c.ID, Tool: c.Tool, Arguments: c.Arguments, ArgumentsSHA256: c.ArgumentsSHA256,
		RequestID: browserRequestPrefix + strings.ToLower(rand.Text()),
		Origin:    origin,
		Purpose:   clip(purpose, 500),
		Summary:   fmt.Sprintf("Let the agent's browser visit %s: %s", origin, clip(purpose, 300)),
		Call:      journal.RawCall(c.Tool, c.Arguments),
		Affects:   []string{origin},
		Evidence:  evidence,
		Consequence: "The browser loads pages of " + origin + " through the session's egress proxy; " +
			"allow once for this call only, or for the rest of the session",
		CreatedAt: r.e.clock.Now(),
	}
	return r.add(lt.EventActionRequired, turnID, step, lt.ActionRequiredData{Action: a})
}

// gateBrowser gives browser call c's driver the session's site rule, and
// returns what tells, once the call ran, the navigation it stopped.
func (r *runner) gateBrowser(c *journal.Call, call *tool.Call) func() *tool.BrowserBlocked {
	if c.Tool != browserTool || c.Kind != lt.CallBuiltin || call.Browser == nil {
		return func() *tool.BrowserBlocked { return nil }
	}
	g := &gatedDriver{inner: call.Browser, sites: r.siteRule(c)}
	call.Browser = g
	return func() *tool.BrowserBlocked { return g.blocked }
}

// askBlockedSite raises the permission action of a read browser call (an
// open) whose navigation was led to a site no person allowed yet (a
// redirect): the call waits for it instead of ending, and runs again once
// allowed. It reports whether it did.
func (r *runner) askBlockedSite(c *journal.Call, blocked *tool.BrowserBlocked) (bool, error) {
	if blocked == nil || blocked.Verdict != tool.SiteAsk || c.Class != lt.EffectRead {
		return false, nil
	}
	var a browserCall
	_ = json.Unmarshal(c.Arguments, &a) // checked by the tool before it ran
	return true, r.askSite(c, blocked.Origin, blocked.URL, a.Purpose, a.URL)
}

// gatedDriver passes the session's site rule to the browser with every
// action, and keeps the navigation the action stopped.
type gatedDriver struct {
	inner   tool.BrowserDriver
	sites   tool.BrowserSites
	blocked *tool.BrowserBlocked
}

func (g *gatedDriver) Do(ctx context.Context, req *tool.BrowserRequest) (*tool.BrowserAnswer, error) {
	req.Sites = g.sites
	ans, err := g.inner.Do(ctx, req)
	if err == nil && ans != nil && ans.Blocked != nil {
		g.blocked = ans.Blocked
	}
	return ans, err
}

// browserPermissionDecision carries out a decision on a browser_permission
// action: matched by its request_id first, then allow (once or session: the
// call runs, journal.Apply records the grant) or deny (the call fails with
// the person's reason).
func browserPermissionDecision(b *batch, a *lt.Action, call *journal.Call, d *lt.Decision, resolved lt.ActionResolvedData) error {
	if d.RequestID == "" {
		return apierror.Invalid("request_id", "required: the request_id of the browser_permission action this decision answers (%s…)", browserRequestPrefix)
	}
	if d.RequestID != a.RequestID {
		return apierror.Conflict("request_id %s is not the request action %s asks about: a decision answers exactly one request", clip(d.RequestID, 80), a.ID)
	}
	if d.Arguments != nil || d.Answer != "" || len(d.Output) > 0 || d.Error != "" || d.Budget != nil || d.ArgumentsSHA256 != "" {
		return apierror.Invalid("decision", "a browser_permission action takes decision (allow or deny), request_id, and scope (allow) or reason (deny)")
	}
	switch d.Decision {
	case lt.DecisionAllow:
		if d.Scope != lt.ScopeOnce && d.Scope != lt.ScopeSession {
			return apierror.Invalid("scope", "required with allow: %s (this call only) or %s (the rest of the session)", lt.ScopeOnce, lt.ScopeSession)
		}
		if d.Reason != "" {
			return apierror.Invalid("reason", "goes only with decision %q", lt.DecisionDeny)
		}
		return b.add(lt.EventActionResolved, a.TurnID, a.Step, resolved)
	case lt.DecisionDeny:
		if d.Scope != "" {
			return apierror.Invalid("scope", "goes only with decision %q", lt.DecisionAllow)
		}
		if strings.TrimSpace(d.Reason) == "" {
			return apierror.Invalid("reason", "required with deny: it goes back to the agent as the tool's error")
		}
		if err := b.add(lt.EventActionResolved, a.TurnID, a.Step, resolved); err != nil {
			return err
		}
		return b.add(lt.EventToolFailed, a.TurnID, a.Step, lt.ToolFailedData{
			Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, EffectID: call.EffectID, Refused: lt.RefusedRejected,
			Error: fmt.Sprintf("a person denied the browser access to %s: %s", a.Origin, d.Reason),
		})
	case "":
		return apierror.Invalid("decision", "required: %s or %s", lt.DecisionAllow, lt.DecisionDeny)
	default:
		return apierror.Invalid("decision", "must be %s or %s", lt.DecisionAllow, lt.DecisionDeny)
	}
}
