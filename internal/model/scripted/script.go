package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/longhaul-dev/longhaul/internal/model"
)

// Step is one model call of a script. Exactly one kind of answer is set: Text
// and/or ToolCalls (a step with Text and no ToolCalls is the final answer of
// the turn), or Error. Marshalled with encoding/json, a Step reads back
// through Parse as the same Step.
type Step struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Usage overrides the estimated token counts, field by field.
	Usage *Usage `json:"usage,omitempty"`
	// CostUSD, when set, is the cost reported for the call, even when the
	// model spec has pricing.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// DelayMS is how long the model "thinks" before answering (or failing).
	DelayMS int `json:"delay_ms,omitempty"`
	// Error makes the call fail like a provider's HTTP error.
	Error *StepError `json:"error,omitempty"`
}

// ToolCall is a tool call a step asks for.
type ToolCall struct {
	Name string `json:"name"`
	// Arguments is a JSON object, compact and escaped as encoding/json writes
	// it ({} when the script gives none).
	Arguments json.RawMessage `json:"arguments"`
	// ID is the call's id; empty means CallID(position, index).
	ID string `json:"id,omitempty"`
}

// Usage holds the token counts a step reports. A nil count is estimated
// (input and output) or zero (cached input and reasoning).
type Usage struct {
	InputTokens  *int64 `json:"input_tokens,omitempty"`
	OutputTokens *int64 `json:"output_tokens,omitempty"`
	// CachedInputTokens is part of InputTokens, so it needs InputTokens and
	// cannot exceed it.
	CachedInputTokens *int64 `json:"cached_input_tokens,omitempty"`
	// ReasoningTokens is part of OutputTokens, so it needs OutputTokens and
	// cannot exceed it.
	ReasoningTokens *int64 `json:"reasoning_tokens,omitempty"`
}

// StepError is a provider failure a step plays.
type StepError struct {
	// Status is the HTTP status (400-599); it decides the error kind the way
	// model.KindForStatus classifies real providers' statuses.
	Status            int     `json:"status"`
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
	// Message defaults to one naming the status.
	Message string `json:"message,omitempty"`
}

// FieldError is the error Parse returns. It is model.FieldError, so the
// engine's one errors.As serves every provider's configuration errors.
type FieldError = model.FieldError

// Limits on step values. They keep a script from stalling a worker for long
// and keep token and cost sums far from overflowing.
const (
	MaxDelayMS           = 600_000
	MaxTokens            = 1_000_000_000_000
	MaxCostUSD           = 1_000_000
	MaxRetryAfterSeconds = 86_400
)

// CallID is the id of the index-th tool call of the model call at position
// when the script gives none. It depends on nothing else, so a replay gives
// the same ids.
func CallID(position, index int) string {
	return "call_" + strconv.Itoa(position) + "_" + strconv.Itoa(index)
}

// Parse decodes a script strictly: unknown fields, wrong types and bad values
// are refused with a *FieldError naming the path from "script", e.g.
// "script[2].tool_calls[0].name: required". An empty script is refused too
// (a scripted agent with nothing to say is a mistake in the spec); a script
// that is running out during a session is not an error (see Provider).
func Parse(script json.RawMessage) ([]Step, error) {
	if len(bytes.TrimSpace(script)) == 0 {
		return nil, fieldErr("script", "required")
	}
	if !json.Valid(script) {
		return nil, fieldErr("script", "must be valid JSON")
	}
	items, err := array(script, "script", "must be an array of steps")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fieldErr("script", "must have at least one step")
	}
	steps := make([]Step, len(items))
	for i, item := range items {
		if err := parseStep(item, fmt.Sprintf("script[%d]", i), &steps[i]); err != nil {
			return nil, err
		}
	}
	if err := checkCallIDs(steps); err != nil {
		return nil, err
	}
	return steps, nil
}

func parseStep(raw json.RawMessage, path string, s *Step) error {
	fields, err := object(raw, path, "text", "tool_calls", "usage", "cost_usd", "delay_ms", "error")
	if err != nil {
		return err
	}
	if v, ok := fields["error"]; ok {
		// An error step is only a failure: an answer or a usage next to it
		// would be silently dropped, so it is refused instead.
		for _, k := range []string{"text", "tool_calls", "usage", "cost_usd"} {
			if _, ok := fields[k]; ok {
				return fieldErr(path+"."+k, "not allowed in an error step")
			}
		}
		if s.Error, err = parseStepError(v, path+".error"); err != nil {
			return err
		}
	}
	if v, ok := fields["text"]; ok {
		if s.Text, err = str(v, path+".text"); err != nil {
			return err
		}
	}
	if v, ok := fields["tool_calls"]; ok {
		items, err := array(v, path+".tool_calls", "must be an array")
		if err != nil {
			return err
		}
		for j, item := range items {
			c, err := parseToolCall(item, fmt.Sprintf("%s.tool_calls[%d]", path, j))
			if err != nil {
				return err
			}
			s.ToolCalls = append(s.ToolCalls, c)
		}
	}
	if v, ok := fields["usage"]; ok {
		if s.Usage, err = parseUsage(v, path+".usage"); err != nil {
			return err
		}
	}
	if v, ok := fields["cost_usd"]; ok {
		c, err := number(v, path+".cost_usd", 0, MaxCostUSD, "must be >= 0 and <= 1000000")
		if err != nil {
			return err
		}
		s.CostUSD = &c
	}
	if v, ok := fields["delay_ms"]; ok {
		d, err := integer(v, path+".delay_ms", 0, MaxDelayMS, "must be >= 0 and <= 600000")
		if err != nil {
			return err
		}
		s.DelayMS = int(d)
	}
	if s.Error == nil && s.Text == "" && len(s.ToolCalls) == 0 {
		return fieldErr(path, "must have text, tool_calls or error")
	}
	return nil
}

func parseToolCall(raw json.RawMessage, path string) (ToolCall, error) {
	var c ToolCall
	fields, err := object(raw, path, "name", "arguments", "id")
	if err != nil {
		return c, err
	}
	if v, ok := fields["name"]; ok {
		if c.Name, err = str(v, path+".name"); err != nil {
			return c, err
		}
	}
	if c.Name == "" {
		return c, fieldErr(path+".name", "required")
	}
	c.Arguments = json.RawMessage(`{}`)
	if v, ok := fields["arguments"]; ok {
		if kind(v) != '{' {
			return c, fieldErr(path+".arguments", "must be a JSON object")
		}
		// Stored as encoding/json writes a RawMessage (compact, HTML-escaped),
		// so marshalling a Step does not change its arguments.
		if c.Arguments, err = json.Marshal(v); err != nil {
			return c, fieldErr(path+".arguments", "must be a JSON object")
		}
	}
	if v, ok := fields["id"]; ok {
		if c.ID, err = str(v, path+".id"); err != nil {
			return c, err
		}
		if c.ID == "" {
			return c, fieldErr(path+".id", "must not be empty")
		}
	}
	return c, nil
}

func parseUsage(raw json.RawMessage, path string) (*Usage, error) {
	fields, err := object(raw, path, "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")
	if err != nil {
		return nil, err
	}
	count := func(name string) (*int64, error) {
		v, ok := fields[name]
		if !ok {
			return nil, nil
		}
		n, err := integer(v, path+"."+name, 0, MaxTokens, "must be >= 0 and <= 1000000000000")
		if err != nil {
			return nil, err
		}
		return &n, nil
	}
	var u Usage
	if u.InputTokens, err = count("input_tokens"); err != nil {
		return nil, err
	}
	if u.OutputTokens, err = count("output_tokens"); err != nil {
		return nil, err
	}
	if u.CachedInputTokens, err = count("cached_input_tokens"); err != nil {
		return nil, err
	}
	if u.ReasoningTokens, err = count("reasoning_tokens"); err != nil {
		return nil, err
	}
	if err := checkPart(u.CachedInputTokens, u.InputTokens, path+".cached_input_tokens", "input_tokens"); err != nil {
		return nil, err
	}
	if err := checkPart(u.ReasoningTokens, u.OutputTokens, path+".reasoning_tokens", "output_tokens"); err != nil {
		return nil, err
	}
	return &u, nil
}

// checkPart refuses a part count without the whole it belongs to (an
// estimated whole could come out smaller than the part) or larger than it.
func checkPart(part, whole *int64, path, wholeName string) error {
	if part == nil {
		return nil
	}
	if whole == nil {
		return fieldErr(path, "requires "+wholeName)
	}
	if *part > *whole {
		return fieldErr(path, "must be <= "+wholeName)
	}
	return nil
}

func parseStepError(raw json.RawMessage, path string) (*StepError, error) {
	fields, err := object(raw, path, "status", "retry_after_seconds", "message")
	if err != nil {
		return nil, err
	}
	var e StepError
	v, ok := fields["status"]
	if !ok {
		return nil, fieldErr(path+".status", "required")
	}
	status, err := integer(v, path+".status", 400, 599, "must be an HTTP error status (400-599)")
	if err != nil {
		return nil, err
	}
	e.Status = int(status)
	if v, ok := fields["retry_after_seconds"]; ok {
		if e.RetryAfterSeconds, err = number(v, path+".retry_after_seconds", 0, MaxRetryAfterSeconds, "must be >= 0 and <= 86400"); err != nil {
			return nil, err
		}
	}
	if v, ok := fields["message"]; ok {
		if e.Message, err = str(v, path+".message"); err != nil {
			return nil, err
		}
	}
	return &e, nil
}

// checkCallIDs refuses an id used twice in the script, including an id that
// equals one generated for a call without an id: tool results are matched to
// calls by id, and real providers reject a conversation with duplicate ids.
func checkCallIDs(steps []Step) error {
	generated := make(map[string]string)
	for i, s := range steps {
		for j, c := range s.ToolCalls {
			if c.ID == "" {
				generated[CallID(i, j)] = fmt.Sprintf("script[%d].tool_calls[%d]", i, j)
			}
		}
	}
	given := make(map[string]string)
	for i, s := range steps {
		for j, c := range s.ToolCalls {
			if c.ID == "" {
				continue
			}
			path := fmt.Sprintf("script[%d].tool_calls[%d]", i, j)
			if other, ok := generated[c.ID]; ok {
				return fieldErr(path+".id", fmt.Sprintf("%q is the id generated for %s", c.ID, other))
			}
			if other, ok := given[c.ID]; ok {
				return fieldErr(path+".id", fmt.Sprintf("%q is already the id of %s", c.ID, other))
			}
			given[c.ID] = path
		}
	}
	return nil
}
