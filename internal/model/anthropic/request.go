package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/longhaul-dev/longhaul/internal/model"
)

// buildParams maps a model.Request onto the Messages API (see the package
// doc). An error names the message or tool at fault; the same request would
// fail again, so the caller classifies it as a bad request.
func buildParams(req *model.Request) (sdk.MessageNewParams, error) {
	params := sdk.MessageNewParams{
		Model:     sdk.Model(req.Spec.Name),
		MaxTokens: maxTokens(req.Spec),
	}

	var b conversation
	for i, m := range req.Messages {
		switch m.Role {
		case model.RoleSystem:
			// Every system item (the pinned block, a compaction summary)
			// goes to the top-level system parameter, in order and
			// verbatim: the Messages API has no system role in messages.
			if m.Text != "" {
				params.System = append(params.System, sdk.TextBlockParam{Text: m.Text})
			}
		case model.RoleUser:
			if m.Text != "" {
				b.add(roleUser, sdk.NewTextBlock(m.Text))
			}
		case model.RoleTool:
			if m.CallID == "" {
				return params, fmt.Errorf("messages[%d]: tool result without call_id", i)
			}
			result := sdk.ToolResultBlockParam{ToolUseID: m.CallID}
			if m.Text != "" {
				result.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Text}}}
			}
			if m.IsError {
				result.IsError = param.NewOpt(true)
			}
			// Consecutive results share one user message: that is how the
			// API takes the answers to parallel tool calls.
			b.add(roleUser, sdk.ContentBlockParamUnion{OfToolResult: &result})
		case model.RoleAssistant:
			blocks, err := assistantBlocks(m)
			if err != nil {
				return params, fmt.Errorf("messages[%d]: %w", i, err)
			}
			b.add(roleAssistant, blocks...)
		default:
			return params, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	params.Messages = b.messages()

	for i, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return params, fmt.Errorf("tools[%d] (%s): %w", i, t.Name, err)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	return params, nil
}

// assistantBlocks is an assistant message as content blocks: its thinking
// first (the API requires a tool-use loop to send the last assistant turn's
// thinking back, unmodified and first), then its text, then one tool_use
// block per call.
func assistantBlocks(m model.Message) ([]sdk.ContentBlockParamUnion, error) {
	var blocks []sdk.ContentBlockParamUnion
	if r := m.Reasoning; r != nil && r.Provider == ProviderName {
		// A thinking block is only accepted with the signature the API
		// gave it; readable text without one cannot be sent back.
		if r.Signature != "" {
			blocks = append(blocks, sdk.ContentBlockParamUnion{OfThinking: &sdk.ThinkingBlockParam{Thinking: r.Text, Signature: r.Signature}})
		}
		for _, data := range r.Redacted {
			blocks = append(blocks, sdk.ContentBlockParamUnion{OfRedactedThinking: &sdk.RedactedThinkingBlockParam{Data: data}})
		}
	}
	if m.Text != "" {
		blocks = append(blocks, sdk.NewTextBlock(m.Text))
	}
	for j, c := range m.ToolCalls {
		if c.ID == "" || c.Name == "" {
			return nil, fmt.Errorf("tool_calls[%d]: id and name are required", j)
		}
		input := bytes.TrimSpace(c.Arguments)
		if len(input) == 0 || string(input) == "null" {
			input = []byte("{}")
		}
		if !json.Valid(input) {
			return nil, fmt.Errorf("tool_calls[%d] (%s): arguments are not valid JSON", j, c.Name)
		}
		blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolUse: &sdk.ToolUseBlockParam{
			ID:    c.ID,
			Name:  c.Name,
			Input: json.RawMessage(input),
		}})
	}
	return blocks, nil
}

// toolParam is a function tool with its JSON schema as input_schema. The
// schema is sent as given, with "type": "object" added when it has no type
// (the API requires an object schema); no schema means no arguments.
func toolParam(t model.ToolDef) (sdk.ToolParam, error) {
	if t.Name == "" {
		return sdk.ToolParam{}, fmt.Errorf("name is required")
	}
	schema := bytes.TrimSpace(t.Parameters)
	if len(schema) == 0 || string(schema) == "null" {
		schema = []byte(`{"type":"object","properties":{}}`)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(schema, &fields); err != nil || fields == nil {
		return sdk.ToolParam{}, fmt.Errorf("parameters must be a JSON schema object")
	}
	if _, ok := fields["type"]; !ok {
		fields["type"] = json.RawMessage(`"object"`)
		var err error
		if schema, err = json.Marshal(fields); err != nil {
			return sdk.ToolParam{}, fmt.Errorf("encode parameters: %w", err)
		}
	}
	tool := sdk.ToolParam{
		Name:        t.Name,
		InputSchema: param.Override[sdk.ToolInputSchemaParam](json.RawMessage(schema)),
	}
	if t.Description != "" {
		tool.Description = param.NewOpt(t.Description)
	}
	return tool, nil
}

type role int

const (
	roleUser role = iota
	roleAssistant
)

// conversation builds the alternating messages the API requires: blocks of
// the same role as the previous message join it (tool results and a user's
// words that follow them, or an assistant turn split across items).
type conversation struct {
	roles  []role
	blocks [][]sdk.ContentBlockParamUnion
}

func (c *conversation) add(r role, blocks ...sdk.ContentBlockParamUnion) {
	if len(blocks) == 0 {
		return
	}
	if n := len(c.roles); n > 0 && c.roles[n-1] == r {
		c.blocks[n-1] = append(c.blocks[n-1], blocks...)
		return
	}
	c.roles = append(c.roles, r)
	c.blocks = append(c.blocks, blocks)
}

func (c *conversation) messages() []sdk.MessageParam {
	out := make([]sdk.MessageParam, len(c.roles))
	for i, r := range c.roles {
		if r == roleUser {
			out[i] = sdk.NewUserMessage(c.blocks[i]...)
		} else {
			out[i] = sdk.NewAssistantMessage(c.blocks[i]...)
		}
	}
	return out
}
