package model

import (
	"strings"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The catalog knows facts about the models of the hosted providers: their
// context windows (below) and their list prices (pricing_table.go). Both are
// looked up by provider and model name with the same rule, lookupModel:
//
//   - Only the hosted providers "openai" and "anthropic" have entries. A model
//     behind "openai-compatible" (Ollama, vLLM, llama.cpp, LiteLLM...) may
//     carry any name, including one that looks like an OpenAI model while
//     being a local one, so it is never looked up: its spec gives
//     context_window and pricing when they matter.
//   - A name matches an entry when it equals the entry's base name or starts
//     with the base name followed by "-": dated snapshots and aliases
//     ("gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929",
//     "claude-3-7-sonnet-latest") match their base model. The longest
//     matching base name wins, so "gpt-4o-mini-2024-07-18" is gpt-4o-mini,
//     never gpt-4o. A match needs the "-" boundary, so "gpt-4.1" is not
//     "gpt-4", "gpt-5.1" is not "gpt-5" and "o30" is not "o3".
//   - Names are matched after trimming spaces and lowering case. Fine-tuned
//     models ("ft:gpt-4o-mini:org::id") have their own prices and match
//     nothing.
//
// A variant the table does not list (say "o3-foo") therefore gets its base
// model's facts: the nearest known answer, which a spec can always override.

// Provider names that have catalog entries.
const (
	providerOpenAI    = "openai"
	providerAnthropic = "anthropic"
)

// lookupModel returns the value of the entry of table that name matches under
// the rule above, and whether one matched.
func lookupModel[V any](table map[string]map[string]V, provider, name string) (V, bool) {
	var zero V
	entries, ok := table[provider]
	if !ok {
		return zero, false
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return zero, false
	}
	// Try the name itself, then each shorter prefix that ends before a "-":
	// the first hit is the longest matching base name.
	for base := name; ; {
		if v, ok := entries[base]; ok {
			return v, true
		}
		i := strings.LastIndexByte(base, '-')
		if i <= 0 {
			return zero, false
		}
		base = base[:i]
	}
}

// contextWindows is the context window, in tokens, of each known model as its
// provider's model pages give it (OpenAI's per-model pages, Anthropic's model
// overview pages), taken on PricingAsOf.
//
// The window is the whole of what one call may hold: the input and the output
// the call may produce share it (gpt-5: 400,000 = up to 272,000 input + up to
// 128,000 output; Claude: input + max_tokens must fit). Whoever plans a
// context against it leaves room for the output.
//
// Two limits below the window matter to a long session and are the caller's
// to weigh (a spec's context_window can set a smaller window): OpenAI bills a
// request over 272,000 input tokens at 2x input and 1.5x output on GPT-5.4
// and later, and Claude Haiku 5.5 bills a prompt over 100,000 tokens at 5x.
// Claude Sonnet 4.5 and the models before it are listed at their standard
// 200,000 (their 1M window is a beta behind a request header, at a higher
// price).
var contextWindows = map[string]map[string]int{
	providerOpenAI: {
		"gpt-6.1-sol":           1_050_000,
		"gpt-6.1-terra":         1_050_000,
		"gpt-6-astra":           1_050_000,
		"gpt-6-sol":             1_050_000,
		"gpt-6-luna":            1_050_000,
		"gpt-5.6":               1_050_000,
		"gpt-5.6-sol":           1_050_000,
		"gpt-5.6-terra":         1_050_000,
		"gpt-5.6-luna":          1_050_000,
		"gpt-5.5":               1_000_000,
		"gpt-5.5-pro":           1_000_000,
		"gpt-5.4":               1_050_000,
		"gpt-5.4-pro":           1_050_000,
		"gpt-5.4-mini":          400_000,
		"gpt-5.4-nano":          400_000,
		"gpt-5.3":               128_000,
		"gpt-5.3-codex":         400_000,
		"gpt-5.2":               400_000,
		"gpt-5.2-chat":          128_000,
		"gpt-5.2-pro":           400_000,
		"gpt-5.1":               400_000,
		"gpt-5.1-chat":          128_000,
		"gpt-5.1-codex-mini":    400_000,
		"gpt-5":                 400_000,
		"gpt-5-chat":            128_000,
		"gpt-5-mini":            400_000,
		"gpt-5-nano":            400_000,
		"gpt-5-pro":             400_000,
		"gpt-4.1":               1_047_576,
		"gpt-4.1-mini":          1_047_576,
		"gpt-4.1-nano":          1_047_576,
		"gpt-4o":                128_000,
		"gpt-4o-mini":           128_000,
		"chatgpt-4o":            128_000,
		"o1":                    200_000,
		"o1-preview":            128_000,
		"o1-mini":               128_000,
		"o1-pro":                200_000,
		"o3":                    200_000,
		"o3-pro":                200_000,
		"o3-mini":               200_000,
		"o3-deep-research":      200_000,
		"o4-mini":               200_000,
		"o4-mini-deep-research": 200_000,
		"codex-mini":            200_000,
		"gpt-4-turbo":           128_000,
		"gpt-4":                 8_192,
		"gpt-4-32k":             32_768,
		"gpt-3.5-turbo":         16_385,
	},
	providerAnthropic: {
		"claude-fable-5-1":  1_000_000,
		"claude-mythos-5-1": 1_000_000,
		"claude-fable-5":    1_000_000,
		"claude-mythos-5":   1_000_000,
		"claude-opus-5-5":   1_000_000,
		"claude-opus-5":     1_000_000,
		"claude-sonnet-5-5": 1_000_000,
		"claude-sonnet-5":   1_000_000,
		"claude-haiku-5-5":  1_000_000,
		"claude-opus-4-8":   1_000_000,
		"claude-opus-4-7":   1_000_000,
		"claude-opus-4-6":   1_000_000,
		"claude-sonnet-4-6": 1_000_000,
		"claude-opus-4-5":   200_000,
		"claude-opus-4-1":   200_000,
		"claude-opus-4":     200_000,
		"claude-sonnet-4-5": 200_000,
		"claude-sonnet-4":   200_000,
		"claude-haiku-4-5":  200_000,
		"claude-3-7-sonnet": 200_000,
		"claude-3-5-sonnet": 200_000,
		"claude-3-5-haiku":  200_000,
		"claude-3-opus":     200_000,
		"claude-3-haiku":    200_000,
	},
}

// DefaultContextWindow returns the context window in tokens of a known model
// (same matching as DefaultPricing), or 0 when unknown.
func DefaultContextWindow(provider, name string) int {
	w, _ := lookupModel(contextWindows, provider, name)
	return w
}

// ContextWindow returns spec.ContextWindow when set, else
// DefaultContextWindow, else 0 (unknown: no compaction by threshold).
func ContextWindow(spec lt.ModelSpec) int {
	if spec.ContextWindow > 0 {
		return spec.ContextWindow
	}
	return DefaultContextWindow(spec.Provider, spec.Name)
}
