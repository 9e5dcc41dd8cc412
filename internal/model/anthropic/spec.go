package anthropic

import (
	"strings"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ProviderName is the "provider" of the model specs this package answers, and
// the Provider of the model.Reasoning it returns and accepts back.
const ProviderName = "anthropic"

// DefaultMaxOutputTokens is the max_tokens sent when the spec's
// max_output_tokens is 0. The Messages API requires max_tokens; 8192 is an
// output every current Claude model accepts, and it leaves most of a 200,000
// token window to the input (the API refuses a request whose input plus
// max_tokens exceeds the window). Models with a smaller output limit get
// their own (see maxOutputLimits).
const DefaultMaxOutputTokens = 8192

// maxOutputLimits are the output limits, in tokens, of the models whose
// limit is below DefaultMaxOutputTokens (Anthropic's "Models overview"): the
// Claude 3 Haiku and Opus families answer at most 4096 tokens and refuse a
// larger max_tokens.
var maxOutputLimits = map[string]int64{
	"claude-3-haiku": 4096,
	"claude-3-opus":  4096,
}

// maxTokens is the max_tokens to send for spec.
func maxTokens(spec lt.ModelSpec) int64 {
	if spec.MaxOutputTokens > 0 {
		return int64(spec.MaxOutputTokens)
	}
	name := strings.ToLower(strings.TrimSpace(spec.Name))
	for base, limit := range maxOutputLimits {
		// A dated snapshot ("claude-3-haiku-20240307") or an alias
		// ("claude-3-opus-latest") has its base model's limit.
		if name == base || strings.HasPrefix(name, base+"-") {
			return limit
		}
	}
	return DefaultMaxOutputTokens
}

// ValidateSpec checks a model spec for the anthropic provider. A refusal is a
// *model.FieldError whose Field is relative to the spec's "model" object:
//
//   - name is required;
//   - base_url, when given, is an absolute http or https URL without
//     credentials, query or fragment (keys never go in a spec);
//   - api must be empty (it selects an OpenAI API);
//   - temperature is refused: the Messages API version that the official SDK
//     speaks (2026-10-21) answers 400 to any sampling parameter, even at its
//     default, so a spec carrying one would fail every call;
//   - max_output_tokens and context_window are >= 0 (0: the defaults);
//   - script is refused (it belongs to the scripted provider);
//   - pricing, when given, is valid (model.ParsePricing).
func (p *Provider) ValidateSpec(spec lt.ModelSpec) error {
	return validateSpec(spec)
}

func validateSpec(spec lt.ModelSpec) error {
	if spec.Provider != "" && spec.Provider != ProviderName {
		return &model.FieldError{Field: "provider", Message: "must be " + ProviderName}
	}
	if strings.TrimSpace(spec.Name) == "" {
		return &model.FieldError{Field: "name", Message: "required (an Anthropic model name, e.g. claude-sonnet-4-5)"}
	}
	if spec.BaseURL != "" {
		if msg := model.CheckBaseURL(spec.BaseURL); msg != "" {
			return &model.FieldError{Field: "base_url", Message: msg}
		}
	}
	if spec.API != "" {
		return &model.FieldError{Field: "api", Message: "must be empty for the anthropic provider (it always uses the Messages API)"}
	}
	if spec.Temperature != nil {
		return &model.FieldError{Field: "temperature", Message: "not supported: the Messages API version used by the official SDK (2026-10-21) refuses sampling parameters"}
	}
	return model.ValidateLimits(spec)
}

// DefaultURL is where Anthropic's API is when a spec gives no base_url.
const DefaultURL = "https://api.anthropic.com"

// DefaultBaseURL implements model.Endpoint.
func (p *Provider) DefaultBaseURL(lt.ModelSpec) string { return DefaultURL }
