package model

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestPricingAsOfIsADate(t *testing.T) {
	t.Parallel()
	d, err := time.Parse(time.DateOnly, PricingAsOf)
	require.NoError(t, err)
	require.Equal(t, PricingAsOf, d.Format(time.DateOnly))
}

func TestDefaultPricingMatching(t *testing.T) {
	t.Parallel()
	tests := []struct {
		provider, name string
		want           Pricing
	}{
		// Base names.
		{"openai", "gpt-4o", price(2.50, 1.25, 10)},
		{"openai", "gpt-4o-mini", price(0.15, 0.075, 0.60)},
		{"openai", "o3", price(2, 0.50, 8)},
		{"openai", "o4-mini", price(1.10, 0.275, 4.40)},
		{"openai", "gpt-5.6-luna", price(0.20, 0.02, 1.20)},
		{"anthropic", "claude-haiku-5-5", price(0.10, 0.01, 0.50)},
		// Dated snapshots and aliases match their base model.
		{"openai", "gpt-4o-2024-08-06", price(2.50, 1.25, 10)},
		{"openai", "gpt-5-2025-08-07", price(1.25, 0.125, 10)},
		{"openai", "gpt-5-chat-latest", price(1.25, 0.125, 10)},
		{"openai", "gpt-4.1-mini-2025-04-14", price(0.40, 0.10, 1.60)},
		{"openai", "o3-mini-2025-01-31", price(1.10, 0.55, 4.40)},
		{"openai", "o3-deep-research-2025-06-26", price(10, 2.50, 40)},
		{"openai", "gpt-5.6-sol-2026-08-01", price(5, 0.50, 30)},
		{"anthropic", "claude-sonnet-4-5-20250929", price(3, 0.30, 15)},
		{"anthropic", "claude-haiku-4-5-20251001", price(1, 0.10, 5)},
		{"anthropic", "claude-opus-4-20250514", price(15, 1.50, 75)},
		{"anthropic", "claude-3-7-sonnet-latest", price(3, 0.30, 15)},
		{"anthropic", "claude-3-5-haiku-20241022", price(0.80, 0.08, 4)},
		// Longest prefix first: these are not priced as their shorter
		// relatives (gpt-4o, o3, gpt-5, claude-opus-4).
		{"openai", "gpt-4o-mini-2024-07-18", price(0.15, 0.075, 0.60)},
		{"openai", "o3-pro-2025-06-10", price(20, noCache, 80)},
		{"openai", "gpt-5-nano-2025-08-07", price(0.05, 0.005, 0.40)},
		{"anthropic", "claude-opus-4-5-20251101", price(5, 0.50, 25)},
		// A snapshot with a price of its own beats its base.
		{"openai", "gpt-4o-2024-05-13", price(5, noCache, 15)},
		// Case and surrounding spaces do not matter.
		{"openai", "  GPT-4o-Mini ", price(0.15, 0.075, 0.60)},
	}
	for _, tt := range tests {
		t.Run(tt.provider+"/"+tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := DefaultPricing(tt.provider, tt.name)
			require.True(t, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestDefaultPricingUnknown(t *testing.T) {
	t.Parallel()
	tests := []struct{ provider, name string }{
		{"openai", ""},
		{"openai", "gpt-7"},
		{"openai", "o30"},                      // no "-" boundary after o3
		{"openai", "gpt-4.2"},                  // not gpt-4
		{"openai", "gpt-5.7"},                  // not gpt-5
		{"openai", "ft:gpt-4o-mini:org::abc1"}, // fine-tuned models have their own prices
		{"openai", "-"},
		{"anthropic", "gpt-4o"}, // a model of another provider
		{"anthropic", "claude"},
		{"openai-compatible", "gpt-4o"}, // local models cost nothing unless the spec says so
		{"openai-compatible", "llama3.1:8b"},
		{"scripted", "demo"},
		{"", "gpt-4o"},
		{"OpenAI", "gpt-4o"}, // provider names are exact
	}
	for _, tt := range tests {
		got, ok := DefaultPricing(tt.provider, tt.name)
		require.False(t, ok, "%s/%s", tt.provider, tt.name)
		require.Equal(t, Pricing{}, got)
	}
}

func TestDefaultPricingReturnsACopy(t *testing.T) {
	t.Parallel()
	p, ok := DefaultPricing("openai", "gpt-4.1")
	require.True(t, ok)
	*p.CachedInputPerMTok = 99
	p.InputPerMTok = 99
	again, ok := DefaultPricing("openai", "gpt-4.1")
	require.True(t, ok)
	require.Equal(t, price(2, 0.50, 8), again)
}

// TestPriceTableIsSane guards the table against typos: every price is one a
// spec could give (ParsePricing accepts it), cached input is cheaper than
// input, output costs at least as much as input, and every priced model has a
// context window.
func TestPriceTableIsSane(t *testing.T) {
	t.Parallel()
	for provider, models := range prices {
		require.Contains(t, []string{providerOpenAI, providerAnthropic}, provider)
		for name, p := range models {
			require.Greater(t, p.InputPerMTok, 0.0, name)
			require.GreaterOrEqual(t, p.OutputPerMTok, p.InputPerMTok, name)
			if p.CachedInputPerMTok != nil {
				require.Less(t, *p.CachedInputPerMTok, p.InputPerMTok, name)
				require.Greater(t, *p.CachedInputPerMTok, 0.0, name)
			}
			raw, err := json.Marshal(p)
			require.NoError(t, err)
			parsed, err := ParsePricing(raw)
			require.NoError(t, err, name)
			require.Equal(t, p, *parsed, name)

			got, ok := DefaultPricing(provider, name)
			require.True(t, ok, name)
			require.Equal(t, p, got, "%s must match its own entry", name)
			require.Positive(t, DefaultContextWindow(provider, name), "%s has no context window", name)
		}
	}
}

func TestPricingFor(t *testing.T) {
	t.Parallel()
	override := json.RawMessage(`{"input_per_mtok": 1, "cached_input_per_mtok": 0.5, "output_per_mtok": 2}`)
	tests := []struct {
		name    string
		spec    lt.ModelSpec
		want    *Pricing
		wantErr string
	}{
		{name: "override beats the default",
			spec: lt.ModelSpec{Provider: "openai", Name: "gpt-4o", Pricing: override},
			want: &Pricing{InputPerMTok: 1, CachedInputPerMTok: ptr(0.5), OutputPerMTok: 2}},
		{name: "override prices a local model",
			spec: lt.ModelSpec{Provider: "openai-compatible", Name: "qwen3:32b", Pricing: override},
			want: &Pricing{InputPerMTok: 1, CachedInputPerMTok: ptr(0.5), OutputPerMTok: 2}},
		{name: "null pricing falls back to the default",
			spec: lt.ModelSpec{Provider: "anthropic", Name: "claude-sonnet-4-6", Pricing: json.RawMessage("null")},
			want: ptr(price(3, 0.30, 15))},
		{name: "default",
			spec: lt.ModelSpec{Provider: "openai", Name: "gpt-5-mini"},
			want: ptr(price(0.25, 0.025, 2))},
		{name: "unknown model has no price",
			spec: lt.ModelSpec{Provider: "openai", Name: "gpt-7"}},
		{name: "local model has no price",
			spec: lt.ModelSpec{Provider: "openai-compatible", Name: "gpt-4o"}},
		{name: "scripted has no price",
			spec: lt.ModelSpec{Provider: "scripted"}},
		{name: "bad override is an error, never replaced by the default",
			spec:    lt.ModelSpec{Provider: "openai", Name: "gpt-4o", Pricing: json.RawMessage(`{"input_per_mtok": 1}`)},
			wantErr: "pricing.output_per_mtok: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := PricingFor(tt.spec)
			if tt.wantErr != "" {
				var fe *FieldError
				require.ErrorAs(t, err, &fe)
				require.EqualError(t, err, tt.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// cents rounds a USD amount to whole cents (half away from zero), as a bill
// shows it.
func cents(usd float64) int64 { return int64(math.Round(usd * 100)) }

func TestCostOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		spec      lt.ModelSpec
		usage     lt.Usage
		want      float64
		wantCents int64
	}{
		{name: "gpt-4o with cached input",
			// 600k fresh x $2.50 + 400k cached x $1.25 + 100k out x $10
			spec:  lt.ModelSpec{Provider: "openai", Name: "gpt-4o-2024-11-20"},
			usage: lt.Usage{InputTokens: 1_000_000, CachedInputTokens: 400_000, OutputTokens: 100_000},
			want:  1.50 + 0.50 + 1.00, wantCents: 300},
		{name: "claude sonnet 4.5 snapshot with cache hits",
			// 60k fresh x $3 + 140k hits x $0.30 + 8k out x $15
			spec:  lt.ModelSpec{Provider: "anthropic", Name: "claude-sonnet-4-5-20250929"},
			usage: lt.Usage{InputTokens: 200_000, CachedInputTokens: 140_000, OutputTokens: 8_000},
			want:  0.18 + 0.042 + 0.12, wantCents: 34},
		{name: "gpt-5-mini reasoning is part of output",
			// 10k in x $0.25 + 2k out (1.5k of it reasoning) x $2
			spec:  lt.ModelSpec{Provider: "openai", Name: "gpt-5-mini-2025-08-07"},
			usage: lt.Usage{InputTokens: 10_000, OutputTokens: 2_000, ReasoningTokens: 1_500},
			want:  0.0025 + 0.004, wantCents: 1},
		{name: "o1-pro has no cache discount",
			// 10k in (5k cached, same price) x $150 + 1k out x $600
			spec:  lt.ModelSpec{Provider: "openai", Name: "o1-pro"},
			usage: lt.Usage{InputTokens: 10_000, CachedInputTokens: 5_000, OutputTokens: 1_000},
			want:  1.50 + 0.60, wantCents: 210},
		{name: "claude opus 4.6 long session",
			// 180k fresh x $5 + 720k hits x $0.50 + 32k out x $25
			spec:  lt.ModelSpec{Provider: "anthropic", Name: "claude-opus-4-6"},
			usage: lt.Usage{InputTokens: 900_000, CachedInputTokens: 720_000, OutputTokens: 32_000},
			want:  0.90 + 0.36 + 0.80, wantCents: 206},
		{name: "override",
			spec: lt.ModelSpec{Provider: "openai", Name: "gpt-4o",
				Pricing: json.RawMessage(`{"input_per_mtok": 0.5, "output_per_mtok": 1}`)},
			usage: lt.Usage{InputTokens: 2_000_000, CachedInputTokens: 1_000_000, OutputTokens: 1_000_000},
			want:  1 + 1, wantCents: 200},
		{name: "local model costs nothing",
			spec:  lt.ModelSpec{Provider: "openai-compatible", Name: "llama3.1:8b"},
			usage: lt.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}},
		{name: "unknown model costs nothing",
			spec:  lt.ModelSpec{Provider: "anthropic", Name: "claude-unknown-9"},
			usage: lt.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}},
		{name: "invalid override costs nothing",
			spec:  lt.ModelSpec{Provider: "openai", Name: "gpt-4o", Pricing: json.RawMessage(`{"input_per_mtok": "1"}`)},
			usage: lt.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := CostOf(tt.spec, tt.usage)
			require.InDelta(t, tt.want, got, 1e-9)
			require.Equal(t, tt.wantCents, cents(got), "cost %s", strconv.FormatFloat(got, 'f', -1, 64))
		})
	}
}
