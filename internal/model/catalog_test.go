package model

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestDefaultContextWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		provider, name string
		want           int
	}{
		{"openai", "gpt-4o", 128_000},
		{"openai", "gpt-4o-mini-2024-07-18", 128_000},
		{"openai", "gpt-4.1-2025-04-14", 1_047_576},
		{"openai", "gpt-5", 400_000},
		{"openai", "gpt-5-chat-latest", 128_000}, // the chat variant is smaller than gpt-5
		{"openai", "gpt-5.6-terra", 1_050_000},
		{"openai", "o3-2025-04-16", 200_000},
		{"openai", "o1-mini", 128_000},
		{"openai", "gpt-4-0613", 8_192},
		{"openai", "gpt-4-turbo-2024-04-09", 128_000},
		{"anthropic", "claude-opus-4-6", 1_000_000},
		{"anthropic", "claude-sonnet-4-5-20250929", 200_000},
		{"anthropic", "claude-haiku-4-5-20251001", 200_000},
		{"anthropic", "claude-3-7-sonnet-latest", 200_000},
		{"anthropic", "claude-haiku-5-5", 1_000_000},
		// Unknown: 0.
		{"openai", "gpt-7", 0},
		{"openai", "", 0},
		{"openai-compatible", "gpt-4o", 0},
		{"scripted", "demo", 0},
		{"anthropic", "gpt-4o", 0},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, DefaultContextWindow(tt.provider, tt.name), "%s/%s", tt.provider, tt.name)
	}
}

func TestContextWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec lt.ModelSpec
		want int
	}{
		{"spec wins", lt.ModelSpec{Provider: "openai", Name: "gpt-4o", ContextWindow: 64_000}, 64_000},
		{"spec for a local model", lt.ModelSpec{Provider: "openai-compatible", Name: "qwen3:32b", ContextWindow: 32_768}, 32_768},
		{"default", lt.ModelSpec{Provider: "anthropic", Name: "claude-sonnet-4-6"}, 1_000_000},
		{"unset spec value is not a window", lt.ModelSpec{Provider: "openai", Name: "o4-mini", ContextWindow: 0}, 200_000},
		{"negative spec value is not a window", lt.ModelSpec{Provider: "openai", Name: "o4-mini", ContextWindow: -1}, 200_000},
		{"unknown", lt.ModelSpec{Provider: "openai-compatible", Name: "llama3.1:8b"}, 0},
		{"scripted", lt.ModelSpec{Provider: "scripted"}, 0},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ContextWindow(tt.spec), tt.name)
	}
}

func TestLookupModelBoundaries(t *testing.T) {
	t.Parallel()
	table := map[string]map[string]int{"p": {"a": 1, "a-b": 2, "a-b-c": 3}}
	tests := []struct {
		name   string
		want   int
		wantOK bool
	}{
		{"a", 1, true},
		{"a-x", 1, true},
		{"a-b", 2, true},
		{"a-b-2024-01-01", 2, true},
		{"a-b-c", 3, true},
		{"a-b-c-d", 3, true},
		{"ab", 0, false},
		{"a.b", 0, false},
		{"-a", 0, false},
		{"", 0, false},
		{"b", 0, false},
	}
	for _, tt := range tests {
		got, ok := lookupModel(table, "p", tt.name)
		require.Equal(t, tt.wantOK, ok, tt.name)
		require.Equal(t, tt.want, got, tt.name)
	}
	_, ok := lookupModel(table, "other", "a")
	require.False(t, ok)
}

// TestContextWindowsAreSane guards the window table against typos.
func TestContextWindowsAreSane(t *testing.T) {
	t.Parallel()
	for provider, models := range contextWindows {
		require.Contains(t, []string{providerOpenAI, providerAnthropic}, provider)
		for name, w := range models {
			require.GreaterOrEqual(t, w, 4_096, name)
			require.LessOrEqual(t, w, 2_000_000, name)
			require.Equal(t, w, DefaultContextWindow(provider, name), name)
		}
	}
}
