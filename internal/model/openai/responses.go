package openai

import (
	"context"
	"slices"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// respondResponses makes one streamed Responses API call.
func respondResponses(ctx context.Context, req *model.Request, opts []option.RequestOption) (*model.Response, error) {
	params, err := responsesParams(req)
	if err != nil {
		return nil, err
	}
	svc := responses.NewResponseService(opts...)
	stream := svc.NewStreaming(ctx, params)
	defer stream.Close()

	acc := responsesAccumulator{onDelta: req.OnDelta, done: map[int64]responses.ResponseOutputItemUnion{}}
	for stream.Next() {
		finished, err := acc.add(stream.Current())
		if err != nil {
			return nil, err
		}
		if finished {
			return acc.response(), nil
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return nil, &streamEndError{msg: "the stream ended before response.completed"}
}

// responsesParams maps a request onto a Responses API request.
//
// The call is stateless: the whole context goes in every request (the
// journal is the memory, never the provider), so nothing is stored at OpenAI
// ("store": false) and reasoning is carried as encrypted content
// ("include": ["reasoning.encrypted_content"]), which is how the API accepts
// reasoning back without stored state.
func responsesParams(req *model.Request) (responses.ResponseNewParams, error) {
	params := responses.ResponseNewParams{
		Model:   req.Spec.Name,
		Store:   sdk.Bool(false),
		Include: []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
	}
	if t := req.Spec.Temperature; t != nil {
		params.Temperature = sdk.Float(*t)
	}
	if n := req.Spec.MaxOutputTokens; n > 0 {
		params.MaxOutputTokens = sdk.Int(int64(n))
	}

	msgs := req.Messages
	// The leading system messages (the pinned block, a compaction summary)
	// are the instructions, verbatim and in order; a system message later in
	// the conversation keeps its place as a system input message.
	var instructions []string
	for len(msgs) > 0 && msgs[0].Role == model.RoleSystem {
		instructions = append(instructions, msgs[0].Text)
		msgs = msgs[1:]
	}
	if len(instructions) > 0 {
		params.Instructions = sdk.String(strings.Join(instructions, "\n\n"))
	}

	input := responses.ResponseInputParam{}
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case model.RoleSystem:
			input = append(input, responses.ResponseInputItemParamOfMessage(m.Text, responses.EasyInputMessageRoleSystem))
		case model.RoleUser:
			input = append(input, responses.ResponseInputItemParamOfMessage(m.Text, responses.EasyInputMessageRoleUser))
		case model.RoleAssistant:
			input = appendAssistantItems(input, m)
		case model.RoleTool:
			if m.CallID == "" {
				return params, badRequest("message %d: a tool result needs the id of its call", len(req.Messages)-len(msgs)+i)
			}
			input = append(input, responses.ResponseInputItemUnionParam{
				OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
					CallID: sdk.String(m.CallID),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: sdk.String(toolResultText(m))},
				},
			})
		default:
			return params, badRequest("message %d: unknown role %q", len(req.Messages)-len(msgs)+i, m.Role)
		}
	}
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}

	for i := range req.Tools {
		def := &req.Tools[i]
		schema, err := toolParameters(def)
		if err != nil {
			return params, err
		}
		tool := &responses.FunctionToolParam{
			Name:       def.Name,
			Parameters: schema,
			// Strict mode demands every property be required and no
			// additional properties, which a tool's schema need not
			// satisfy; the tool validates its arguments itself.
			Strict: sdk.Bool(false),
		}
		if def.Description != "" {
			tool.Description = sdk.String(def.Description)
		}
		params.Tools = append(params.Tools, responses.ToolUnionParam{OfFunction: tool})
	}
	return params, nil
}

// reasoningInput is a reasoning item sent back to the Responses API. It is
// sent without its id: items are never stored at OpenAI (store is false),
// and an id would make the API demand the original item that followed the
// reasoning ("provided without its required following item"), which cannot
// be matched since function calls and messages are sent back without their
// item ids. The encrypted content carries the reasoning itself.
type reasoningInput struct {
	Type             string                 `json:"type"`
	Summary          []reasoningSummaryText `json:"summary"`
	EncryptedContent string                 `json:"encrypted_content"`
}

type reasoningSummaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// appendAssistantItems appends an assistant message as the API returned it:
// its reasoning (only OpenAI's own, and only with its encrypted content,
// which is what makes it usable statelessly), its text, then one
// function_call item per tool call, with the call's id as call_id.
func appendAssistantItems(input responses.ResponseInputParam, m *model.Message) responses.ResponseInputParam {
	if r := m.Reasoning; r != nil && r.Provider == NameOpenAI && r.Encrypted != "" {
		item := reasoningInput{Type: "reasoning", Summary: []reasoningSummaryText{}, EncryptedContent: r.Encrypted}
		if r.Text != "" {
			item.Summary = append(item.Summary, reasoningSummaryText{Type: "summary_text", Text: r.Text})
		}
		override := param.Override[responses.ResponseReasoningItemParam](item)
		input = append(input, responses.ResponseInputItemUnionParam{OfReasoning: &override})
	}
	if m.Text != "" {
		input = append(input, responses.ResponseInputItemParamOfMessage(m.Text, responses.EasyInputMessageRoleAssistant))
	}
	for i := range m.ToolCalls {
		c := &m.ToolCalls[i]
		input = append(input, responses.ResponseInputItemParamOfFunctionCall(callArguments(c), c.ID, c.Name))
	}
	return input
}

// responsesAccumulator builds a response from the events of one stream.
type responsesAccumulator struct {
	onDelta func(model.Delta)
	// done holds the output items of response.output_item.done by
	// output_index: the API documents them as the final form of each item
	// (a reasoning item's encrypted content in particular).
	done  map[int64]responses.ResponseOutputItemUnion
	model string
	final *responses.Response
}

// add takes one event; finished is true on the terminal event of a
// successful stream.
func (a *responsesAccumulator) add(ev responses.ResponseStreamEventUnion) (finished bool, err error) {
	switch ev.Type {
	case "response.created", "response.in_progress":
		if ev.Response.Model != "" {
			a.model = ev.Response.Model
		}
	case "response.output_text.delta", "response.refusal.delta":
		a.delta(model.Delta{Text: ev.Delta})
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		a.delta(model.Delta{Reasoning: ev.Delta})
	case "response.output_item.done":
		a.done[ev.OutputIndex] = ev.Item
	case "response.completed", "response.incomplete":
		r := ev.Response
		a.final = &r
		return true, nil
	case "response.failed":
		e := ev.Response.Error
		msg := e.Message
		if msg == "" {
			msg = "the response failed"
		}
		return false, &apiStreamError{code: string(e.Code), msg: msg}
	case "error":
		msg := ev.Message
		if msg == "" {
			msg = "error event in the stream"
		}
		return false, &apiStreamError{code: ev.Code, msg: msg}
	}
	return false, nil
}

func (a *responsesAccumulator) delta(d model.Delta) {
	if a.onDelta != nil && (d.Text != "" || d.Reasoning != "") {
		a.onDelta(d)
	}
}

// response is the complete response, after the terminal event.
func (a *responsesAccumulator) response() *model.Response {
	f := a.final
	// Items from output_item.done come first; the terminal event's output
	// fills any index the stream did not report on its own.
	items := make(map[int64]responses.ResponseOutputItemUnion, len(a.done)+len(f.Output))
	for i, item := range f.Output {
		items[int64(i)] = item
	}
	for i, item := range a.done {
		items[i] = item
	}
	indexes := make([]int64, 0, len(items))
	for i := range items {
		indexes = append(indexes, i)
	}
	slices.Sort(indexes)

	resp := &model.Response{Model: f.Model}
	if resp.Model == "" {
		resp.Model = a.model
	}
	var texts, thoughts []string
	for _, i := range indexes {
		item := items[i]
		switch item.Type {
		case "message":
			var b strings.Builder
			for _, part := range item.AsMessage().Content {
				switch part.Type {
				case "output_text":
					b.WriteString(part.Text)
				case "refusal":
					b.WriteString(part.Refusal)
				}
			}
			if b.Len() > 0 {
				texts = append(texts, b.String())
			}
		case "function_call":
			fc := item.AsFunctionCall()
			resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: fc.CallID, Name: fc.Name, Arguments: parseArguments(fc.Arguments)})
		case "reasoning":
			r := item.AsReasoning()
			if text := reasoningText(&r); text != "" {
				thoughts = append(thoughts, text)
			}
			if resp.Reasoning == nil {
				resp.Reasoning = &model.Reasoning{Provider: NameOpenAI}
			}
			// model.Reasoning holds one item; the last one is the
			// reasoning that led to this response's final items.
			if r.EncryptedContent != "" {
				resp.Reasoning.ID = r.ID
				resp.Reasoning.Encrypted = r.EncryptedContent
			}
		}
	}
	resp.Text = strings.Join(texts, "\n\n")
	if resp.Reasoning != nil {
		resp.Reasoning.Text = strings.Join(thoughts, "\n\n")
		if resp.Reasoning.Text == "" && resp.Reasoning.Encrypted == "" {
			resp.Reasoning = nil
		}
	}

	resp.StopReason = string(f.Status)
	if f.Status == responses.ResponseStatusIncomplete && f.IncompleteDetails.Reason != "" {
		resp.StopReason = f.IncompleteDetails.Reason
	}
	if resp.StopReason == "" {
		resp.StopReason = string(responses.ResponseStatusCompleted)
	}
	resp.Usage = responsesUsage(&f.Usage)
	return resp
}

// reasoningText is a reasoning item's readable text: its summaries, or, from
// models that return it, its reasoning text.
func reasoningText(r *responses.ResponseReasoningItem) string {
	var parts []string
	for _, s := range r.Summary {
		if s.Text != "" {
			parts = append(parts, s.Text)
		}
	}
	if len(parts) == 0 {
		for _, c := range r.Content {
			if c.Text != "" {
				parts = append(parts, c.Text)
			}
		}
	}
	return strings.Join(parts, "\n\n")
}

// responsesUsage maps the API's usage onto lt.Usage, whose convention is the
// API's own: cached_tokens are part of input_tokens, reasoning_tokens part of
// output_tokens.
func responsesUsage(u *responses.ResponseUsage) lt.Usage {
	return lt.Usage{
		InputTokens:       u.InputTokens,
		CachedInputTokens: u.InputTokensDetails.CachedTokens,
		OutputTokens:      u.OutputTokens,
		ReasoningTokens:   u.OutputTokensDetails.ReasoningTokens,
	}
}
