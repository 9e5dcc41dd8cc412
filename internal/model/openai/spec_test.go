package openai

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestValidateSpec(t *testing.T) {
	t.Parallel()
	openai := func(edit func(*lt.ModelSpec)) lt.ModelSpec {
		s := lt.ModelSpec{Provider: NameOpenAI, Name: "gpt-5", APIKeyEnv: "OPENAI_API_KEY"}
		edit(&s)
		return s
	}
	compat := func(edit func(*lt.ModelSpec)) lt.ModelSpec {
		s := lt.ModelSpec{Provider: NameCompatible, Name: "qwen2.5-coder", BaseURL: "http://localhost:11434/v1"}
		edit(&s)
		return s
	}
	same := func(*lt.ModelSpec) {}
	tests := []struct {
		name     string
		provider string
		spec     lt.ModelSpec
		field    string // "" means valid
		message  string
	}{
		{name: "openai minimal", provider: NameOpenAI, spec: openai(same)},
		{name: "openai everything", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) {
			s.API = "chat"
			s.BaseURL = "https://proxy.example.com/openai/v1"
			s.Temperature = float(2)
			s.MaxOutputTokens = 4096
			s.ContextWindow = 400_000
			s.Pricing = json.RawMessage(`{"input_per_mtok":1.25,"cached_input_per_mtok":0.125,"output_per_mtok":10}`)
			s.Script = json.RawMessage(`null`)
		})},
		{name: "openai responses", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.API = "responses" })},
		{name: "compatible minimal, no key", provider: NameCompatible, spec: compat(same)},
		{name: "compatible chat", provider: NameCompatible, spec: compat(func(s *lt.ModelSpec) { s.API = "chat"; s.Temperature = float(0) })},

		{name: "other provider", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.Provider = "anthropic" }), field: "provider", message: "must be openai"},
		{name: "no name", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.Name = "  " }), field: "name", message: "required"},
		{name: "compatible without base_url", provider: NameCompatible, spec: compat(func(s *lt.ModelSpec) { s.BaseURL = "" }), field: "base_url", message: "required for openai-compatible"},
		{name: "relative base_url", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.BaseURL = "/v1" }), field: "base_url", message: "absolute http or https URL"},
		{name: "ftp base_url", provider: NameCompatible, spec: compat(func(s *lt.ModelSpec) { s.BaseURL = "ftp://host/v1" }), field: "base_url", message: "absolute http or https URL"},
		{name: "base_url without host", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.BaseURL = "http:///v1" }), field: "base_url", message: "must name a host"},
		{name: "base_url with credentials", provider: NameCompatible, spec: compat(func(s *lt.ModelSpec) { s.BaseURL = "http://user:pw@localhost:8000/v1" }), field: "base_url", message: "credentials"},
		{name: "base_url with query", provider: NameCompatible, spec: compat(func(s *lt.ModelSpec) { s.BaseURL = "http://localhost:8000/v1?key=x" }), field: "base_url", message: "query"},
		{name: "unparsable base_url", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.BaseURL = "http://[::1" }), field: "base_url", message: "valid URL"},
		{name: "unknown api", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.API = "completions" }), field: "api", message: `"responses", "chat" or empty`},
		{name: "responses on a compatible server", provider: NameCompatible, spec: compat(func(s *lt.ModelSpec) { s.API = "responses" }), field: "api", message: "Chat Completions only"},
		{name: "temperature too high", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.Temperature = float(2.5) }), field: "temperature", message: "between 0 and 2"},
		{name: "negative temperature", provider: NameCompatible, spec: compat(func(s *lt.ModelSpec) { s.Temperature = float(-0.1) }), field: "temperature", message: "between 0 and 2"},
		{name: "NaN temperature", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.Temperature = float(math.NaN()) }), field: "temperature", message: "between 0 and 2"},
		{name: "negative max_output_tokens", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.MaxOutputTokens = -1 }), field: "max_output_tokens", message: ">= 0"},
		{name: "negative context_window", provider: NameCompatible, spec: compat(func(s *lt.ModelSpec) { s.ContextWindow = -8 }), field: "context_window", message: ">= 0"},
		{name: "script", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.Script = json.RawMessage(`[{"text":"hi"}]`) }), field: "script", message: "scripted provider"},
		{name: "pricing missing a price", provider: NameOpenAI, spec: openai(func(s *lt.ModelSpec) { s.Pricing = json.RawMessage(`{"input_per_mtok":1}`) }), field: "pricing.output_per_mtok", message: "required"},
		{name: "pricing with a typo", provider: NameCompatible, spec: compat(func(s *lt.ModelSpec) {
			s.Pricing = json.RawMessage(`{"input_per_mtok":0,"output_per_mtok":0,"cache_per_mtok":0}`)
		}), field: "pricing.cache_per_mtok", message: "unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := New(Config{Name: tc.provider}).ValidateSpec(tc.spec)
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *model.FieldError
			require.True(t, errors.As(err, &fe), "want a *model.FieldError, got %T %v", err, err)
			require.Equal(t, tc.field, fe.Field)
			require.Contains(t, fe.Message, tc.message)
		})
	}
}
