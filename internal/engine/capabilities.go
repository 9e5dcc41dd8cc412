package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/mcp"
	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Capabilities of a sub-agent (DESIGN.md principle 11, API.md
// "Containment"). A child holds at most what its parent holds: its tools,
// MCP servers, network hosts and ports, secrets, model endpoint and
// credential, and its limits are the intersection of what its spec asks
// for and what the parent's spec grants. What the child leaves unset it
// inherits from the parent; what it asks for beyond the parent is refused,
// item by item, never dropped or widened silently. The parent's spec is
// itself a child's narrowed spec for a grandchild, so the rule holds down
// the whole tree.
//
// These are pure functions of the two specs; childSpec applies them to all
// three forms of spawn_agent (agent, agent_spec, instructions).

// refusal is one capability a child asked for and its parent does not hold.
type refusal struct {
	item   string // "network 127.0.0.1:8443", "secret GITHUB_TOKEN"
	detail string // optional: what the parent has instead
}

// maxRefusalsListed bounds the message of a refused spawn: a spec listing
// thousands of hosts must not make a tool result of that size.
const maxRefusalsListed = 20

// wideningError is a spawn refused because its child asked for more than
// its parent holds. Its message names each refused item in the form of
// API.md ("child may not use network 127.0.0.1:8443: its parent may not").
type wideningError struct {
	refused []refusal
}

func (e *wideningError) Error() string {
	parts := make([]string, 0, min(len(e.refused), maxRefusalsListed)+1)
	for i, r := range e.refused {
		if i == maxRefusalsListed {
			parts = append(parts, fmt.Sprintf("and %d more refused", len(e.refused)-i))
			break
		}
		s := "child may not use " + r.item + ": its parent may not"
		if r.detail != "" {
			s += " (" + r.detail + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

type refusals []refusal

func (rs *refusals) add(item, detail string) {
	*rs = append(*rs, refusal{item: item, detail: detail})
}

// parentLimits are the values of a parent's limits that its spec may leave
// to the engine's defaults, as they apply to the parent.
type parentLimits struct {
	MaxParallelSubagents int
	MaxSubagentDepth     int
}

// narrowChild returns the spec a sub-agent may run with: asked, with what
// it left unset taken from parent, or a *wideningError naming everything
// asked beyond the parent. Neither argument is changed. Policies are not
// merged here (inheritPolicies adds the parent's), nor is the budget
// (childBudget gives a share of what the parent has left).
func narrowChild(parent, asked *lt.AgentSpec, pl parentLimits) (*lt.AgentSpec, error) {
	child, err := cloneSpec(asked)
	if err != nil {
		return nil, err
	}
	var rs refusals
	narrowModel(&parent.Model, &child.Model, "model", &rs)
	if m := child.Monitor; m != nil && m.Model != nil && (parent.Monitor == nil || parent.Monitor.Model == nil) {
		// A child may add a model monitor where its parent has none
		// (childMonitor), but only on the parent's own model grant: the
		// monitor's requests carry the tree's trajectory, so another
		// base_url would be a way out past the network allowlist, and
		// another key a credential the parent never held.
		narrowModel(&parent.Model, m.Model, "monitor model", &rs)
	}
	narrowTools(parent.Tools, child.Tools, &rs)
	narrowNetwork(parent.Environment, child.Environment, &rs)
	narrowSecrets(parent.Environment, child.Environment, &rs)
	narrowRunner(parent, child, &rs)
	narrowLimits(parent, child, pl, &rs)
	narrowPolicies(parent.Policies, child.Policies, child.Tools, &rs)
	if len(rs) > 0 {
		return nil, &wideningError{refused: rs}
	}
	return child, nil
}

// cloneSpec deep-copies a spec through its wire form, so narrowing never
// writes into the parent's or a configured agent's spec.
func cloneSpec(s *lt.AgentSpec) (*lt.AgentSpec, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("copy agent spec: %w", err)
	}
	var out lt.AgentSpec
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("copy agent spec: %w", err)
	}
	return &out, nil
}

// narrowModel: the model's requests (what: "model", or "monitor model")
// go where the parent's go, with the
// parent's credential, priced as the parent's (a cheaper price would spend
// the budget slower). The model's name, temperature and output limits may
// differ: they change what is asked, not where it goes or who pays.
func narrowModel(p, c *lt.ModelSpec, what string, rs *refusals) {
	if c.Provider == "" {
		c.Provider = p.Provider
	} else if c.Provider != p.Provider {
		rs.add(what+" provider "+c.Provider, "its parent's is "+p.Provider)
	}
	if c.BaseURL == "" {
		c.BaseURL = p.BaseURL
	} else if c.BaseURL != p.BaseURL {
		rs.add(what+" base_url "+c.BaseURL, "")
	}
	if c.APIKeyEnv == "" && c.APIKeySecret == "" {
		c.APIKeyEnv, c.APIKeySecret = p.APIKeyEnv, p.APIKeySecret
	} else {
		if c.APIKeyEnv != "" && c.APIKeyEnv != p.APIKeyEnv {
			rs.add(what+" api_key_env "+c.APIKeyEnv, "")
		}
		if c.APIKeySecret != "" && c.APIKeySecret != p.APIKeySecret {
			rs.add(what+" api_key_secret "+c.APIKeySecret, "")
		}
	}
	if len(c.Pricing) == 0 {
		c.Pricing = slices.Clone(p.Pricing)
	} else if !jsonEqual(c.Pricing, p.Pricing) {
		rs.add(what+" pricing", "a child is priced as its parent")
	}
	// Another model name must have a price when the parent's has one: a
	// model without a known price costs 0, and the budget's cost limit
	// would not bind the child at all.
	if c.Name == "" {
		c.Name = p.Name
	}
	if c.Name != p.Name {
		parent, _ := model.PricingFor(*p)
		child, _ := model.PricingFor(*c)
		if parent != nil && child == nil {
			rs.add(what+" "+c.Name, "it has no known price, so a cost limit would not bind it; the parent's pricing may name one")
		}
	}
}

// narrowTools checks each of the child's tools against the parent's entry
// of the same name and kind, and fills in what the child left to it.
func narrowTools(parent, child []lt.ToolSpec, rs *refusals) {
	for i := range child {
		c := &child[i]
		kind := toolKind(c)
		if _, isEngine := engineToolNamed(c.Name); kind == "builtin" && isEngine {
			// finish, checkpoint, sleep, waits, ask_human, spawn_agent:
			// run by the engine on the session itself, touching nothing
			// outside it (a grandchild spawned with spawn_agent is
			// narrowed in turn, and the depth limit bounds the tree).
			continue
		}
		label := toolLabel(kind, c.Name)
		j := slices.IndexFunc(parent, func(p lt.ToolSpec) bool { return p.Name == c.Name && toolKind(&p) == kind })
		if j < 0 {
			rs.add(label, "")
			continue
		}
		p := &parent[j]
		c.TimeoutSeconds = atMostTimeout(label, p.TimeoutSeconds, c.TimeoutSeconds, rs)
		if kind == "mcp" {
			narrowMCP(p, c, rs)
			continue
		}
		c.Effect = narrowEffect(label, p.Effect, c.Effect, rs)
		switch {
		case c.Affects == nil:
			c.Affects = slices.Clone(p.Affects)
		case !slices.Equal(c.Affects, p.Affects):
			// What an approval lists of a call is the parent's choice: a
			// child listing less would hide what a call affects.
			rs.add(label+" with other affects", "")
		}
		if kind == "function" {
			switch {
			case len(c.Parameters) == 0:
				c.Parameters = slices.Clone(p.Parameters)
			case !jsonEqual(c.Parameters, p.Parameters):
				rs.add(label+" with other parameters", "")
			}
		}
	}
}

func toolKind(t *lt.ToolSpec) string {
	switch t.Type {
	case "", "builtin":
		return "builtin"
	}
	return t.Type
}

func toolLabel(kind, name string) string {
	switch kind {
	case "mcp":
		return "MCP server " + name
	case "function":
		return "function tool " + name
	}
	return "tool " + name
}

// effectRank orders effect classes from the least to the most cautious:
// what a retry may do and whether a person is asked depends on it.
func effectRank(c lt.EffectClass) int {
	switch c {
	case lt.EffectRead:
		return 1
	case lt.EffectIdempotent:
		return 2
	case lt.EffectIrreversible:
		return 3
	}
	return 0
}

// narrowEffect returns the effect class override a child's tool gets: the
// parent's when the child sets none; the child's when it is at least as
// cautious. An unset parent override means the tool's own default, which
// for http_request depends on each call's method: then only irreversible
// is known to be at least as cautious.
func narrowEffect(label string, p, c lt.EffectClass, rs *refusals) lt.EffectClass {
	switch {
	case c == "":
		return p
	case c == p || c == lt.EffectIrreversible:
		return c
	case p != "" && effectRank(c) >= effectRank(p):
		return c
	}
	parent := string(p)
	if parent == "" {
		parent = "the tool's default"
	}
	rs.add(fmt.Sprintf("%s with effect %s", label, c), "its parent's is "+parent)
	return c
}

// atMostTimeout: a timeout the parent set may be shortened, never
// lengthened; one the parent left to the default is the child's to set.
func atMostTimeout(label string, p, c int, rs *refusals) int {
	switch {
	case p <= 0:
		return c
	case c == 0:
		return p
	case c > p:
		rs.add(fmt.Sprintf("%s with timeout_seconds %d", label, c), fmt.Sprintf("at most %d", p))
	}
	return c
}

// narrowMCP: a child may have only an MCP server its parent has, under the
// same name (policies name its tools "<server>__*") and with the same
// launch definition (command, args and env, or url and headers_secret), so
// a spawn can never start a process or reach a server the parent could
// not. Its tools are a subset of the parent's allowlist, its effect classes
// at least as cautious, and it trusts annotations only if the parent does.
func narrowMCP(p, c *lt.ToolSpec, rs *refusals) {
	label := toolLabel("mcp", c.Name)
	if c.Command != p.Command || !slices.Equal(c.Args, p.Args) || !maps.Equal(c.Env, p.Env) ||
		c.URL != p.URL || c.HeadersSecret != p.HeadersSecret {
		rs.add(label+" with another launch definition", "only its parent's command, args and env, or url and headers_secret")
		return
	}
	switch {
	case len(p.Tools) == 0:
	case len(c.Tools) == 0:
		c.Tools = slices.Clone(p.Tools)
	default:
		for _, name := range c.Tools {
			if !slices.Contains(p.Tools, name) {
				rs.add("MCP tool "+mcp.ToolName(c.Name, name), "")
			}
		}
	}
	if c.TrustAnnotations && !p.TrustAnnotations {
		rs.add(label+" with trust_annotations", "")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Effects)) {
		pc, ok := p.Effects[name]
		if !ok && !p.TrustAnnotations {
			pc = lt.EffectIrreversible // what an unnamed tool is to the parent
		}
		// !ok with trusted annotations: the parent's class is the server's
		// claim, unknown here, so only irreversible is surely as cautious.
		narrowEffect("MCP tool "+mcp.ToolName(c.Name, name), pc, c.Effects[name], rs)
	}
	for name, pc := range p.Effects {
		if _, ok := c.Effects[name]; ok || (len(c.Tools) > 0 && !slices.Contains(c.Tools, name)) {
			continue
		}
		if c.Effects == nil {
			c.Effects = map[string]lt.EffectClass{}
		}
		c.Effects[name] = pc
	}
}

// narrowPolicies: the parent's policies apply in the child anyway
// (inheritPolicies), and the most restrictive decides, so a child's own
// rule can loosen nothing — but one: an MCP tool that no policy names gets
// the default decision (ask, unless it only reads), and a child's rule
// naming it would take that default away. Such a rule is refused unless the
// parent names the same tools itself (then the parent's rule decides).
func narrowPolicies(parent, child []lt.Policy, tools []lt.ToolSpec, rs *refusals) {
	for i, p := range child {
		if p.Tool == "" || p.Tool == "*" {
			continue
		}
		j := slices.IndexFunc(tools, func(t lt.ToolSpec) bool {
			return t.Type == "mcp" && strings.HasPrefix(p.Tool, t.Name+mcp.Separator)
		})
		if j < 0 {
			continue
		}
		all := mcp.ToolName(tools[j].Name, "*")
		if slices.ContainsFunc(parent, func(q lt.Policy) bool { return q.Tool == p.Tool || q.Tool == all }) {
			continue
		}
		rs.add(fmt.Sprintf("policy %s on %s", policyName(p, i), p.Tool),
			"it would replace the default of asking before an MCP tool that is not read-only")
	}
}

// narrowNetwork: each host the child lists must be covered by the parent's
// list (egress.Policy.Covers), on ports the parent allows. Ports the child
// leaves out are the parent's. A parent without network gives none.
func narrowNetwork(pe, ce *lt.Environment, rs *refusals) {
	if ce == nil || ce.Network == nil || len(ce.Network.Allow) == 0 {
		return
	}
	var allow []string
	var ports []int
	if pe != nil && pe.Network != nil {
		allow, ports = pe.Network.Allow, pe.Network.Ports
	}
	if len(ports) == 0 {
		ports = egress.DefaultPorts
	}
	parent, err := egress.NewPolicy(allow)
	if err != nil || len(allow) == 0 {
		parent, ports = &egress.Policy{}, nil // covers nothing
	}
	cn := ce.Network
	if len(cn.Ports) == 0 {
		cn.Ports = slices.Clone(ports)
		if len(cn.Ports) == 0 {
			cn.Ports = slices.Clone(egress.DefaultPorts)
		}
	}
	for _, host := range cn.Allow {
		covered := parent.Covers(host)
		for _, port := range cn.Ports {
			if !covered || !slices.Contains(ports, port) {
				h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
				rs.add("network "+net.JoinHostPort(h, fmt.Sprint(port)), "")
			}
		}
	}
}

// narrowSecrets: a child names only vault secrets its parent names.
func narrowSecrets(pe, ce *lt.Environment, rs *refusals) {
	if ce == nil {
		return
	}
	var held []string
	if pe != nil {
		held = pe.Secrets
	}
	for _, name := range ce.Secrets {
		if !slices.Contains(held, name) {
			rs.add("secret "+name, "")
		}
	}
}

// narrowRunner: a child works in its root's workspace, which lives where
// its parent's environment does: it takes its parent's environment.runner,
// and asking for another one is refused.
func narrowRunner(p, c *lt.AgentSpec, rs *refusals) {
	var parent *lt.RunnerSelector
	if p.Environment != nil {
		parent = p.Environment.Runner
	}
	if c.Environment != nil && c.Environment.Runner != nil {
		if !sameRunner(parent, c.Environment.Runner) {
			rs.add("environment.runner "+c.Environment.Runner.String(), "it works in its parent's workspace, which lives elsewhere")
		}
		return
	}
	if parent != nil {
		if c.Environment == nil {
			c.Environment = &lt.Environment{}
		}
		c.Environment.Runner = &lt.RunnerSelector{Name: parent.Name, Labels: slices.Clone(parent.Labels)}
	}
}

func sameRunner(a, b *lt.RunnerSelector) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && slices.Equal(a.Labels, b.Labels)
}

// narrowLimits is the one place for the spec's numeric limits, each of
// which a child may lower but not raise: stop conditions, the tree's
// shape, and the environment's sizes. A sandbox limit added to
// lt.Environment (a disk quota, a memory cap) gets one atMost line here.
func narrowLimits(p, c *lt.AgentSpec, pl parentLimits, rs *refusals) {
	atMost(rs, "max_steps", p.MaxSteps, &c.MaxSteps)
	atMost(rs, "max_consecutive_tool_errors", p.MaxConsecutiveToolErrors, &c.MaxConsecutiveToolErrors)
	atMost(rs, "max_repeated_calls", p.MaxRepeatedCalls, &c.MaxRepeatedCalls)
	atMost(rs, "turn_timeout_seconds", p.TurnTimeoutSeconds, &c.TurnTimeoutSeconds)
	if c.Subagents == nil {
		c.Subagents = &lt.SubagentLimits{}
	}
	atMost(rs, "subagents.max_parallel", pl.MaxParallelSubagents, &c.Subagents.MaxParallel)
	atMost(rs, "subagents.max_depth", pl.MaxSubagentDepth, &c.Subagents.MaxDepth)
	narrowDisk(p, c, rs)
}

// narrowDisk: a child works in its root's workspace, so its quota is at
// most its parent's. A parent on the server's default (0) leaves nothing
// to compare a child's own number with here, so such a child takes the
// default too: asking for a number of its own is refused rather than
// trusted.
func narrowDisk(p, c *lt.AgentSpec, rs *refusals) {
	var parent int
	if p.Environment != nil {
		parent = p.Environment.DiskMB
	}
	if c.Environment == nil || c.Environment.DiskMB <= 0 {
		if parent > 0 {
			if c.Environment == nil {
				c.Environment = &lt.Environment{}
			}
			c.Environment.DiskMB = parent
		}
		return
	}
	ce := c.Environment
	if parent <= 0 {
		rs.add(fmt.Sprintf("environment.disk_mb %d", ce.DiskMB), "it has the server's default quota")
		return
	}
	atMost(rs, "environment.disk_mb", parent, &ce.DiskMB)
}

// atMost applies one limit: unset on the parent (0, the engine's
// default), the child's own; unset on the child, the parent's; set on
// both, the child's if it is not larger.
func atMost[T int | int64](rs *refusals, name string, p T, c *T) {
	switch {
	case p <= 0:
	case *c <= 0:
		*c = p
	case *c > p:
		rs.add(fmt.Sprintf("%s %d", name, *c), fmt.Sprintf("at most %d", p))
	}
}

// jsonEqual reports whether two JSON texts hold the same value (key order
// and spacing aside).
func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
