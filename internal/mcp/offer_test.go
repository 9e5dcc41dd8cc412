package mcp_test

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/mcp"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func listing() *mcp.Listing {
	yes := true
	obj := map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}}}
	return &mcp.Listing{ServerName: "srv", ServerVersion: "2", Tools: []*sdk.Tool{
		{Name: "search", Description: " Search. ", InputSchema: obj, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "upsert", InputSchema: obj, Annotations: &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: &yes}},
		{Name: "delete", InputSchema: obj},
		{Name: "dotted.name", InputSchema: obj},
		{Name: "badschema", InputSchema: map[string]any{"type": "string"}},
		{Name: "noschema"},
	}}
}

func byTool(l *lt.MCPToolsListedData) map[string]lt.MCPTool {
	out := map[string]lt.MCPTool{}
	for _, t := range l.Tools {
		out[t.Tool] = t
	}
	return out
}

// TestOfferEffects: without trust, every tool is irreversible unless the
// agent's effects say otherwise; with trust_annotations, readOnlyHint means
// read and idempotentHint idempotent; the agent's effects win over both.
func TestOfferEffects(t *testing.T) {
	t.Parallel()
	spec := &lt.ToolSpec{Name: "docs", Type: "mcp", Effects: map[string]lt.EffectClass{"delete": lt.EffectIdempotent}}
	l, err := mcp.Offer(spec, listing(), "first")
	require.NoError(t, err)
	tools := byTool(l)
	require.Equal(t, "docs__search", tools["search"].Name)
	require.Equal(t, "Search.", tools["search"].Description)
	require.Equal(t, lt.EffectIrreversible, tools["search"].Effect, "annotations are not trusted by default")
	require.Equal(t, "default", tools["search"].EffectFrom)
	require.Equal(t, lt.EffectIdempotent, tools["delete"].Effect)
	require.Equal(t, "config", tools["delete"].EffectFrom)
	require.True(t, *tools["search"].ReadOnlyHint)
	require.Nil(t, tools["delete"].ReadOnlyHint, "not sent")
	require.JSONEq(t, `{"type":"object"}`, string(tools["noschema"].InputSchema))

	spec.TrustAnnotations = true
	l2, err := mcp.Offer(spec, listing(), "turn")
	require.NoError(t, err)
	tools = byTool(l2)
	require.Equal(t, lt.EffectRead, tools["search"].Effect)
	require.Equal(t, "annotations", tools["search"].EffectFrom)
	require.Equal(t, lt.EffectIdempotent, tools["upsert"].Effect)
	require.Equal(t, lt.EffectIdempotent, tools["delete"].Effect, "the agent's effects win")
	require.Equal(t, lt.EffectIrreversible, tools["noschema"].Effect)
	require.NotEqual(t, l.SHA256, l2.SHA256, "the classes changed, so the listing did")

	hidden := map[string]string{}
	for _, h := range l.Hidden {
		hidden[h.Tool] = h.Reason
	}
	require.Contains(t, hidden["dotted.name"], "not a name models accept")
	require.Contains(t, hidden["badschema"], "input schema cannot be used")
	require.Len(t, l.Tools, 4)
}

func TestOfferAllowlistAndHash(t *testing.T) {
	t.Parallel()
	spec := &lt.ToolSpec{Name: "docs", Type: "mcp", Tools: []string{"search"}}
	a, err := mcp.Offer(spec, listing(), "first")
	require.NoError(t, err)
	require.Len(t, a.Tools, 1)
	require.Equal(t, "docs__search", a.Tools[0].Name)
	b, err := mcp.Offer(spec, listing(), "turn")
	require.NoError(t, err)
	require.Equal(t, a.SHA256, b.SHA256, "the same tools hash the same")
	require.Len(t, a.SHA256, 64)
	reasons := map[string]string{}
	for _, h := range a.Hidden {
		reasons[h.Tool] = h.Reason
	}
	require.Equal(t, "not in the agent's tools allowlist", reasons["upsert"])
}

// TestReoffer: a sub-agent's offer derived from its parent's is what
// listing the server with the sub-agent's own spec would give.
func TestReoffer(t *testing.T) {
	t.Parallel()
	parentSpec := &lt.ToolSpec{Name: "docs", Type: "mcp", TrustAnnotations: true, Effects: map[string]lt.EffectClass{"delete": lt.EffectIdempotent}}
	parent, err := mcp.Offer(parentSpec, listing(), "first")
	require.NoError(t, err)
	childSpec := &lt.ToolSpec{Name: "docs", Type: "mcp", Tools: []string{"search", "delete"}, Effects: map[string]lt.EffectClass{"delete": lt.EffectIrreversible}}
	got, err := mcp.Reoffer(childSpec, parent, "parent")
	require.NoError(t, err)
	listed, err := mcp.Offer(childSpec, listing(), "parent")
	require.NoError(t, err)
	require.Equal(t, listed.Tools, got.Tools)
	require.Equal(t, listed.SHA256, got.SHA256)
	require.Equal(t, "parent", got.Reason)
	require.Equal(t, "srv", got.ServerName)
	tools := byTool(got)
	require.Equal(t, lt.EffectIrreversible, tools["search"].Effect, "the child does not trust annotations")
	require.Equal(t, lt.EffectIrreversible, tools["delete"].Effect)
	require.Len(t, parent.Tools, 4, "the parent's offer is not changed")
}

func TestValidServerName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"everything", "docs-v2", "my_docs", "A1"} {
		valid, why := mcp.ValidServerName(ok)
		require.True(t, valid, "%s: %s", ok, why)
	}
	for _, bad := range []string{"", "1docs", "my__docs", "docs_", "do cs", "d.ocs", strings.Repeat("a", 33)} {
		valid, why := mcp.ValidServerName(bad)
		require.False(t, valid, bad)
		require.NotEmpty(t, why)
	}
}
