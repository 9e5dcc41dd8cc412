package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Separator joins a server's name and its tool's name into the name the
// model sees: "everything__echo".
const Separator = "__"

// serverName is what an MCP server's name (its tools entry's name) may be:
// no "__" inside and no "_" at the end, so that "<server>__<tool>" says
// where the server's name ends.
var serverName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*(_[A-Za-z0-9-]+)*$`)

// maxServerName leaves room for the tool's name in the 64 characters a
// model's tool name may have.
const maxServerName = 32

// ValidServerName reports whether name may name an MCP server, and if not,
// why.
func ValidServerName(name string) (bool, string) {
	switch {
	case len(name) > maxServerName:
		return false, fmt.Sprintf("must be at most %d characters", maxServerName)
	case !serverName.MatchString(name):
		return false, `must start with a letter and have only letters, digits, - and single _ (not at the end): the model sees its tools as "<name>__<tool>"`
	}
	return true, ""
}

// ToolName is the name the model sees for a server's tool.
func ToolName(server, toolName string) string { return server + Separator + toolName }

// modelToolName is what model providers accept as a tool's name.
var modelToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Offer decides what of a server's listing the agent offers the model, per
// its tools entry (spec): the allowlisted tools whose names models accept
// and whose input schemas compile, each with its effect class (see Effect).
// reason says why the server was listed (lt.MCPToolsListedData.Reason).
func Offer(spec *lt.ToolSpec, l *Listing, reason string) (*lt.MCPToolsListedData, error) {
	out := &lt.MCPToolsListedData{
		Server: spec.Name, Reason: reason, ServerName: l.ServerName, ServerVersion: l.ServerVersion,
		Tools: []lt.MCPTool{},
	}
	seen := map[string]bool{}
	for _, t := range l.Tools {
		if t == nil {
			continue
		}
		hide := func(why string) { out.Hidden = append(out.Hidden, lt.MCPHiddenTool{Tool: t.Name, Reason: why}) }
		name := ToolName(spec.Name, t.Name)
		switch {
		case seen[t.Name]:
			hide("listed twice")
			continue
		case len(spec.Tools) > 0 && !slices.Contains(spec.Tools, t.Name):
			hide("not in the agent's tools allowlist")
			continue
		case !modelToolName.MatchString(name):
			hide(fmt.Sprintf("%q is not a name models accept (letters, digits, _ and -, at most 64 characters)", name))
			continue
		}
		seen[t.Name] = true
		schema, err := inputSchema(t.InputSchema)
		if err != nil {
			hide(err.Error())
			continue
		}
		mt := lt.MCPTool{Name: name, Tool: t.Name, Description: strings.TrimSpace(t.Description), InputSchema: schema}
		if a := t.Annotations; a != nil {
			ro, idem := a.ReadOnlyHint, a.IdempotentHint
			mt.ReadOnlyHint, mt.IdempotentHint, mt.DestructiveHint = &ro, &idem, a.DestructiveHint
		}
		mt.Effect, mt.EffectFrom = Effect(spec, &mt)
		out.Tools = append(out.Tools, mt)
	}
	if err := hashOffer(out); err != nil {
		return nil, err
	}
	return out, nil
}

// inputSchema returns a tool's input schema in canonical JSON, checked to
// be one the engine validates arguments with.
func inputSchema(s any) (json.RawMessage, error) {
	if s == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("input schema: %v", err)
	}
	canon, err := tool.CanonicalJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("input schema: %v", err)
	}
	if err := tool.CompileSchema(canon); err != nil {
		return nil, fmt.Errorf("input schema cannot be used: %v", err)
	}
	return canon, nil
}

// Effect is the effect class of a server's tool and where it comes from:
// the agent's effects for it ("config"); else, when the agent trusts the
// server's annotations, read for readOnlyHint and idempotent for
// idempotentHint ("annotations"); else irreversible ("default"), the class
// whose calls are never re-run blindly.
func Effect(spec *lt.ToolSpec, t *lt.MCPTool) (lt.EffectClass, string) {
	if c, ok := spec.Effects[t.Tool]; ok && c != "" {
		return c, "config"
	}
	if spec.TrustAnnotations {
		switch {
		case t.ReadOnlyHint != nil && *t.ReadOnlyHint:
			return lt.EffectRead, "annotations"
		case t.IdempotentHint != nil && *t.IdempotentHint:
			return lt.EffectIdempotent, "annotations"
		}
	}
	return lt.EffectIrreversible, "default"
}

// Reoffer derives an agent's offer of a server from another agent's offer
// of the same server (a sub-agent's from its parent's: the same name and
// launch definition), without listing it, so no process starts for it:
// the tools the agent's allowlist keeps, classified by the agent's effects
// and annotation trust.
func Reoffer(spec *lt.ToolSpec, from *lt.MCPToolsListedData, reason string) (*lt.MCPToolsListedData, error) {
	out := &lt.MCPToolsListedData{
		Server: spec.Name, Reason: reason, ServerName: from.ServerName, ServerVersion: from.ServerVersion,
		Tools: []lt.MCPTool{}, Hidden: slices.Clone(from.Hidden),
	}
	for _, t := range from.Tools {
		if len(spec.Tools) > 0 && !slices.Contains(spec.Tools, t.Tool) {
			out.Hidden = append(out.Hidden, lt.MCPHiddenTool{Tool: t.Tool, Reason: "not in the agent's tools allowlist"})
			continue
		}
		t.Effect, t.EffectFrom = Effect(spec, &t)
		out.Tools = append(out.Tools, t)
	}
	if err := hashOffer(out); err != nil {
		return nil, err
	}
	return out, nil
}

// hashOffer sets an offer's SHA256: the hash of its tools' canonical JSON.
func hashOffer(out *lt.MCPToolsListedData) error {
	raw, err := json.Marshal(out.Tools)
	if err != nil {
		return fmt.Errorf("encode the tools of MCP server %s: %w", out.Server, err)
	}
	canon, err := tool.CanonicalJSON(raw)
	if err != nil {
		return fmt.Errorf("encode the tools of MCP server %s: %w", out.Server, err)
	}
	sum := sha256.Sum256(canon)
	out.SHA256 = hex.EncodeToString(sum[:])
	return nil
}
