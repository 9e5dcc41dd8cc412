package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestValidateSpec(t *testing.T) {
	t.Parallel()
	valid := func() lt.ModelSpec {
		return lt.ModelSpec{Provider: "anthropic", Name: "claude-sonnet-4-5", APIKeyEnv: "ANTHROPIC_API_KEY"}
	}
	temp := 0.2
	tests := []struct {
		name  string
		edit  func(*lt.ModelSpec)
		field string // "" means valid
	}{
		{"minimal", func(*lt.ModelSpec) {}, ""},
		{"everything", func(s *lt.ModelSpec) {
			s.BaseURL = "https://gateway.example.com/anthropic"
			s.MaxOutputTokens = 4096
			s.ContextWindow = 200000
			s.Pricing = json.RawMessage(`{"input_per_mtok": 3, "cached_input_per_mtok": 0.3, "output_per_mtok": 15}`)
		}, ""},
		{"http base url", func(s *lt.ModelSpec) { s.BaseURL = "http://127.0.0.1:4000" }, ""},
		{"null script", func(s *lt.ModelSpec) { s.Script = json.RawMessage(`null`) }, ""},
		{"other provider", func(s *lt.ModelSpec) { s.Provider = "openai" }, "provider"},
		{"no name", func(s *lt.ModelSpec) { s.Name = "" }, "name"},
		{"blank name", func(s *lt.ModelSpec) { s.Name = "  " }, "name"},
		{"relative base url", func(s *lt.ModelSpec) { s.BaseURL = "/v1" }, "base_url"},
		{"base url without scheme", func(s *lt.ModelSpec) { s.BaseURL = "gateway.example.com" }, "base_url"},
		{"ftp base url", func(s *lt.ModelSpec) { s.BaseURL = "ftp://gateway.example.com" }, "base_url"},
		{"base url without host", func(s *lt.ModelSpec) { s.BaseURL = "https://" }, "base_url"},
		{"base url with credentials", func(s *lt.ModelSpec) { s.BaseURL = "https://user:secret@gateway.example.com" }, "base_url"},
		{"base url with query", func(s *lt.ModelSpec) { s.BaseURL = "https://gateway.example.com/?key=1" }, "base_url"},
		{"unparseable base url", func(s *lt.ModelSpec) { s.BaseURL = "https://[::1" }, "base_url"},
		{"api", func(s *lt.ModelSpec) { s.API = "chat" }, "api"},
		{"temperature", func(s *lt.ModelSpec) { s.Temperature = &temp }, "temperature"},
		{"negative max output", func(s *lt.ModelSpec) { s.MaxOutputTokens = -1 }, "max_output_tokens"},
		{"negative window", func(s *lt.ModelSpec) { s.ContextWindow = -1 }, "context_window"},
		{"script", func(s *lt.ModelSpec) { s.Script = json.RawMessage(`[{"text":"hi"}]`) }, "script"},
		{"pricing missing output", func(s *lt.ModelSpec) { s.Pricing = json.RawMessage(`{"input_per_mtok": 3}`) }, "pricing.output_per_mtok"},
		{"pricing not an object", func(s *lt.ModelSpec) { s.Pricing = json.RawMessage(`3`) }, "pricing"},
	}
	p := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := valid()
			tt.edit(&spec)
			err := p.ValidateSpec(spec)
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var fe *model.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tt.field, fe.Field)
			require.NotEmpty(t, fe.Message)
			require.NotContains(t, fe.Error(), "secret")
		})
	}
}
