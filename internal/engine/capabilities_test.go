package engine

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// capParent is a parent holding a little of everything a child may ask for.
func capParent() *lt.AgentSpec {
	return &lt.AgentSpec{
		Model: lt.ModelSpec{
			Provider: "openai", Name: "gpt-a", BaseURL: "https://llm.example.com/v1",
			APIKeySecret: "LLM_KEY", Pricing: json.RawMessage(`{"input_per_mtok":1,"output_per_mtok":2}`),
		},
		Tools: []lt.ToolSpec{
			{Name: "shell"},
			{Name: "http_request", Effect: lt.EffectIrreversible},
			{Name: "read_file", TimeoutSeconds: 30},
			{Name: "write_file", Affects: []string{"path"}},
			{Name: "spawn_agent"},
			{Name: "notify", Type: "function", Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}}}`)},
			{Name: "docs", Type: "mcp", Command: "docs-server", Args: []string{"--ro"}, Env: map[string]string{"MODE": "ro"},
				Tools: []string{"search", "fetch"}, Effects: map[string]lt.EffectClass{"search": lt.EffectRead}},
			{Name: "remote", Type: "mcp", URL: "https://mcp.example.com/mcp", HeadersSecret: "MCP_TOKEN", TrustAnnotations: true},
		},
		Environment: &lt.Environment{
			Network: &lt.NetworkSpec{Allow: []string{"api.example.com", "*.corp.example", "127.0.0.1"}, Ports: []int{443, 8443}},
			Secrets: []string{"GITHUB_TOKEN", "LLM_KEY"},
		},
		MaxSteps:           50,
		TurnTimeoutSeconds: 600,
		Subagents:          &lt.SubagentLimits{MaxParallel: 2},
	}
}

func capLimits() parentLimits { return parentLimits{MaxParallelSubagents: 2, MaxSubagentDepth: 3} }

// TestNarrowChildRefuses: each capability a child asks beyond its parent is
// refused, named in the API.md form; nothing is dropped or widened.
func TestNarrowChildRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		child func(c *lt.AgentSpec)
		want  []string // each a refused item's message
	}{
		{"a tool the parent lacks", func(c *lt.AgentSpec) { c.Tools = []lt.ToolSpec{{Name: "sqlite_query"}} },
			[]string{"child may not use tool sqlite_query: its parent may not"}},
		{"a built-in named as a function tool", func(c *lt.AgentSpec) { c.Tools = []lt.ToolSpec{{Name: "shell", Type: "function"}} },
			[]string{"child may not use function tool shell: its parent may not"}},
		{"a looser effect", func(c *lt.AgentSpec) { c.Tools = []lt.ToolSpec{{Name: "shell", Effect: lt.EffectRead}} },
			[]string{"child may not use tool shell with effect read: its parent may not (its parent's is the tool's default)"}},
		{"a looser effect than the parent's override", func(c *lt.AgentSpec) {
			c.Tools = []lt.ToolSpec{{Name: "http_request", Effect: lt.EffectIdempotent}}
		}, []string{"tool http_request with effect idempotent: its parent may not (its parent's is irreversible)"}},
		{"a longer timeout", func(c *lt.AgentSpec) { c.Tools = []lt.ToolSpec{{Name: "read_file", TimeoutSeconds: 60}} },
			[]string{"tool read_file with timeout_seconds 60: its parent may not (at most 30)"}},
		{"other affects", func(c *lt.AgentSpec) { c.Tools = []lt.ToolSpec{{Name: "write_file", Affects: []string{"content"}}} },
			[]string{"tool write_file with other affects"}},
		{"a function tool with other parameters", func(c *lt.AgentSpec) {
			c.Tools = []lt.ToolSpec{{Name: "notify", Type: "function", Parameters: json.RawMessage(`{"type":"object"}`)}}
		}, []string{"function tool notify with other parameters"}},
		{"an MCP server the parent lacks", func(c *lt.AgentSpec) {
			c.Tools = []lt.ToolSpec{{Name: "evil", Type: "mcp", Command: "sh", Args: []string{"-c", "touch /tmp/x"}}}
		}, []string{"child may not use MCP server evil: its parent may not"}},
		{"the parent's MCP server launched otherwise", func(c *lt.AgentSpec) {
			c.Tools = []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "sh", Args: []string{"-c", "curl http://127.0.0.1:9/"}}}
		}, []string{"MCP server docs with another launch definition"}},
		{"the parent's MCP server with other env", func(c *lt.AgentSpec) {
			c.Tools = []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "docs-server", Args: []string{"--ro"}, Env: map[string]string{"MODE": "rw"}}}
		}, []string{"MCP server docs with another launch definition"}},
		{"the parent's HTTP MCP server with another secret", func(c *lt.AgentSpec) {
			c.Tools = []lt.ToolSpec{{Name: "remote", Type: "mcp", URL: "https://mcp.example.com/mcp", HeadersSecret: "GITHUB_TOKEN"}}
		}, []string{"MCP server remote with another launch definition"}},
		{"an MCP tool outside the parent's allowlist, a looser class, trusted annotations", func(c *lt.AgentSpec) {
			c.Tools = []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "docs-server", Args: []string{"--ro"}, Env: map[string]string{"MODE": "ro"},
				Tools: []string{"search", "delete"}, Effects: map[string]lt.EffectClass{"delete": lt.EffectRead}, TrustAnnotations: true}}
		}, []string{
			"child may not use MCP tool docs__delete: its parent may not",
			"MCP server docs with trust_annotations",
			"MCP tool docs__delete with effect read: its parent may not (its parent's is irreversible)",
		}},
		{"a read class over a parent's trusted annotations", func(c *lt.AgentSpec) {
			c.Tools = []lt.ToolSpec{{Name: "remote", Type: "mcp", URL: "https://mcp.example.com/mcp", HeadersSecret: "MCP_TOKEN",
				Effects: map[string]lt.EffectClass{"x": lt.EffectRead}}}
		}, []string{"MCP tool remote__x with effect read"}},
		{"network the parent lacks", func(c *lt.AgentSpec) {
			c.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"evil.example.org", "api.example.com"}, Ports: []int{443}}}
		}, []string{"child may not use network evil.example.org:443: its parent may not"}},
		{"a port the parent lacks", func(c *lt.AgentSpec) {
			c.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{8443, 5432}}}
		}, []string{"child may not use network 127.0.0.1:5432: its parent may not"}},
		{"a wider wildcard", func(c *lt.AgentSpec) {
			c.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"*.example.com"}, Ports: []int{443}}}
		}, []string{"network *.example.com:443"}},
		{"an IPv6 literal", func(c *lt.AgentSpec) {
			c.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"[::1]"}, Ports: []int{443}}}
		}, []string{"network [::1]:443"}},
		{"a secret the parent lacks", func(c *lt.AgentSpec) { c.Environment = &lt.Environment{Secrets: []string{"GITHUB_TOKEN", "PROD_DB"}} },
			[]string{"child may not use secret PROD_DB: its parent may not"}},
		{"another provider", func(c *lt.AgentSpec) { c.Model.Provider = "anthropic" },
			[]string{"child may not use model provider anthropic: its parent may not (its parent's is openai)"}},
		{"another base_url", func(c *lt.AgentSpec) { c.Model.BaseURL = "http://127.0.0.1:9999/v1" },
			[]string{"child may not use model base_url http://127.0.0.1:9999/v1: its parent may not"}},
		{"another credential", func(c *lt.AgentSpec) { c.Model.APIKeyEnv = "LONGHAUL_API_KEYS" },
			[]string{"model api_key_env LONGHAUL_API_KEYS"}},
		{"another secret as credential", func(c *lt.AgentSpec) { c.Model.APIKeySecret = "GITHUB_TOKEN" },
			[]string{"model api_key_secret GITHUB_TOKEN"}},
		{"a cheaper price", func(c *lt.AgentSpec) { c.Model.Pricing = json.RawMessage(`{"input_per_mtok":0}`) },
			[]string{"model pricing"}},
		{"a rule taking away the MCP default", func(c *lt.AgentSpec) {
			c.Tools = []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "docs-server", Args: []string{"--ro"}, Env: map[string]string{"MODE": "ro"}}}
			c.Policies = []lt.Policy{{Name: "open", Tool: "docs__*", Decision: lt.PolicyAllow}, {Tool: "shell", Decision: lt.PolicyAllow}}
		}, []string{"child may not use policy open on docs__*: its parent may not (it would replace the default of asking before an MCP tool that is not read-only)"}},
		{"raised limits", func(c *lt.AgentSpec) {
			c.MaxSteps, c.TurnTimeoutSeconds = 500, 3600
			c.Subagents = &lt.SubagentLimits{MaxParallel: 10, MaxDepth: 9}
		}, []string{
			"max_steps 500: its parent may not (at most 50)",
			"turn_timeout_seconds 3600: its parent may not (at most 600)",
			"subagents.max_parallel 10: its parent may not (at most 2)",
			"subagents.max_depth 9: its parent may not (at most 3)",
		}},
		{"a disk quota over the server's default", func(c *lt.AgentSpec) { c.Environment = &lt.Environment{DiskMB: 1 << 20} },
			[]string{"child may not use environment.disk_mb 1048576: its parent may not (it has the server's default quota)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := capParent()
			child := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "openai"}}
			tc.child(child)
			asked, err := cloneSpec(child)
			require.NoError(t, err)
			_, err = narrowChild(parent, child, capLimits())
			var we *wideningError
			require.ErrorAs(t, err, &we)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.Len(t, we.refused, len(tc.want), "one refusal per item: %v", err)
			require.Equal(t, capParent(), parent, "the parent's spec is not changed")
			require.Equal(t, asked, child, "the asked spec is not changed")
		})
	}
}

// TestNarrowChildNoParentNetwork: a parent without network gives none, and
// the refusal lists each host and port asked for.
func TestNarrowChildNoParentNetwork(t *testing.T) {
	parent := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted"}, Tools: []lt.ToolSpec{{Name: "shell"}}}
	child := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted"}, Tools: []lt.ToolSpec{{Name: "shell"}},
		Environment: &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{8443}}}}
	_, err := narrowChild(parent, child, capLimits())
	require.EqualError(t, err, "child may not use network 127.0.0.1:8443: its parent may not")

	// Default ports when neither lists any: refused host by host.
	child.Environment.Network.Ports = nil
	_, err = narrowChild(parent, child, capLimits())
	require.EqualError(t, err, "child may not use network 127.0.0.1:80: its parent may not; child may not use network 127.0.0.1:443: its parent may not")
}

// TestNarrowChildInherits: what a child leaves unset is its parent's, and
// what it narrows stays narrow.
func TestNarrowChildInherits(t *testing.T) {
	parent := capParent()
	child := &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "openai", Name: "gpt-b"},
		Tools: []lt.ToolSpec{
			{Name: "shell", Effect: lt.EffectIrreversible},
			{Name: "http_request"},
			{Name: "read_file"},
			{Name: "write_file"},
			{Name: "notify", Type: "function"},
			{Name: "finish"}, // run by the engine on the session: no capability
			{Name: "docs", Type: "mcp", Command: "docs-server", Args: []string{"--ro"}, Env: map[string]string{"MODE": "ro"},
				Tools: []string{"search"}, Effects: map[string]lt.EffectClass{}},
			{Name: "remote", Type: "mcp", URL: "https://mcp.example.com/mcp", HeadersSecret: "MCP_TOKEN",
				Effects: map[string]lt.EffectClass{"x": lt.EffectIrreversible}},
		},
		Environment: &lt.Environment{
			Network: &lt.NetworkSpec{Allow: []string{"a.corp.example", "127.0.0.1"}},
			Secrets: []string{"GITHUB_TOKEN"},
		},
		MaxSteps:  20,
		Subagents: &lt.SubagentLimits{MaxDepth: 2},
	}
	got, err := narrowChild(parent, child, capLimits())
	require.NoError(t, err)

	require.Equal(t, lt.ModelSpec{
		Provider: "openai", Name: "gpt-b", BaseURL: "https://llm.example.com/v1", APIKeySecret: "LLM_KEY",
		Pricing: parent.Model.Pricing,
	}, got.Model, "the parent's endpoint, credential and price; the child's model name")
	require.Equal(t, lt.EffectIrreversible, got.Tools[1].Effect, "the parent's override of http_request")
	require.Equal(t, 30, got.Tools[2].TimeoutSeconds)
	require.Equal(t, []string{"path"}, got.Tools[3].Affects)
	require.JSONEq(t, string(parent.Tools[5].Parameters), string(got.Tools[4].Parameters))
	require.Equal(t, []string{"search"}, got.Tools[6].Tools)
	require.Equal(t, map[string]lt.EffectClass{"search": lt.EffectRead}, got.Tools[6].Effects, "the parent's classes of the tools it keeps")
	require.Equal(t, []int{443, 8443}, got.Environment.Network.Ports, "the parent's ports")
	require.Equal(t, []string{"GITHUB_TOKEN"}, got.Environment.Secrets)
	require.Equal(t, 20, got.MaxSteps, "lowered")
	require.Equal(t, int64(600), got.TurnTimeoutSeconds, "the parent's")
	require.Equal(t, &lt.SubagentLimits{MaxParallel: 2, MaxDepth: 2}, got.Subagents)

	// A rule on an MCP tool the parent names itself: the parent's decides.
	parent.Policies = []lt.Policy{{Tool: "docs__fetch", Decision: lt.PolicyAsk}}
	child.Policies = []lt.Policy{{Tool: "docs__search", Decision: lt.PolicyDeny, When: "size(args) > 3"}}
	_, err = narrowChild(parent, child, capLimits())
	require.EqualError(t, err, "child may not use policy policies[0] on docs__search: its parent may not (it would replace the default of asking before an MCP tool that is not read-only)")
	parent.Policies = []lt.Policy{{Tool: "docs__*", Decision: lt.PolicyAsk}}
	_, err = narrowChild(parent, child, capLimits())
	require.NoError(t, err)
	parent.Policies, child.Policies = nil, nil

	// An MCP server's allowlist the child leaves out is the parent's.
	child.Tools = []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "docs-server", Args: []string{"--ro"}, Env: map[string]string{"MODE": "ro"}}}
	got, err = narrowChild(parent, child, capLimits())
	require.NoError(t, err)
	require.Equal(t, []string{"search", "fetch"}, got.Tools[0].Tools)

	// A grandchild narrows against its narrowed parent.
	grand := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "openai"},
		Environment: &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"api.example.com"}}}}
	_, err = narrowChild(got, grand, capLimits())
	require.EqualError(t, err, "child may not use network api.example.com:443: its parent may not; child may not use network api.example.com:8443: its parent may not")
}

// TestNarrowChildSameAsParent: the instructions form (the parent's own
// spec) always passes, and gives the parent's spec back.
func TestNarrowChildSameAsParent(t *testing.T) {
	parent := capParent()
	got, err := narrowChild(parent, parent, capLimits())
	require.NoError(t, err)
	want := capParent()
	want.Subagents.MaxDepth = 3 // the parent's default made explicit
	require.Equal(t, want, got)
}

// TestWideningErrorIsBounded: a spec asking for thousands of things gets a
// message of bounded size that still says how many were refused.
func TestWideningErrorIsBounded(t *testing.T) {
	allow := make([]string, 100)
	for i := range allow {
		allow[i] = fmt.Sprintf("h%d.example.org", i)
	}
	_, err := narrowChild(&lt.AgentSpec{}, &lt.AgentSpec{Environment: &lt.Environment{Network: &lt.NetworkSpec{Allow: allow, Ports: []int{443}}}}, capLimits())
	require.ErrorContains(t, err, "and 80 more refused")
	require.Less(t, len(err.Error()), 2000)
}

// TestLowerLimits: a child spec's own budget is one more ask, merged with
// the call's by taking the lower of each limit.
func TestLowerLimits(t *testing.T) {
	call := &lt.Budget{MaxCostUSD: 2, MaxToolCalls: 10}
	own := &lt.Budget{MaxCostUSD: 5, MaxModelCalls: 3, MaxToolCalls: 4}
	require.Equal(t, &lt.Budget{MaxCostUSD: 2, MaxModelCalls: 3, MaxToolCalls: 4}, lowerLimits(call, own))
	require.Equal(t, own, lowerLimits(nil, own))
	require.Equal(t, call, lowerLimits(call, nil))
}

// TestInheritPoliciesOnMCPPatterns: a parent's rules on an MCP server's
// tools ("docs__*", "docs__delete") apply in a child that has the server;
// a rule on a tool the child lacks is left out (it would not compile).
func TestInheritPoliciesOnMCPPatterns(t *testing.T) {
	parent := []lt.Policy{
		{Tool: "docs__*", Decision: lt.PolicyAsk},
		{Tool: "docs__delete", Decision: lt.PolicyDeny},
		{Tool: "shell", Decision: lt.PolicyDeny},
		{Tool: "*", When: "usage.cost_usd > 1", Decision: lt.PolicyDeny},
	}
	got := inheritPolicies(nil, parent, []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "docs-server"}})
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"parent.policies[0]", "parent.policies[1]", "parent.policies[3]"}, names)
}

// TestInheritPoliciesKeepsOwnUnnamed: a child's own rule without a name
// stays without one next to its parent's, so the child's policies compile
// (a name "policies[0]" written for it would be refused, and the child
// would never run).
func TestInheritPoliciesKeepsOwnUnnamed(t *testing.T) {
	tools := []lt.ToolSpec{{Name: "write_file"}, {Name: "shell"}}
	parent := []lt.Policy{{Tool: "write_file", Decision: lt.PolicyAsk}}
	own := []lt.Policy{{Tool: "shell", Decision: lt.PolicyAsk}, {Name: "mine", Tool: "write_file", Decision: lt.PolicyDeny}}
	got := inheritPolicies(own, parent, tools)
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"parent.policies[0]", "", "mine"}, names)
	_, err := compilePolicies(&lt.AgentSpec{Tools: tools, Policies: got})
	require.NoError(t, err)
}

// TestMCPServerDenied: only a rule without a condition that denies every
// tool of the server keeps it from starting.
func TestMCPServerDenied(t *testing.T) {
	for _, tc := range []struct {
		p    lt.Policy
		want bool
	}{
		{lt.Policy{Tool: "*", Decision: lt.PolicyDeny}, true},
		{lt.Policy{Decision: lt.PolicyDeny}, true},
		{lt.Policy{Tool: "docs__*", Decision: lt.PolicyDeny}, true},
		{lt.Policy{Tool: "other__*", Decision: lt.PolicyDeny}, false},
		{lt.Policy{Tool: "docs__search", Decision: lt.PolicyDeny}, false},
		{lt.Policy{Tool: "*", Decision: lt.PolicyAsk}, false},
		{lt.Policy{Tool: "*", When: "usage.cost_usd > 1", Decision: lt.PolicyDeny}, false},
	} {
		require.Equal(t, tc.want, mcpServerDenied([]lt.Policy{tc.p}, "docs"), "%+v", tc.p)
	}
}

// TestNarrowChildDiskQuota: a child's workspace quota is at most its
// parent's, and a child that names none takes the parent's, never the
// server's larger default.
func TestNarrowChildDiskQuota(t *testing.T) {
	parent := capParent()
	parent.Environment.DiskMB = 100
	got, err := narrowChild(parent, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "openai"}}, capLimits())
	require.NoError(t, err)
	require.Equal(t, 100, got.Environment.DiskMB)
	got, err = narrowChild(parent, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "openai"}, Environment: &lt.Environment{DiskMB: 50}}, capLimits())
	require.NoError(t, err)
	require.Equal(t, 50, got.Environment.DiskMB)
	_, err = narrowChild(parent, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "openai"}, Environment: &lt.Environment{DiskMB: 101}}, capLimits())
	require.ErrorContains(t, err, "child may not use environment.disk_mb 101: its parent may not (at most 100)")
}

// TestNarrowChildModelPrice: a child may run another model of its parent's
// endpoint, but not one without a known price (it would cost 0, and no
// cost limit would bind it); without a name it runs its parent's.
func TestNarrowChildModelPrice(t *testing.T) {
	parent := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "openai", Name: "gpt-5", APIKeyEnv: "OPENAI_API_KEY"}}
	got, err := narrowChild(parent, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "openai", Name: "gpt-5-mini"}}, capLimits())
	require.NoError(t, err)
	require.Equal(t, "gpt-5-mini", got.Model.Name)
	got, err = narrowChild(parent, &lt.AgentSpec{}, capLimits())
	require.NoError(t, err)
	require.Equal(t, "gpt-5", got.Model.Name)
	_, err = narrowChild(parent, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "openai", Name: "ft:gpt-5:acme::abc"}}, capLimits())
	require.ErrorContains(t, err, "child may not use model ft:gpt-5:acme::abc: its parent may not (it has no known price")
}
