package scripted

import (
	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Token estimate. A step without usage reports counts estimated the way the
// usual rule of thumb does, about four bytes of English per token: a length
// of n bytes is ceil(n/4) tokens, and at least 1 (no real call is free of
// tokens). It is a plausible figure for budgets and reports, not a tokenizer.
//
//   - input: the bytes of the request's messages (each message's text, and
//     the name and arguments of each tool call it carries);
//   - output: the bytes of the step's text and of its tool calls' arguments.
//
// Cached input and reasoning tokens are 0 unless the step gives them.

func estimateTokens(n int) int64 {
	return max(1, (int64(n)+3)/4)
}

func estimateInput(msgs []model.Message) int64 {
	n := 0
	for _, m := range msgs {
		n += len(m.Text)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	return estimateTokens(n)
}

func estimateOutput(s *Step) int64 {
	n := len(s.Text)
	for _, c := range s.ToolCalls {
		n += len(c.Arguments)
	}
	return estimateTokens(n)
}

// stepUsage is the step's usage with every count it leaves out estimated
// (and then marked Estimated; cached input and reasoning default to 0).
// Only token counts are set; the cost travels in model.Response.CostUSD.
func stepUsage(s *Step, msgs []model.Message) lt.Usage {
	var given Usage
	if s.Usage != nil {
		given = *s.Usage
	}
	u := lt.Usage{}
	if given.InputTokens != nil {
		u.InputTokens = *given.InputTokens
	} else {
		u.InputTokens, u.Estimated = estimateInput(msgs), true
	}
	if given.OutputTokens != nil {
		u.OutputTokens = *given.OutputTokens
	} else {
		u.OutputTokens, u.Estimated = estimateOutput(s), true
	}
	if given.CachedInputTokens != nil {
		u.CachedInputTokens = *given.CachedInputTokens
	}
	if given.ReasoningTokens != nil {
		u.ReasoningTokens = *given.ReasoningTokens
	}
	return u
}
