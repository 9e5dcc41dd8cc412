package model

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func ptr[T any](v T) *T { return &v }

func TestParsePricing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		raw     string
		want    *Pricing
		wantErr string // "field: message"
	}{
		{name: "absent", raw: "", want: nil},
		{name: "null", raw: " null ", want: nil},
		{name: "full", raw: `{"input_per_mtok": 3, "cached_input_per_mtok": 0.3, "output_per_mtok": 15}`,
			want: &Pricing{InputPerMTok: 3, CachedInputPerMTok: ptr(0.3), OutputPerMTok: 15}},
		{name: "no cached price", raw: `{"input_per_mtok": 1.25, "output_per_mtok": 10}`,
			want: &Pricing{InputPerMTok: 1.25, OutputPerMTok: 10}},
		{name: "zero prices", raw: `{"input_per_mtok": 0, "cached_input_per_mtok": 0, "output_per_mtok": 0}`,
			want: &Pricing{CachedInputPerMTok: ptr(0.0)}},
		{name: "not an object", raw: `[1]`, wantErr: "pricing: must be an object"},
		{name: "unknown field", raw: `{"input_per_mtok": 1, "output_per_mtok": 1, "per_call": 2}`, wantErr: "pricing.per_call: unknown field"},
		{name: "input missing", raw: `{"output_per_mtok": 1}`, wantErr: "pricing.input_per_mtok: required"},
		{name: "output missing", raw: `{"input_per_mtok": 1}`, wantErr: "pricing.output_per_mtok: required"},
		{name: "string price", raw: `{"input_per_mtok": "3", "output_per_mtok": 1}`, wantErr: "pricing.input_per_mtok: must be a number"},
		{name: "null price", raw: `{"input_per_mtok": 3, "output_per_mtok": null}`, wantErr: "pricing.output_per_mtok: must be a number"},
		{name: "negative", raw: `{"input_per_mtok": 3, "cached_input_per_mtok": -1, "output_per_mtok": 1}`, wantErr: "pricing.cached_input_per_mtok: must be >= 0 and <= 1000000"},
		{name: "too large", raw: `{"input_per_mtok": 1e7, "output_per_mtok": 1}`, wantErr: "pricing.input_per_mtok: must be >= 0 and <= 1000000"},
		{name: "beyond float64", raw: `{"input_per_mtok": 1, "output_per_mtok": 1e400}`, wantErr: "pricing.output_per_mtok: must be >= 0 and <= 1000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParsePricing(json.RawMessage(tt.raw))
			if tt.wantErr != "" {
				var fe *FieldError
				require.ErrorAs(t, err, &fe)
				require.Equal(t, tt.wantErr, fe.Field+": "+fe.Message)
				require.Equal(t, tt.wantErr, err.Error())
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPricingCost(t *testing.T) {
	t.Parallel()
	p := Pricing{InputPerMTok: 3, CachedInputPerMTok: ptr(0.3), OutputPerMTok: 15}
	tests := []struct {
		name    string
		pricing Pricing
		usage   lt.Usage
		want    float64
	}{
		{name: "nothing", pricing: p, want: 0},
		{name: "input and output", pricing: p,
			usage: lt.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}, want: 3 + 1.5},
		{name: "cached input is part of input", pricing: p,
			usage: lt.Usage{InputTokens: 1_000_000, CachedInputTokens: 400_000}, want: 0.6*3 + 0.4*0.3},
		{name: "reasoning is part of output", pricing: p,
			usage: lt.Usage{OutputTokens: 1_000_000, ReasoningTokens: 900_000}, want: 15},
		{name: "no cached price bills cached at the input price",
			pricing: Pricing{InputPerMTok: 2, OutputPerMTok: 8},
			usage:   lt.Usage{InputTokens: 500_000, CachedInputTokens: 500_000, OutputTokens: 250_000}, want: 1 + 2},
		{name: "cached beyond input is capped", pricing: p,
			usage: lt.Usage{InputTokens: 100, CachedInputTokens: 1_000_000}, want: 100 * 0.3 / 1e6},
		{name: "negative counts count as zero", pricing: p,
			usage: lt.Usage{InputTokens: -5, CachedInputTokens: -5, OutputTokens: -5}, want: 0},
		{name: "other usage fields are ignored", pricing: p,
			usage: lt.Usage{CostUSD: 99, ModelCalls: 3, ToolCalls: 4}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.InDelta(t, tt.want, tt.pricing.Cost(tt.usage), 1e-12)
		})
	}
}
