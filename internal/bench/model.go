package bench

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// benchProvider is the provider name the scenarios' agent specs use.
const benchProvider = "bench"

// benchModel is the scenarios' model. Unlike the scripted provider, whose
// script grows with the session, its spec is the same size whatever the
// number of steps (a long session must not pay for a long spec), and it
// can answer after a latency, like a real model. The latency is real time:
// a benchmark measures the wall clock, and nothing here is asserted on it.
type benchModel struct {
	latency time.Duration
	// next answers a step's call; it is called with the model's lock held,
	// so it may keep state across calls, unless stateless says it keeps
	// none: then calls answer at once, as a real model's would, rather
	// than one after another (a thousand calls ending together queued on
	// the lock for tens of milliseconds, which the engine does not cost).
	next      func(req *model.Request) *model.Response
	stateless bool

	mu sync.Mutex
}

// Respond implements model.Provider. A call without tools is a compaction's
// summary request: it gets a summary of constant size.
func (m *benchModel) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	if m.latency > 0 {
		t := time.NewTimer(m.latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
	usage := lt.Usage{InputTokens: 100, OutputTokens: 10}
	if len(req.Tools) == 0 {
		return &model.Response{Text: "The agent made numbered tool calls; each succeeded.", Usage: usage}, nil
	}
	var resp *model.Response
	if m.stateless {
		resp = m.next(req)
	} else {
		m.mu.Lock()
		resp = m.next(req)
		m.mu.Unlock()
	}
	resp.Usage = usage
	return resp, nil
}

// answer is a final answer, which ends the turn.
func answer(text string) *model.Response {
	return &model.Response{Text: text}
}

// call is a response calling tool with args. Each call's arguments differ
// from the previous one's (the caller numbers them): the same call in a row
// is a loop the engine stops.
func call(tool string, args map[string]any) *model.Response {
	raw, _ := json.Marshal(args) // maps of strings and ints always marshal
	return &model.Response{ToolCalls: []model.ToolCall{{Name: tool, Arguments: raw}}}
}

// noopPlan calls the no-op tool at every position below steps-1, then
// answers: steps steps in all, like stepsScript, for any number of sessions
// (the position is the session's own). It keeps no state.
func noopPlan(steps int) func(*model.Request) *model.Response {
	return func(req *model.Request) *model.Response {
		if req.Position >= steps-1 {
			return answer("done")
		}
		return call("noop", map[string]any{"i": req.Position})
	}
}
