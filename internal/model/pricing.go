package model

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Pricing is the price of a model in USD per million tokens, as a model spec's
// "pricing" object gives it (API.md "Model configuration").
//
// Token counts follow the convention of lt.Usage: CachedInputTokens are the
// part of InputTokens served from the provider's prompt cache, and
// ReasoningTokens are part of OutputTokens, so neither is billed twice.
type Pricing struct {
	InputPerMTok float64 `json:"input_per_mtok"`
	// CachedInputPerMTok is the price of cached input tokens; nil means they
	// cost as much as other input tokens (a provider without a cache discount).
	CachedInputPerMTok *float64 `json:"cached_input_per_mtok,omitempty"`
	OutputPerMTok      float64  `json:"output_per_mtok"`
}

// maxPricePerMTok bounds each price so that a cost computed from any token
// count a provider reports stays finite.
const maxPricePerMTok = 1_000_000

// Cost is the USD cost of u at these prices. Negative token counts count as
// zero, and cached input tokens beyond the input tokens are ignored, so a
// provider's inconsistent report never yields a negative cost.
func (p Pricing) Cost(u lt.Usage) float64 {
	input := max(u.InputTokens, 0)
	cached := min(max(u.CachedInputTokens, 0), input)
	output := max(u.OutputTokens, 0)
	cachedRate := p.InputPerMTok
	if p.CachedInputPerMTok != nil {
		cachedRate = *p.CachedInputPerMTok
	}
	return (float64(input-cached)*p.InputPerMTok +
		float64(cached)*cachedRate +
		float64(output)*p.OutputPerMTok) / 1e6
}

// ParsePricing decodes a model spec's "pricing" object strictly. Empty or null
// raw means no pricing was given: it returns nil, nil. A bad object is a
// *FieldError whose Field starts with "pricing". input_per_mtok and
// output_per_mtok are required (a missing price would silently make that part
// free); cached_input_per_mtok is optional.
func ParsePricing(raw json.RawMessage) (*Pricing, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, &FieldError{Field: "pricing", Message: "must be an object"}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, &FieldError{Field: "pricing", Message: "must be a valid JSON object"}
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch k {
		case "input_per_mtok", "cached_input_per_mtok", "output_per_mtok":
		default:
			return nil, &FieldError{Field: "pricing." + k, Message: "unknown field"}
		}
	}
	price := func(name string, required bool) (*float64, error) {
		v, ok := fields[name]
		if !ok {
			if required {
				return nil, &FieldError{Field: "pricing." + name, Message: "required"}
			}
			return nil, nil
		}
		v = bytes.TrimSpace(v)
		if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
			return nil, &FieldError{Field: "pricing." + name, Message: "must be a number"}
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || f < 0 || f > maxPricePerMTok {
			return nil, &FieldError{Field: "pricing." + name, Message: "must be >= 0 and <= 1000000"}
		}
		return &f, nil
	}
	input, err := price("input_per_mtok", true)
	if err != nil {
		return nil, err
	}
	cached, err := price("cached_input_per_mtok", false)
	if err != nil {
		return nil, err
	}
	output, err := price("output_per_mtok", true)
	if err != nil {
		return nil, err
	}
	return &Pricing{InputPerMTok: *input, CachedInputPerMTok: cached, OutputPerMTok: *output}, nil
}

// PricingFor returns the spec's "pricing" override when given, else the
// default, else nil (no known price: cost 0). A pricing object that does not
// parse is an error (a *FieldError from ParsePricing); it is never replaced by
// the default, so a typo in an override is not silently ignored.
func PricingFor(spec lt.ModelSpec) (*Pricing, error) {
	p, err := ParsePricing(spec.Pricing)
	if err != nil {
		return nil, err
	}
	if p != nil {
		return p, nil
	}
	if d, ok := DefaultPricing(spec.Provider, spec.Name); ok {
		return &d, nil
	}
	return nil, nil
}

// CostOf is the USD cost of u under PricingFor(spec) (0 when unknown or the
// pricing is invalid — validation happens when the agent is defined).
func CostOf(spec lt.ModelSpec, u lt.Usage) float64 {
	p, err := PricingFor(spec)
	if err != nil || p == nil {
		return 0
	}
	return p.Cost(u)
}
