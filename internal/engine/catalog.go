package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A runner's tool catalog answers, for a name the model (or the journal)
// uses, what the tool is, its effect class and how it runs. Four
// namespaces feed it:
//   - the agent's tools entries (its pinned spec), each resolved as
//     toolFromSpec says: an application function, a tool the engine runs
//     itself (enginetools.go) or a built-in of the engine's registry
//     (internal/tool);
//   - the tools of the agent's MCP servers, as last listed in the journal
//     (mcp.go).
//
// The spec and the registry do not change while a runner holds its claim,
// so their part is built once, when the runner claims the session; the MCP
// part is rebuilt whenever the journal gives a server a new listing
// (withMCP), which is the only input that moves. A name the agent's
// entries resolve is looked up there first: validation keeps the two
// namespaces apart (MCP tools are "<server>__<tool>", and no other entry
// may use a server's prefix), so the order only matters for a spec that
// was never validated.

// toolNamespace says where a catalog entry comes from.
type toolNamespace string

const (
	nsBuiltin  toolNamespace = "builtin"  // the engine's registry, enabled by an agent's entry
	nsEngine   toolNamespace = "engine"   // run by the engine on the session itself
	nsFunction toolNamespace = "function" // the application's, answered by a function_call action
	nsMCP      toolNamespace = "mcp"      // an MCP server's, as last listed in the journal
)

// toolEntry is one tool of the catalog.
type toolEntry struct {
	name string
	ns   toolNamespace
	// kind is the journal.Call kind a call of it is requested with, which
	// execCall dispatches on: CallBuiltin, CallFunction, CallMCP, or the
	// engine tool's own (CallFinish, CallHuman, CallWait, ...).
	kind string
	// spec is the agent's entry of this name (zero for an MCP tool, whose
	// entry is its server's).
	spec lt.ToolSpec
	// schema validates a call's arguments (see checksArgs); nil for a
	// function tool without parameters.
	schema json.RawMessage
	// class is the effect class before the agent's override (classOf).
	class lt.EffectClass
	// description is what an approval says the tool does.
	description string
	// timeout is the agent's timeout_seconds for it (for an MCP tool its
	// server's); 0 for the tool's own default.
	timeout time.Duration
	builtin tool.Tool // nsBuiltin: what runs it
	mcp     mcpTool   // nsMCP: its server, and its name there
	def     *model.ToolDef
}

// classOf is the effect class of a call with valid (canonical) arguments:
// an MCP tool's is its listing's (mcp.Offer applied the agent's effects
// there); http_request's depends on the method unless the agent declares
// it read or irreversible; otherwise the agent's override, if any, else
// the tool's own.
func (en *toolEntry) classOf(args json.RawMessage) lt.EffectClass {
	switch {
	case en.ns == nsMCP:
		return en.class
	case en.ns == nsBuiltin && en.name == "http_request" && (en.spec.Effect == "" || en.spec.Effect == lt.EffectIdempotent):
		// GET and HEAD read; the others are irreversible unless the agent
		// declares the endpoint idempotent (then the idempotency key goes
		// in a header).
		return tool.HTTPRequestEffect(args, en.spec.Effect == lt.EffectIdempotent)
	case en.ns == nsBuiltin && en.name == browserTool && en.spec.Effect == "":
		// open, read and screenshot look; the other actions act.
		return tool.BrowserEffect(args)
	case en.spec.Effect != "":
		return en.spec.Effect
	}
	return en.class
}

// checksArgs reports whether a call's arguments are validated against
// schema when requested: all but a function tool's without parameters.
func (en *toolEntry) checksArgs() bool { return en.ns != nsFunction || len(en.schema) > 0 }

// toolCatalog is a runner's tools; see the top of this file.
type toolCatalog struct {
	spec     map[string]*toolEntry // the agent's entries that resolve, by name
	specDefs []model.ToolDef       // what they offer the model, in the agent's order
	mcp      map[string]*toolEntry // the MCP servers' tools, by model-visible name
	defs     []model.ToolDef       // specDefs, then each server's tools in the agent's order
	servers  []lt.ToolSpec         // the agent's MCP servers, in its order
}

// newToolCatalog resolves an agent's entries against the registry. Its MCP
// part is empty until withMCP.
func newToolCatalog(reg *tool.Registry, spec *lt.AgentSpec) *toolCatalog {
	c := &toolCatalog{spec: map[string]*toolEntry{}, mcp: map[string]*toolEntry{}, servers: mcpSpecs(spec)}
	for i := range spec.Tools {
		en, ok := toolFromSpec(reg, &spec.Tools[i])
		if !ok {
			continue
		}
		if en.def != nil {
			c.specDefs = append(c.specDefs, *en.def)
		}
		if _, dup := c.spec[en.name]; !dup {
			c.spec[en.name] = en // the first entry of a name, as a lookup in the agent's list finds it
		}
	}
	c.defs = c.specDefs
	return c
}

// toolFromSpec resolves one of the agent's entries by its name: a
// function tool is the application's; any other entry (an MCP server's
// too, whose own tools are the MCP part's) names a tool the engine runs
// itself, else a built-in of the registry. False when it names neither:
// such an entry offers the model nothing, and a call of its name is
// unknown.
func toolFromSpec(reg *tool.Registry, ts *lt.ToolSpec) (*toolEntry, bool) {
	en := &toolEntry{name: ts.Name, spec: *ts, timeout: entryTimeout(ts)}
	desc := ts.Description
	switch et, isEngine := engineToolNamed(ts.Name); {
	case ts.Type == "function":
		en.ns, en.kind, en.class = nsFunction, lt.CallFunction, lt.EffectIrreversible
		if len(ts.Parameters) > 0 {
			en.schema = ts.Parameters
		}
		params := ts.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		en.def = &model.ToolDef{Name: ts.Name, Description: ts.Description, Parameters: params}
	case isEngine:
		en.ns, en.kind, en.class, en.schema = nsEngine, et.kind, lt.EffectRead, et.schema
		if desc == "" {
			desc = et.description
		}
		en.def = &model.ToolDef{Name: ts.Name, Description: desc, Parameters: et.schema}
	default:
		t, ok := reg.Get(ts.Name)
		if !ok {
			return nil, false
		}
		en.ns, en.kind, en.class, en.schema, en.builtin = nsBuiltin, lt.CallBuiltin, t.Effect(), t.Parameters(), t
		if desc == "" {
			desc = t.Description()
		}
		en.def = &model.ToolDef{Name: t.Name(), Description: desc, Parameters: t.Parameters()}
	}
	// An approval describes a tool by the agent's words, else the
	// registry's: an engine tool has none there.
	en.description = ts.Description
	if en.description == "" {
		if t, ok := reg.Get(ts.Name); ok {
			en.description = t.Description()
		}
	}
	return en, true
}

// entryTimeout is the timeout an agent's entry sets (0: none).
func entryTimeout(ts *lt.ToolSpec) time.Duration {
	if ts.TimeoutSeconds <= 0 {
		return 0
	}
	return time.Duration(ts.TimeoutSeconds) * time.Second
}

// withMCP rebuilds the MCP part from the servers' latest listings: every
// listed tool can be looked up, and the model is offered those of the
// agent's servers, in the agent's order.
func (c *toolCatalog) withMCP(m *mcpTools) {
	c.mcp = map[string]*toolEntry{}
	c.defs = slices.Clip(c.specDefs)
	if m == nil {
		return
	}
	timeouts := map[string]time.Duration{}
	for _, s := range c.servers {
		timeouts[s.Name] = entryTimeout(&s)
	}
	for server, l := range m.listed {
		for _, t := range l.Tools {
			c.mcp[t.Name] = &toolEntry{
				name: t.Name, ns: nsMCP, kind: lt.CallMCP, schema: t.InputSchema, class: t.Effect,
				description: t.Description, timeout: timeouts[server], mcp: mcpTool{server: server, MCPTool: t},
			}
		}
	}
	for _, s := range c.servers {
		l := m.listed[s.Name]
		if l == nil {
			continue
		}
		for _, t := range l.Tools {
			desc := t.Description
			if desc == "" {
				desc = fmt.Sprintf("Tool %s of the MCP server %s.", t.Tool, s.Name)
			}
			c.defs = append(c.defs, model.ToolDef{Name: t.Name, Description: desc, Parameters: t.InputSchema})
		}
	}
}

// lookup returns the tool the name stands for: the agent's entry of that
// name first, then an MCP server's tool.
func (c *toolCatalog) lookup(name string) (*toolEntry, bool) {
	if en, ok := c.spec[name]; ok {
		return en, true
	}
	en, ok := c.mcp[name]
	return en, ok
}

// builtin returns the registry's tool the name stands for, if it is one.
func (c *toolCatalog) builtin(name string) (tool.Tool, bool) {
	en, ok := c.lookup(name)
	if !ok || en.ns != nsBuiltin {
		return nil, false
	}
	return en.builtin, true
}

// mcpTool returns the MCP tool the name stands for, as last listed.
func (c *toolCatalog) mcpTool(name string) (mcpTool, bool) {
	en, ok := c.lookup(name)
	if !ok || en.ns != nsMCP {
		return mcpTool{}, false
	}
	return en.mcp, true
}

// definitions is what the model is offered, in order: the agent's own
// tools, then each MCP server's tools as last listed, in the agent's
// order. The caller must not modify it.
func (c *toolCatalog) definitions() []model.ToolDef { return c.defs }

// timeout is the agent's timeout of a call of the named tool (0: the
// tool's default).
func (c *toolCatalog) timeout(name string) time.Duration {
	if en, ok := c.lookup(name); ok {
		return en.timeout
	}
	return 0
}
