package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// block is one content block of the message being streamed.
type block struct {
	kind string // text, thinking, redacted_thinking, tool_use, or another type we ignore
	text strings.Builder
	// thinking blocks
	thinking  strings.Builder
	signature strings.Builder
	data      string // redacted_thinking
	// tool_use blocks
	id, name string
	input    bytes.Buffer
	// startInput is the input the content_block_start carried; the deltas
	// replace it (the API starts a tool_use with "input": {} and streams the
	// real input as input_json_delta).
	startInput string
}

// usage is the token counts of the message, as message_start gives them and
// message_delta updates them (its counts are cumulative totals).
type usage struct {
	input, cacheRead, cacheWrite, output, thinking int64
}

// accumulator turns the events of one stream into a complete response. Any
// event out of the documented order is an error: a response is only ever
// built from a whole, well-formed stream.
type accumulator struct {
	onDelta    func(model.Delta)
	started    bool
	stopped    bool
	model      string
	stopReason string
	usage      usage
	blocks     []*block
}

// streamError is a stream that breaks the protocol of the Messages API.
type streamError struct{ msg string }

func (e *streamError) Error() string { return e.msg }

func malformed(format string, args ...any) error {
	return &streamError{msg: fmt.Sprintf(format, args...)}
}

func (a *accumulator) handle(ev sdk.MessageStreamEventUnion) error {
	if !a.started && ev.Type != "message_start" {
		return malformed("stream event %q before message_start", ev.Type)
	}
	if a.stopped {
		return malformed("stream event %q after message_stop", ev.Type)
	}
	switch ev.Type {
	case "message_start":
		if a.started {
			return malformed("second message_start")
		}
		a.started = true
		a.model = ev.Message.Model
		u := ev.Message.Usage
		a.usage = usage{
			input:      u.InputTokens,
			cacheRead:  u.CacheReadInputTokens,
			cacheWrite: u.CacheCreationInputTokens,
			output:     u.OutputTokens,
			thinking:   u.OutputTokensDetails.ThinkingTokens,
		}
	case "content_block_start":
		if ev.Index != int64(len(a.blocks)) {
			return malformed("content_block_start for block %d, expected %d", ev.Index, len(a.blocks))
		}
		cb := ev.ContentBlock
		b := &block{kind: cb.Type}
		switch cb.Type {
		case "text":
			b.text.WriteString(cb.Text)
			a.deltaText(cb.Text)
		case "thinking":
			b.thinking.WriteString(cb.Thinking)
			b.signature.WriteString(cb.Signature)
			a.deltaReasoning(cb.Thinking)
		case "redacted_thinking":
			b.data = cb.Data
		case "tool_use":
			if cb.ID == "" || cb.Name == "" {
				return malformed("tool_use block %d without id or name", ev.Index)
			}
			b.id, b.name = cb.ID, cb.Name
			b.startInput = cb.JSON.Input.Raw()
		}
		a.blocks = append(a.blocks, b)
	case "content_block_delta":
		b, err := a.block(ev)
		if err != nil {
			return err
		}
		d := ev.Delta
		switch d.Type {
		case "text_delta":
			if b.kind != "text" {
				return malformed("text_delta for a %s block", b.kind)
			}
			b.text.WriteString(d.Text)
			a.deltaText(d.Text)
		case "input_json_delta":
			if b.kind != "tool_use" {
				return malformed("input_json_delta for a %s block", b.kind)
			}
			b.input.WriteString(d.PartialJSON)
		case "thinking_delta":
			if b.kind != "thinking" {
				return malformed("thinking_delta for a %s block", b.kind)
			}
			b.thinking.WriteString(d.Thinking)
			a.deltaReasoning(d.Thinking)
		case "signature_delta":
			if b.kind != "thinking" {
				return malformed("signature_delta for a %s block", b.kind)
			}
			b.signature.WriteString(d.Signature)
		}
		// Other deltas (citations_delta, ...) carry nothing the response
		// keeps; the API may add delta types within a version.
	case "content_block_stop":
		if _, err := a.block(ev); err != nil {
			return err
		}
	case "message_delta":
		a.stopReason = string(ev.Delta.StopReason)
		u := ev.Usage
		// Cumulative totals: each present count replaces the one before.
		if u.JSON.OutputTokens.Valid() {
			a.usage.output = u.OutputTokens
		}
		if u.JSON.InputTokens.Valid() {
			a.usage.input = u.InputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			a.usage.cacheRead = u.CacheReadInputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			a.usage.cacheWrite = u.CacheCreationInputTokens
		}
		if u.JSON.OutputTokensDetails.Valid() {
			a.usage.thinking = u.OutputTokensDetails.ThinkingTokens
		}
	case "message_stop":
		a.stopped = true
	}
	// Unknown event types are ignored: the API's versioning policy allows
	// new ones within a version.
	return nil
}

func (a *accumulator) block(ev sdk.MessageStreamEventUnion) (*block, error) {
	if ev.Index < 0 || ev.Index >= int64(len(a.blocks)) {
		return nil, malformed("%s for unknown block %d", ev.Type, ev.Index)
	}
	return a.blocks[ev.Index], nil
}

func (a *accumulator) deltaText(s string) {
	if a.onDelta != nil && s != "" {
		a.onDelta(model.Delta{Text: s})
	}
}

func (a *accumulator) deltaReasoning(s string) {
	if a.onDelta != nil && s != "" {
		a.onDelta(model.Delta{Reasoning: s})
	}
}

// response is the complete response of a stream that reached message_stop.
func (a *accumulator) response(spec lt.ModelSpec) (*model.Response, error) {
	if !a.stopped {
		return nil, malformed("stream ended before message_stop")
	}
	resp := &model.Response{Model: a.model, StopReason: a.stopReason}
	var text strings.Builder
	var thinking []string
	var signatures []string
	var redacted []string
	for i, b := range a.blocks {
		switch b.kind {
		case "text":
			// Text blocks are parts of one answer (the API splits text at
			// citations), so they join without a separator, exactly as the
			// deltas arrived.
			text.WriteString(b.text.String())
		case "thinking":
			thinking = append(thinking, b.thinking.String())
			signatures = append(signatures, b.signature.String())
		case "redacted_thinking":
			redacted = append(redacted, b.data)
		case "tool_use":
			input, err := toolInput(b)
			if err != nil {
				if a.stopReason == "max_tokens" {
					return nil, &model.Error{Kind: model.KindBadRequest, Message: fmt.Sprintf(
						"anthropic: the response reached max_tokens in the middle of tool call %s (raise max_output_tokens)", b.name)}
				}
				return nil, malformed("tool_use block %d (%s): %v", i, b.name, err)
			}
			resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: b.id, Name: b.name, Arguments: input})
		}
	}
	resp.Text = text.String()
	if len(thinking) > 0 || len(redacted) > 0 {
		r := &model.Reasoning{Provider: ProviderName, Text: strings.Join(thinking, "\n\n"), Redacted: redacted}
		// model.Reasoning holds one signature: one signed thinking block
		// (the form the API returns) can go back; several cannot be
		// rejoined, so they are kept readable only.
		if len(signatures) == 1 {
			r.Signature = signatures[0]
		}
		resp.Reasoning = r
	}
	resp.Usage = lt.Usage{
		InputTokens:       a.usage.input + a.usage.cacheRead + a.usage.cacheWrite,
		CachedInputTokens: a.usage.cacheRead,
		OutputTokens:      a.usage.output,
		ReasoningTokens:   min(a.usage.thinking, a.usage.output),
	}
	resp.CostUSD = model.CostOf(spec, resp.Usage)
	return resp, nil
}

// toolInput is the JSON input of a tool_use block: the streamed deltas, else
// the input its start carried, else {} (a tool called without arguments
// streams no delta, or one empty delta).
func toolInput(b *block) (json.RawMessage, error) {
	in := bytes.TrimSpace(b.input.Bytes())
	if len(in) == 0 {
		in = bytes.TrimSpace([]byte(b.startInput))
	}
	if len(in) == 0 || string(in) == "null" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid(in) {
		return nil, fmt.Errorf("input is not valid JSON")
	}
	return json.RawMessage(bytes.Clone(in)), nil
}
