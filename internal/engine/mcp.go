package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/mcp"
	"github.com/longhaul-dev/longhaul/internal/policy"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// MCP servers (the agent's tools entries of type "mcp").
//
// What the model is offered is never a live listing: it is the latest
// mcp.tools_listed event of each server, so a session resumed after a crash
// offers exactly what the journal says it offered. A server is listed, and
// the listing journaled when it differs from the last one:
//   - before the first model call that needs it (no listing yet: "first");
//   - before the first model call of each turn ("turn");
//   - before the next model call after this runner (re)started the server
//     ("restart"): a new runner's first connection counts, so a session
//     resumed on another worker picks up a server that changed meanwhile,
//     but only between model calls, never inside one step's calls.
//
// Listing a stdio server starts its process, before any call of it was
// checked against policy; a server whose every tool a policy denies without
// condition is therefore never listed nor started (mcpServerDenied), and a
// sub-agent takes its first listing of a server from its parent's journal
// ("parent", parentMCPOffer): it starts the server only for a call that
// passed policy.
//
// A call is requested, started and completed like a built-in's (ledger row,
// idempotency key in the request's _meta), its tool the model-visible
// "<server>__<tool>" and the server's name in the events. A connection that
// broke mid-call (mcp.server_lost) leaves the outcome unknown: read and
// idempotent calls are retried with the same key, after the server restarts;
// an irreversible one stays started, so the recovery of a call whose outcome
// is unknown (recoverCall) puts it in doubt.

// mcpDefaultRule names the default policy of MCP tools in policy.decided
// events and approvals.
const mcpDefaultRule = "mcp_default"

// mcpTools is what a runner knows of its MCP servers' tools, derived from
// the journal, and when it last listed each server.
type mcpTools struct {
	listed map[string]*lt.MCPToolsListedData // server -> latest listing (the catalog's MCP part)
	// refreshed is the turn each server was last listed in by this
	// runner; gen the connection that listing came from.
	refreshed map[string]string
	gen       map[string]int
}

type mcpTool struct {
	server string
	lt.MCPTool
}

func newMCPTools() *mcpTools {
	return &mcpTools{
		listed: map[string]*lt.MCPToolsListedData{}, refreshed: map[string]string{}, gen: map[string]int{},
	}
}

// observe folds an mcp.tools_listed event in; it reports whether the tools
// changed.
func (m *mcpTools) observe(ev lt.Event) bool {
	if m == nil || ev.Type != lt.EventMCPToolsListed {
		return false
	}
	d, err := lt.DataAs[lt.MCPToolsListedData](ev)
	if err != nil {
		return false
	}
	m.listed[d.Server] = &d
	return true
}

// mcpSpecs returns the agent's MCP servers.
func mcpSpecs(spec *lt.AgentSpec) []lt.ToolSpec {
	var out []lt.ToolSpec
	for _, t := range spec.Tools {
		if t.Type == "mcp" {
			out = append(out, t)
		}
	}
	return out
}

// mcpServerOf is the MCP server of a call ("" for other tools), for the
// events of its calls.
func (r *runner) mcpServerOf(c *journal.Call) string {
	if c.Kind != lt.CallMCP || c.Server != "" {
		return c.Server
	}
	t, _ := r.tools.mcpTool(c.Tool)
	return t.server
}

// refreshMCPTools lists the MCP servers that are due (see the top of this
// file) and journals what changed. It reports whether the model may be
// called now: a server with no listing at all that cannot be listed ends
// the turn (sandbox_error), since the model would be offered less than the
// agent defines.
func (r *runner) refreshMCPTools(ctx context.Context) (bool, error) {
	specs := mcpSpecs(&r.spec)
	if len(specs) == 0 || r.env == nil || r.env.mcp == nil {
		return true, nil
	}
	turn := r.st.CurrentTurn()
	stepN := 0
	if r.st.Step != nil {
		stepN = r.st.Step.N
	}
	for i := range specs {
		s := &specs[i]
		if mcpServerDenied(r.spec.Policies, s.Name) {
			continue // never started: none of its tools could run
		}
		cur := r.mcp.listed[s.Name]
		reason := ""
		switch gen := r.env.mcp.Generation(s.Name); {
		case cur == nil:
			reason = "first"
		case cur.Reason == mcpReasonParent && gen == 0:
			// The parent's listing stands until a call of this
			// sub-agent starts the server (then "restart" lists it).
		case r.st.Step == nil && r.mcp.refreshed[s.Name] != turn.ID:
			reason = "turn"
		case gen != 0 && gen != r.mcp.gen[s.Name]:
			reason = "restart"
		}
		if reason == "" {
			continue
		}
		if reason == "first" && r.st.Session.ParentID != nil {
			offer, err := r.parentMCPOffer(ctx, s)
			if err != nil {
				return false, err
			}
			if offer != nil {
				r.mcp.refreshed[s.Name] = turn.ID
				if err := r.add(lt.EventMCPToolsListed, turn.ID, stepN, offer); err != nil {
					return false, err
				}
				continue
			}
		}
		l, err := r.env.mcp.List(ctx, s.Name)
		if nerr := r.journalMCPNetwork(turn.ID, stepN, s.Name); nerr != nil {
			return false, nerr
		}
		if err != nil {
			if ctx.Err() != nil {
				return false, context.Cause(ctx)
			}
			if cur == nil {
				return false, r.failTurn(lt.StopSandboxError, fmt.Sprintf("MCP server %s could not be listed: %v", s.Name, err))
			}
			// The journal's listing stands; calls to the server fail (and
			// are retried) on their own.
			r.e.log.Warn("list MCP server tools", "session", r.st.Session.ID, "server", s.Name, "err", err)
			r.mcp.refreshed[s.Name], r.mcp.gen[s.Name] = turn.ID, r.env.mcp.Generation(s.Name)
			continue
		}
		r.mcp.refreshed[s.Name], r.mcp.gen[s.Name] = turn.ID, l.Generation
		offer, err := mcp.Offer(s, l, reason)
		if err != nil {
			return false, err
		}
		if cur != nil && cur.SHA256 == offer.SHA256 {
			continue
		}
		if err := r.add(lt.EventMCPToolsListed, turn.ID, stepN, offer); err != nil {
			return false, err
		}
	}
	return true, nil
}

// mcpReasonParent is the reason of a sub-agent's listing taken from its
// parent's journal (mcp.tools_listed), made without starting the server.
const mcpReasonParent = "parent"

// parentMCPOffer derives a sub-agent's offer of one of its MCP servers
// from its parent's latest listing of it, so the sub-agent starts the
// server only for a call that passed its policies (the parent's included),
// never just to list it. A child's server is always one its parent has,
// with the same launch definition (narrowMCP). nil when the parent has
// none (the caller then lists the server).
func (r *runner) parentMCPOffer(ctx context.Context, s *lt.ToolSpec) (*lt.MCPToolsListedData, error) {
	parentID := *r.st.Session.ParentID
	listed, err := r.e.mcpListingsOf(ctx, parentID)
	if err != nil {
		return nil, fmt.Errorf("read the MCP listings of parent %s: %w", parentID, err)
	}
	last := listed[s.Name]
	if last == nil {
		return nil, nil
	}
	return mcp.Reoffer(s, last, mcpReasonParent)
}

// mcpServerDenied reports whether a policy without a condition denies
// every tool of an MCP server ("*", or "<server>__*"). Listing a stdio
// server means starting its command, so such a server is never listed,
// started or dialled: an agent (or a sub-agent, which inherits the rule)
// denied everything runs no process of its MCP servers at all.
func mcpServerDenied(policies []lt.Policy, server string) bool {
	for _, p := range policies {
		if p.Decision == lt.PolicyDeny && p.When == "" && (p.Tool == "" || p.Tool == "*" || p.Tool == mcp.ToolName(server, "*")) {
			return true
		}
	}
	return false
}

// journalMCPNetwork records the connection decisions made while listing a
// server (outside any call).
func (r *runner) journalMCPNetwork(turnID string, step int, server string) error {
	for _, ev := range r.env.drain() {
		if err := r.add(lt.EventNetworkConnection, turnID, step, lt.NetworkConnectionData{
			Step: step, Index: -1, Tool: server,
			Via: ev.Via, Host: ev.Host, Port: ev.Port, Address: ev.Address, Allowed: ev.Allowed, Reason: ev.Reason,
		}); err != nil {
			return err
		}
	}
	return nil
}

// runMCP runs a call of an MCP tool: the effect goes in the ledger (durably,
// unless the tool only reads), the server gets the call with its
// idempotency key, and the outcome is recorded by the effect rules.
func (r *runner) runMCP(ctx context.Context, c *journal.Call) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	sid := r.st.Session.ID
	eff, key := effectID(c, sid, turnID, step), idempotencyKey(sid, turnID, step, c.Index)
	t, ok := r.tools.mcpTool(c.Tool)
	if !ok {
		// Its server's listing changed since the call was requested.
		return r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{
			Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool,
			Error: fmt.Sprintf("tool %s is no longer offered by its MCP server", c.Tool),
		})
	}
	if err := tool.ValidateArguments(t.InputSchema, c.Arguments); err != nil {
		// Arguments a person edited when approving are checked here,
		// against the schema the server listed.
		return r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{
			Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Server: t.server, Error: err.Error(),
		})
	}
	events, blobs := len(r.b.events), len(r.b.blobs)
	if err := r.add(lt.EventToolStarted, turnID, step, lt.ToolStartedData{
		Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Server: t.server, EffectID: eff, IdempotencyKey: key,
		Class: c.Class, Attempt: c.Attempts + 1,
	}); err != nil {
		return err
	}
	if c.Class != lt.EffectRead {
		// The ledger must hold the effect before the server can see it.
		if started, err := r.startDurably(ctx, events, blobs); !started || err != nil {
			return err
		}
	}
	if r.env == nil || r.env.mcp == nil {
		return fmt.Errorf("call %s: the session's MCP servers are not set up", c.ID)
	}
	// The turn's timeout and the wall-clock budget interrupt the call
	// (callContext) rather than shorten its timeout: an irreversible call
	// cut by them is in doubt, not failed.
	start := r.e.clock.Now()
	callCtx, release := r.callContext(ctx, true)
	res := r.env.mcp.Call(callCtx, &mcp.CallRequest{
		Server: t.server, Tool: t.Tool, Arguments: c.Arguments, IdempotencyKey: key, Timeout: r.tools.timeout(c.Tool),
	})
	release()
	if ctx.Err() != nil {
		// Lease lost or hard stop: the ledger says started; whoever
		// resumes decides by the effect class.
		return context.Cause(ctx)
	}
	dur := r.e.clock.Now().Sub(start).Milliseconds()
	if err := r.journalNetwork(c); err != nil {
		return err
	}
	if cause := interruption(ctx, callCtx); cause != nil && res.Unknown {
		// The request was sent and abandoned (notifications/cancelled):
		// its outcome is the interruption's to record. Cut before
		// anything was sent, it simply failed (below).
		return r.toolInterrupted(ctx, c, cause, &tool.Result{Error: res.Error}, nil, dur)
	}
	if res.Unknown {
		if err := r.add(lt.EventMCPServerLost, turnID, step, lt.MCPServerLostData{
			Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Server: t.server, Error: res.Lost,
		}); err != nil {
			return err
		}
		if c.Class == lt.EffectIrreversible {
			// Never re-run blindly: the call stays started, and the next
			// tick settles it as a call whose outcome is unknown (its
			// in_doubt action).
			return nil
		}
	}
	if res.Error != "" {
		return r.toolFailed(ctx, c, eff, &tool.Result{Error: res.Error, Transient: res.Transient}, nil, dur)
	}
	out, err := json.Marshal(res.Output)
	if err != nil {
		return fmt.Errorf("encode %s output: %w", c.Tool, err)
	}
	return r.add(lt.EventToolCompleted, turnID, step, lt.ToolCompletedData{
		Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Server: t.server, EffectID: eff, Output: out, DurationMS: dur,
	})
}

// mcpDefault is the decision for an MCP tool that no policy names: ask,
// unless the tool only reads (by the agent's effects, or by annotations the
// agent trusts). Other tools have none.
func (r *runner) mcpDefault(c *journal.Call) (policy.Verdict, bool) {
	if c.Kind != lt.CallMCP || c.Class == lt.EffectRead || r.policies.Names(c.Tool) {
		return policy.Verdict{}, false
	}
	return policy.Verdict{
		Decision: lt.PolicyAsk, Rule: mcpDefaultRule,
		Reason: fmt.Sprintf("%s is a tool of an MCP server that is not known to be read-only (effect %s), and no policy names it", c.Tool, c.Class),
	}, true
}

// newMCPManager sets up the clients of the agent's MCP servers for this
// runner: stdio servers start in the session's Environment, HTTP servers are dialled through the session's
// network policy with the entry's vault secret.
func (r *runner) newMCPManager(ctx context.Context, env *sessionEnv) (*mcp.Manager, error) {
	specs := mcpSpecs(&r.spec)
	if len(specs) == 0 {
		return nil, nil
	}
	servers := make([]mcp.Server, 0, len(specs))
	for _, s := range specs {
		var d mcp.Dialer
		if s.Command != "" {
			d = &mcp.Stdio{
				Start: func(ctx context.Context, req *sandbox.StartRequest) (environment.Process, error) {
					return env.env.Start(ctx, req)
				},
				Command: mcp.CommandLine(s.Command, s.Args), Program: s.Command, Env: s.Env,
			}
		} else {
			h := &mcp.HTTP{URL: s.URL}
			if p := env.policy; p != nil {
				h.Network = func(ctx context.Context, network, host string, port int) (net.Conn, error) {
					conn, ev, err := p.Dial(ctx, network, host, port)
					ev.Via = "mcp"
					env.observe(tool.NetworkEvent(ev))
					return conn, err
				}
			}
			if s.HeadersSecret != "" {
				if r.e.cfg.Vault == nil {
					return nil, fmt.Errorf("MCP server %s: headers_secret: this server has no vault", s.Name)
				}
				src, err := r.e.cfg.Vault.Source(ctx, r.project, []string{s.HeadersSecret})
				if err != nil {
					return nil, fmt.Errorf("MCP server %s: headers_secret: %w", s.Name, err)
				}
				h.Headers = src.ForHost
			}
			d = h
		}
		servers = append(servers, mcp.Server{Name: s.Name, Dialer: d})
	}
	return mcp.NewManager(servers, &mcp.Config{After: r.e.clock.After, Logger: r.e.log.With("session", r.st.Session.ID)})
}

// mcpOnlyField names the first field of t that only an MCP server's entry
// may set, or "".
func mcpOnlyField(t *lt.ToolSpec) string {
	switch {
	case t.Command != "":
		return "command"
	case len(t.Args) > 0:
		return "args"
	case len(t.Env) > 0:
		return "env"
	case t.URL != "":
		return "url"
	case t.HeadersSecret != "":
		return "headers_secret"
	case len(t.Tools) > 0:
		return "tools"
	case len(t.Effects) > 0:
		return "effects"
	case t.TrustAnnotations:
		return "trust_annotations"
	}
	return ""
}

// validateMCP checks an MCP server's tools entry; errors name the field
// under f ("agent_spec.tools[2]").
func (e *Engine) validateMCP(ctx context.Context, project string, t *lt.ToolSpec, f string) error {
	if ok, why := mcp.ValidServerName(t.Name); !ok {
		return apierror.Invalid(f+".name", "%s", why)
	}
	switch {
	case t.Effect != "":
		return apierror.Invalid(f+".effect", `an MCP server's tools are classified one by one: use "effects" ({"tool": "read"}) or "trust_annotations"`)
	case len(t.Parameters) > 0:
		return apierror.Invalid(f+".parameters", "an MCP server's tools have the input schemas it lists")
	case t.Description != "":
		return apierror.Invalid(f+".description", "an MCP server's tools have the descriptions it lists")
	case len(t.Affects) > 0:
		return apierror.Invalid(f+".affects", "not supported for MCP servers")
	case t.Command == "" && t.URL == "":
		return apierror.Invalid(f+".command", `required: a stdio server's "command", or a streamable HTTP server's "url"`)
	case t.Command != "" && t.URL != "":
		return apierror.Invalid(f+".url", `give "command" (stdio) or "url" (streamable HTTP), not both`)
	}
	if t.Command != "" {
		if t.HeadersSecret != "" {
			return apierror.Invalid(f+".headers_secret", "applies only to a streamable HTTP server (url)")
		}
		for i, a := range append([]string{t.Command}, t.Args...) {
			if strings.IndexByte(a, 0) >= 0 {
				field := f + ".command"
				if i > 0 {
					field = fmt.Sprintf("%s.args[%d]", f, i-1)
				}
				return apierror.Invalid(field, "must not contain a NUL byte")
			}
		}
		for k, v := range t.Env {
			if !envName.MatchString(k) {
				return apierror.Invalid(f+".env", "%q is not an environment variable's name", k)
			}
			if strings.IndexByte(v, 0) >= 0 {
				return apierror.Invalid(f+".env."+k, "must not contain a NUL byte")
			}
		}
	} else {
		if len(t.Args) > 0 || len(t.Env) > 0 {
			field := "args"
			if len(t.Args) == 0 {
				field = "env"
			}
			return apierror.Invalid(f+"."+field, "applies only to a stdio server (command)")
		}
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return apierror.Invalid(f+".url", "must be an http or https URL with a host (and no user info)")
		}
		if name := t.HeadersSecret; name != "" {
			hf := f + ".headers_secret"
			if !secretName.MatchString(name) {
				return apierror.Invalid(hf, "must be a secret's name (%s)", secretName)
			}
			if e.cfg.Vault == nil {
				return apierror.Invalid(hf, "this server has no vault")
			}
			if err := e.cfg.Vault.Require(ctx, project, []string{name}); err != nil {
				var unknown interface{ UnknownSecret() string }
				if errors.As(err, &unknown) {
					return apierror.Invalid(hf, "%v", err)
				}
				return err
			}
		}
	}
	seen := map[string]bool{}
	for i, name := range t.Tools {
		switch {
		case name == "":
			return apierror.Invalid(fmt.Sprintf("%s.tools[%d]", f, i), "must not be empty")
		case seen[name]:
			return apierror.Invalid(fmt.Sprintf("%s.tools[%d]", f, i), "duplicate tool %q", name)
		}
		seen[name] = true
	}
	names := make([]string, 0, len(t.Effects))
	for name := range t.Effects {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := t.Effects[name]
		switch {
		case !c.Valid():
			return apierror.Invalid(f+".effects."+name, "must be read, idempotent or irreversible")
		case len(t.Tools) > 0 && !seen[name]:
			return apierror.Invalid(f+".effects."+name, "names a tool that is not in tools (the allowlist)")
		}
	}
	return nil
}

// mcpNameClash refuses another tool whose name falls in an MCP server's
// namespace ("<server>__..."): the model could not tell them apart.
func mcpNameClash(tools []lt.ToolSpec, prefix string) error {
	for _, s := range tools {
		if s.Type != "mcp" {
			continue
		}
		for i, t := range tools {
			if t.Type != "mcp" && strings.HasPrefix(t.Name, s.Name+mcp.Separator) {
				return apierror.Invalid(fmt.Sprintf("%s.tools[%d].name", prefix, i), "%q is in the namespace of MCP server %s (%s__*)", t.Name, s.Name, s.Name)
			}
		}
	}
	return nil
}
