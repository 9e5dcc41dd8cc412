package openai

import (
	"context"
	"encoding/json"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// respondChat makes one streamed Chat Completions call. OpenAI itself
// (hosted) sends the usage chunk it is asked for, so its stream is complete
// only with it; an OpenAI-compatible server may not support stream_options,
// so its stream is complete at its finish_reason, with whatever usage it
// reported.
func respondChat(ctx context.Context, req *model.Request, opts []option.RequestOption, hosted bool) (*model.Response, error) {
	params, err := chatParams(req, hosted)
	if err != nil {
		return nil, err
	}
	svc := sdk.NewChatCompletionService(opts...)
	stream := svc.NewStreaming(ctx, params)
	defer stream.Close()

	acc := chatAccumulator{onDelta: req.OnDelta, provider: NameCompatible}
	if hosted {
		acc.provider = NameOpenAI
	}
	for stream.Next() {
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	switch {
	case acc.finish == "":
		return nil, &streamEndError{msg: "the stream ended before a finish_reason"}
	case hosted && !acc.usageSeen:
		return nil, &streamEndError{msg: "the stream ended before the usage chunk"}
	}
	return acc.response(req.Position), nil
}

// chatParams maps a request onto a Chat Completions request. System
// messages stay system messages, in place; "developer" is OpenAI's newer name
// for them, and "system" is what every compatible server understands.
func chatParams(req *model.Request, hosted bool) (sdk.ChatCompletionNewParams, error) {
	params := sdk.ChatCompletionNewParams{
		Model: req.Spec.Name,
		// The usage chunk is the only place a stream reports usage.
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	if t := req.Spec.Temperature; t != nil {
		params.Temperature = sdk.Float(*t)
	}
	if n := req.Spec.MaxOutputTokens; n > 0 {
		// OpenAI deprecated max_tokens (its reasoning models refuse it) for
		// max_completion_tokens, which compatible servers do not all know
		// yet; each gets the one it understands.
		if hosted {
			params.MaxCompletionTokens = sdk.Int(int64(n))
		} else {
			params.MaxTokens = sdk.Int(int64(n))
		}
	}

	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case model.RoleSystem:
			params.Messages = append(params.Messages, sdk.SystemMessage(m.Text))
		case model.RoleUser:
			params.Messages = append(params.Messages, sdk.UserMessage(m.Text))
		case model.RoleAssistant:
			if m.Text == "" && len(m.ToolCalls) == 0 {
				continue // nothing the API could be told
			}
			var a sdk.ChatCompletionAssistantMessageParam
			if m.Text != "" {
				a.Content.OfString = sdk.String(m.Text)
			}
			for j := range m.ToolCalls {
				c := &m.ToolCalls[j]
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       c.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: callArguments(c)},
					},
				})
			}
			params.Messages = append(params.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case model.RoleTool:
			if m.CallID == "" {
				return params, badRequest("message %d: a tool result needs the id of its call", i)
			}
			params.Messages = append(params.Messages, sdk.ToolMessage(toolResultText(m), m.CallID))
		default:
			return params, badRequest("message %d: unknown role %q", i, m.Role)
		}
	}

	for i := range req.Tools {
		def := &req.Tools[i]
		schema, err := toolParameters(def)
		if err != nil {
			return params, err
		}
		fn := shared.FunctionDefinitionParam{Name: def.Name, Parameters: schema}
		if def.Description != "" {
			fn.Description = sdk.String(def.Description)
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionToolUnionParam{OfFunction: &sdk.ChatCompletionFunctionToolParam{Function: fn}})
	}
	return params, nil
}

// chatCall is a tool call being streamed.
type chatCall struct {
	id, name string
	args     strings.Builder
}

// chatAccumulator builds a response from the chunks of one stream. Only the
// first choice counts (one is asked for).
type chatAccumulator struct {
	onDelta func(model.Delta)
	// provider names the Reasoning this stream returns.
	provider  string
	text      strings.Builder
	reasoning strings.Builder
	calls     []*chatCall
	// byIndex maps a tool_calls[].index to its call in calls.
	byIndex   map[int64]*chatCall
	finish    string
	model     string
	usage     lt.Usage
	usageSeen bool
}

func (a *chatAccumulator) add(chunk sdk.ChatCompletionChunk) {
	if chunk.Model != "" {
		a.model = chunk.Model
	}
	// With include_usage the usage comes in a last chunk without choices;
	// a server that reports it on every chunk is cumulative, so the last
	// one wins.
	if chunk.JSON.Usage.Valid() {
		a.usage = chatUsage(&chunk.Usage)
		a.usageSeen = true
	}
	for i := range chunk.Choices {
		ch := &chunk.Choices[i]
		if ch.Index != 0 {
			continue
		}
		d := &ch.Delta
		if d.Content != "" {
			a.text.WriteString(d.Content)
			a.delta(model.Delta{Text: d.Content})
		}
		if d.Refusal != "" {
			a.text.WriteString(d.Refusal)
			a.delta(model.Delta{Text: d.Refusal})
		}
		if r := deltaReasoning(d); r != "" {
			a.reasoning.WriteString(r)
			a.delta(model.Delta{Reasoning: r})
		}
		for j := range d.ToolCalls {
			a.addCall(&d.ToolCalls[j])
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
	}
}

// addCall folds one tool call fragment in. Fragments of one call share an
// index; the id and the name come with the first, the arguments in pieces.
// A fragment carrying a different id at a known index starts a new call:
// some servers send every call whole at index 0.
func (a *chatAccumulator) addCall(tc *sdk.ChatCompletionChunkChoiceDeltaToolCall) {
	if a.byIndex == nil {
		a.byIndex = map[int64]*chatCall{}
	}
	c := a.byIndex[tc.Index]
	if c == nil || (tc.ID != "" && c.id != "" && tc.ID != c.id) {
		c = &chatCall{}
		a.calls = append(a.calls, c)
		a.byIndex[tc.Index] = c
	}
	if tc.ID != "" {
		c.id = tc.ID
	}
	// The name comes whole; servers that repeat it on every fragment
	// must not have it doubled.
	if tc.Function.Name != "" && c.name == "" {
		c.name = tc.Function.Name
	}
	c.args.WriteString(tc.Function.Arguments)
}

func (a *chatAccumulator) delta(d model.Delta) {
	if a.onDelta != nil {
		a.onDelta(d)
	}
}

func (a *chatAccumulator) response(position int) *model.Response {
	resp := &model.Response{
		Text:       a.text.String(),
		Model:      a.model,
		StopReason: a.finish,
		Usage:      a.usage,
	}
	for i, c := range a.calls {
		id := c.id
		if id == "" {
			id = fallbackCallID(position, i)
		}
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: id, Name: c.name, Arguments: parseArguments(c.args.String())})
	}
	if a.reasoning.Len() > 0 {
		// Reasoning streamed by a compatible server (DeepSeek, Qwen and
		// gpt-oss behind vLLM or Ollama) is kept readable; Chat Completions
		// has no way to take it back.
		resp.Reasoning = &model.Reasoning{Provider: a.provider, Text: a.reasoning.String()}
	}
	return resp
}

// deltaReasoning is the reasoning text of a delta from servers that stream
// it outside the OpenAI schema: "reasoning_content" (vLLM, DeepSeek,
// llama.cpp) or "reasoning" (Ollama, OpenRouter).
func deltaReasoning(d *sdk.ChatCompletionChunkChoiceDelta) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		// Fields outside the SDK's schema are kept raw (and never marked
		// valid), so their JSON is read here.
		f, ok := d.JSON.ExtraFields[key]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// chatUsage maps the API's usage onto lt.Usage, whose convention is the
// API's own: cached_tokens are part of prompt_tokens, reasoning_tokens part
// of completion_tokens.
func chatUsage(u *sdk.CompletionUsage) lt.Usage {
	return lt.Usage{
		InputTokens:       u.PromptTokens,
		CachedInputTokens: u.PromptTokensDetails.CachedTokens,
		OutputTokens:      u.CompletionTokens,
		ReasoningTokens:   u.CompletionTokensDetails.ReasoningTokens,
	}
}
