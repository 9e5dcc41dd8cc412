package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

const goodConfig = `# agents registered at start
agents:
  - name: researcher
    spec:
      model:
        provider: scripted
        name: demo
        script:
          - text: "Found it."
            usage: {input_tokens: 900, output_tokens: 40}
      instructions: Be brief.
      tools:
        - name: shell
          effect: read
      max_steps: 5
`

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	cf, err := loadConfig(writeFile(t, "longhaul.yaml", goodConfig))
	require.NoError(t, err)
	require.Len(t, cf.Agents, 1)
	a := cf.Agents[0]
	require.Equal(t, "researcher", a.Name)
	require.Equal(t, "scripted", a.Spec.Model.Provider)
	require.JSONEq(t, `[{"text":"Found it.","usage":{"input_tokens":900,"output_tokens":40}}]`, string(a.Spec.Model.Script))
	require.Equal(t, []lt.ToolSpec{{Name: "shell", Effect: lt.EffectRead}}, a.Spec.Tools)
	require.Equal(t, 5, a.Spec.MaxSteps)
	require.Equal(t, 14, cf.doc.lineOf("agents[0].spec.tools[0].effect"))
	require.Equal(t, 14, cf.doc.lineOf("agents[0].spec.tools[0].effect.no.such.field"), "the nearest known field's line")
}

func TestConfigErrorsNameFileLineAndField(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, file, content, want string
	}{
		{
			name: "unknown field", file: "longhaul.yaml",
			content: "agents:\n  - name: a\n    spec:\n      model: {provider: scripted}\n      tools:\n        - name: shell\n          efect: read\n",
			want:    `longhaul.yaml:7: agents[0].spec.tools[0].efect: unknown field "efect" (did you mean "effect"?)`,
		},
		{
			name: "unknown top-level key", file: "longhaul.yaml",
			content: "agent:\n  - name: a\n",
			want:    `longhaul.yaml:1: agent: unknown field "agent" (did you mean "agents"?)`,
		},
		{
			name: "wrong type", file: "longhaul.yaml",
			content: "agents:\n  - name: a\n    spec:\n      model: {provider: scripted}\n      max_steps: ten\n",
			want:    `longhaul.yaml:5: agents[0].spec.max_steps: must be an integer, not the string "ten"`,
		},
		{
			name: "list expected", file: "longhaul.yaml",
			content: "agents:\n  name: a\n",
			want:    `longhaul.yaml:1: agents: must be a list, not an object`,
		},
		{
			name: "missing name", file: "longhaul.yaml",
			content: "agents:\n  - spec:\n      model: {provider: scripted}\n",
			want:    `longhaul.yaml:2: agents[0].name: required`,
		},
		{
			name: "missing spec", file: "longhaul.yaml",
			content: "agents:\n  - name: a\n",
			want:    `longhaul.yaml:2: agents[0].spec.model.provider: required`,
		},
		{
			name: "duplicate agent", file: "longhaul.yaml",
			content: "agents:\n  - name: a\n    spec: {model: {provider: scripted}}\n  - name: a\n    spec: {model: {provider: scripted}}\n",
			want:    `longhaul.yaml:4: agents[1].name: agent "a" of project default is already defined by agents[0]`,
		},
		{
			name: "duplicate key", file: "longhaul.yaml",
			content: "agents: []\nagents: []\n",
			want:    `longhaul.yaml:2: agents: defined twice`,
		},
		{
			name: "two documents", file: "longhaul.yaml",
			content: "agents: []\n---\nagents: []\n",
			want:    `more than one YAML document`,
		},
		{
			name: "yaml syntax", file: "longhaul.yaml",
			content: "agents: [\n",
			want:    `longhaul.yaml: `,
		},
		{
			name: "empty", file: "longhaul.yaml",
			content: "# nothing\n",
			want:    `longhaul.yaml: the file is empty`,
		},
		{
			name: "json unknown field", file: "longhaul.json",
			content: `{"agents": [{"name": "a", "spec": {"model": {"provider": "scripted"}, "tool": []}}]}`,
			want:    `longhaul.json: agents[0].spec.tool: unknown field "tool" (did you mean "tools"?)`,
		},
		{
			name: "json syntax", file: "longhaul.json",
			content: "{\n  \"agents\": [\n}\n",
			want:    `longhaul.json:3: invalid character '}'`,
		},
		{
			name: "json trailing data", file: "longhaul.json",
			content: "{\"agents\": []}\n{}\n",
			want:    `longhaul.json:2: unexpected data after the JSON value`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := decodeDocument(tt.file, []byte(tt.content), new(serverConfig))
			if err == nil {
				// Checks beyond the shape are loadConfig's.
				_, err = loadConfig(writeFile(t, tt.file, tt.content))
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestDecodeYAMLScalarsBecomeJSON(t *testing.T) {
	t.Parallel()
	var spec lt.AgentSpec
	_, err := decodeDocument("spec.yaml", []byte(`
model:
  provider: scripted
  temperature: 0.5
  script:
    - tool_calls:
        - name: write_file
          arguments: {path: "a.txt", content: 2024-01-02, big: 0x10, flag: yes, none: ~}
`), &spec)
	require.NoError(t, err)
	require.InDelta(t, 0.5, *spec.Model.Temperature, 1e-9)
	// Dates stay text; YAML's other integer forms become JSON numbers.
	var script []struct {
		ToolCalls []struct {
			Arguments map[string]any `json:"arguments"`
		} `json:"tool_calls"`
	}
	require.NoError(t, json.Unmarshal(spec.Model.Script, &script))
	args := script[0].ToolCalls[0].Arguments
	require.Equal(t, "2024-01-02", args["content"])
	require.EqualValues(t, 16, args["big"])
	require.Equal(t, "yes", args["flag"], "YAML 1.2: yes is a string")
	require.Nil(t, args["none"])
}
