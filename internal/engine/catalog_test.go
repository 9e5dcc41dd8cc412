package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

const lookupParams = `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`

func catalogSpec() *lt.AgentSpec {
	return &lt.AgentSpec{Tools: []lt.ToolSpec{
		{Name: "shell", Effect: lt.EffectIdempotent, TimeoutSeconds: 30},
		{Name: "lookup", Type: "function", Description: "Look a thing up.", Parameters: json.RawMessage(lookupParams), Affects: []string{"q"}},
		{Name: "anything", Type: "function"},
		{Name: finishTool},
		{Name: askHumanTool, Description: "Ask the operator."},
		{Name: "read_file", Description: "Read one file of the workspace."},
		{Name: "not_a_builtin"},
		{Name: "gh", Type: "mcp", TimeoutSeconds: 7},
		{Name: "db", Type: "mcp"},
	}}
}

// listing is an mcp.tools_listed event of server with the named tools
// (model-visible names "<server>__<name>").
func listing(t *testing.T, server string, effect lt.EffectClass, names ...string) lt.Event {
	t.Helper()
	d := lt.MCPToolsListedData{Server: server, Reason: "first"}
	for _, n := range names {
		d.Tools = append(d.Tools, lt.MCPTool{
			Name: server + "__" + n, Tool: n, InputSchema: json.RawMessage(`{"type":"object"}`), Effect: effect,
		})
	}
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	return lt.Event{Type: lt.EventMCPToolsListed, Data: raw}
}

// listedCatalog is the catalog of spec over the builtins, with the MCP
// listings folded in.
func listedCatalog(t *testing.T, spec *lt.AgentSpec, listings ...lt.Event) *toolCatalog {
	t.Helper()
	c := newToolCatalog(tool.NewRegistry(tool.Builtins()...), spec)
	m := newMCPTools()
	for _, ev := range listings {
		require.True(t, m.observe(ev))
	}
	c.withMCP(m)
	return c
}

func defNames(defs []model.ToolDef) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Name)
	}
	return out
}

func TestCatalogSpecNamespaces(t *testing.T) {
	reg := tool.NewRegistry(tool.Builtins()...)
	c := newToolCatalog(reg, catalogSpec())

	shell, ok := c.lookup("shell")
	require.True(t, ok)
	require.Equal(t, nsBuiltin, shell.ns)
	require.Equal(t, lt.CallBuiltin, shell.kind)
	require.Equal(t, lt.EffectIrreversible, shell.class, "the registry's class, before the agent's override")
	require.Equal(t, lt.EffectIdempotent, shell.classOf(json.RawMessage(`{"command":"ls"}`)), "the agent's override")
	require.Equal(t, 30*time.Second, shell.timeout)
	require.JSONEq(t, string((&tool.Shell{}).Parameters()), string(shell.schema))
	bt, ok := c.builtin("shell")
	require.True(t, ok)
	require.Equal(t, "shell", bt.Name())

	fn, ok := c.lookup("lookup")
	require.True(t, ok)
	require.Equal(t, nsFunction, fn.ns)
	require.Equal(t, lt.CallFunction, fn.kind)
	require.Equal(t, lt.EffectIrreversible, fn.classOf(json.RawMessage(`{"q":"x"}`)))
	require.True(t, fn.checksArgs())
	require.JSONEq(t, lookupParams, string(fn.schema))
	require.Equal(t, []string{"q"}, fn.spec.Affects)
	require.Equal(t, "Look a thing up.", fn.description)
	_, ok = c.builtin("lookup")
	require.False(t, ok, "a function is not the registry's")

	anything, ok := c.lookup("anything")
	require.True(t, ok)
	require.False(t, anything.checksArgs(), "a function without parameters takes any arguments")
	require.Nil(t, anything.schema)

	fin, ok := c.lookup(finishTool)
	require.True(t, ok)
	require.Equal(t, nsEngine, fin.ns)
	require.Equal(t, lt.CallFinish, fin.kind)
	require.Equal(t, lt.EffectRead, fin.classOf(json.RawMessage(`{"summary":"done"}`)))
	require.JSONEq(t, finishSchema, string(fin.schema))
	require.Empty(t, fin.description, "an engine tool has no description in the registry")

	ask, ok := c.lookup(askHumanTool)
	require.True(t, ok)
	require.Equal(t, lt.CallHuman, ask.kind)
	require.Equal(t, "Ask the operator.", ask.description)

	rf, ok := c.lookup("read_file")
	require.True(t, ok)
	require.Equal(t, lt.EffectRead, rf.classOf(json.RawMessage(`{"path":"a"}`)))
	require.Equal(t, "Read one file of the workspace.", rf.description)

	_, ok = c.lookup("not_a_builtin")
	require.False(t, ok, "an entry that names no tool of the engine or the registry resolves to nothing")
	_, ok = c.lookup("nope")
	require.False(t, ok)
	_, ok = c.lookup("gh__issues")
	require.False(t, ok, "no listing yet")
	require.Zero(t, c.timeout("nope"))
}

// The model is offered the agent's tools in its order (the registry's
// description unless the agent gives one, {"type":"object"} for a function
// without parameters), then each MCP server's tools in the agent's order of
// servers, not the order they were listed in.
func TestCatalogDefinitionsOrder(t *testing.T) {
	reg := tool.NewRegistry(tool.Builtins()...)
	c := newToolCatalog(reg, catalogSpec())
	specNames := []string{"shell", "lookup", "anything", finishTool, askHumanTool, "read_file"}
	require.Equal(t, specNames, defNames(c.definitions()))

	defs := c.definitions()
	require.Equal(t, (&tool.Shell{}).Description(), defs[0].Description)
	require.JSONEq(t, `{"type":"object"}`, string(defs[2].Parameters))
	require.Equal(t, engineTools[finishTool].description, defs[3].Description)
	require.Equal(t, "Ask the operator.", defs[4].Description)
	require.Equal(t, "Read one file of the workspace.", defs[5].Description)

	m := newMCPTools()
	require.True(t, m.observe(listing(t, "db", lt.EffectRead, "query")))
	require.True(t, m.observe(listing(t, "gh", lt.EffectIrreversible, "issues", "merge")))
	c.withMCP(m)
	require.Equal(t, append(specNames, "gh__issues", "gh__merge", "db__query"), defNames(c.definitions()))
	last := c.definitions()[len(c.definitions())-1]
	require.Equal(t, "Tool query of the MCP server db.", last.Description)

	// Another listing of a server replaces its tools.
	require.True(t, m.observe(listing(t, "gh", lt.EffectIrreversible, "pulls")))
	c.withMCP(m)
	require.Equal(t, append(specNames, "gh__pulls", "db__query"), defNames(c.definitions()))
	_, ok := c.lookup("gh__merge")
	require.False(t, ok)
	require.Equal(t, specNames, defNames(c.specDefs), "the agent's part is not rebuilt")
}

func TestCatalogMCPTools(t *testing.T) {
	c := listedCatalog(t, catalogSpec(), listing(t, "gh", lt.EffectIdempotent, "issues"))

	en, ok := c.lookup("gh__issues")
	require.True(t, ok)
	require.Equal(t, nsMCP, en.ns)
	require.Equal(t, lt.CallMCP, en.kind)
	require.Equal(t, lt.EffectIdempotent, en.classOf(nil), "the listing's class: mcp.Offer applied the agent's effects")
	require.Equal(t, 7*time.Second, c.timeout("gh__issues"), "its server's timeout")
	require.Empty(t, en.spec.Affects, "no agent entry of its own")
	mt, ok := c.mcpTool("gh__issues")
	require.True(t, ok)
	require.Equal(t, "gh", mt.server)
	require.Equal(t, "issues", mt.Tool)
	_, ok = c.builtin("gh__issues")
	require.False(t, ok)
	_, ok = c.mcpTool("shell")
	require.False(t, ok)
}

// http_request's class depends on its method unless the agent declares it
// read or irreversible; a declared idempotent endpoint makes writes
// idempotent.
func TestCatalogHTTPRequestClass(t *testing.T) {
	reg := tool.NewRegistry(tool.Builtins()...)
	get, post := json.RawMessage(`{"method":"GET","url":"https://example.com"}`), json.RawMessage(`{"method":"POST","url":"https://example.com"}`)
	for _, tc := range []struct {
		effect    lt.EffectClass
		get, post lt.EffectClass
	}{
		{"", lt.EffectRead, lt.EffectIrreversible},
		{lt.EffectIdempotent, lt.EffectRead, lt.EffectIdempotent},
		{lt.EffectIrreversible, lt.EffectIrreversible, lt.EffectIrreversible},
		{lt.EffectRead, lt.EffectRead, lt.EffectRead},
	} {
		c := newToolCatalog(reg, &lt.AgentSpec{Tools: []lt.ToolSpec{{Name: "http_request", Effect: tc.effect}}})
		en, ok := c.lookup("http_request")
		require.True(t, ok)
		require.Equal(t, tc.get, en.classOf(get), "effect %q, GET", tc.effect)
		require.Equal(t, tc.post, en.classOf(post), "effect %q, POST", tc.effect)
	}
}

// Precedence as a lookup in the agent's list had it: an agent's entry
// before an MCP tool of the same name (validation keeps them apart), the
// first of two entries of a name (both are offered), a function before an
// engine tool or built-in of its name, and an entry of any other type
// (even an MCP server's) names the engine's tool or the built-in.
func TestCatalogPrecedence(t *testing.T) {
	c := listedCatalog(t, &lt.AgentSpec{Tools: []lt.ToolSpec{
		{Name: "gh__issues", Type: "function"},
		{Name: "read_file", Type: "function", Description: "the application's"},
		{Name: "read_file"},
		{Name: "shell", Type: "mcp"},
		{Name: "gh", Type: "mcp"},
	}}, listing(t, "gh", lt.EffectRead, "issues"))

	en, ok := c.lookup("gh__issues")
	require.True(t, ok)
	require.Equal(t, nsFunction, en.ns)
	_, ok = c.mcpTool("gh__issues")
	require.False(t, ok)

	en, ok = c.lookup("read_file")
	require.True(t, ok)
	require.Equal(t, nsFunction, en.ns)
	require.Equal(t, "the application's", en.description)

	en, ok = c.lookup("shell")
	require.True(t, ok)
	require.Equal(t, nsBuiltin, en.ns)

	require.Equal(t, []string{"gh__issues", "read_file", "read_file", "shell", "gh__issues"}, defNames(c.definitions()))
}

func TestReservedToolNames(t *testing.T) {
	for name := range engineTools {
		require.True(t, ReservedToolName(name), name)
	}
	require.False(t, ReservedToolName("shell"))
	require.False(t, ReservedToolName(""))
}
