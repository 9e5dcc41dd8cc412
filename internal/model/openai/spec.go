package openai

import (
	"math"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ValidateSpec checks a model spec for this provider. A refusal is a
// *model.FieldError whose Field is relative to the spec's "model" object:
//
//   - provider, when given, is this provider's name;
//   - name is required;
//   - base_url is an absolute http or https URL without credentials, query
//     or fragment (keys never go in a spec); it is required for
//     openai-compatible, which has no default address;
//   - api is "", "responses" or "chat"; openai-compatible servers speak Chat
//     Completions only, so "responses" is refused there;
//   - temperature is between 0 and 2 (the range both APIs accept);
//   - max_output_tokens and context_window are >= 0 (0: not set);
//   - script is refused (it belongs to the scripted provider);
//   - pricing, when given, is valid (model.ParsePricing).
func (p *Provider) ValidateSpec(spec lt.ModelSpec) error {
	return p.validateSpec(spec)
}

func (p *Provider) validateSpec(spec lt.ModelSpec) error {
	if spec.Provider != "" && spec.Provider != p.name {
		return &model.FieldError{Field: "provider", Message: "must be " + p.name}
	}
	if strings.TrimSpace(spec.Name) == "" {
		return &model.FieldError{Field: "name", Message: "required (the model's name, e.g. gpt-5 or llama3.2)"}
	}
	switch {
	case spec.BaseURL != "":
		if msg := model.CheckBaseURL(spec.BaseURL); msg != "" {
			return &model.FieldError{Field: "base_url", Message: msg}
		}
	case p.name == NameCompatible:
		return &model.FieldError{Field: "base_url", Message: "required for openai-compatible (the server's address, e.g. http://localhost:11434/v1)"}
	}
	switch spec.API {
	case "", apiChat:
	case apiResponses:
		if p.name == NameCompatible {
			return &model.FieldError{Field: "api", Message: `openai-compatible speaks Chat Completions only: use "chat" or leave it empty`}
		}
	default:
		return &model.FieldError{Field: "api", Message: `must be "responses", "chat" or empty`}
	}
	if t := spec.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		return &model.FieldError{Field: "temperature", Message: "must be between 0 and 2"}
	}
	return model.ValidateLimits(spec)
}

// DefaultURL is where OpenAI's API is when a spec gives no base_url.
const DefaultURL = "https://api.openai.com/v1"

// DefaultBaseURL implements model.Endpoint: OpenAI's API for "openai",
// nothing for "openai-compatible" (its specs give base_url).
func (p *Provider) DefaultBaseURL(lt.ModelSpec) string {
	if p.name == NameOpenAI {
		return DefaultURL
	}
	return ""
}
