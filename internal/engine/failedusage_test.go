package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// slowFirstProvider is a provider whose first call is sent and then runs
// into the engine's per-call timeout (a long answer still streaming); the
// next one answers.
type slowFirstProvider struct{ calls atomic.Int64 }

func (p *slowFirstProvider) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	if p.calls.Add(1) == 1 {
		<-ctx.Done()
		return nil, model.TransportError(ctx.Err(), func(what, detail string) string { return what + ": " + detail })
	}
	return &model.Response{Text: "done", Usage: lt.Usage{InputTokens: 100, OutputTokens: 10}, CostUSD: 0.01}, nil
}

// TestTimedOutCallCountsItsInput: a model call sent to the provider that
// runs into the per-call timeout (ModelTimeout) is retried, and counts its
// input against the token and cost budgets, as an abandoned call does
// (abandonedUsage): before, it counted nothing, so a model that answered
// at length until the timeout spent for free, once per retry.
func TestTimedOutCallCountsItsInput(t *testing.T) {
	p := &slowFirstProvider{}
	h := newHarnessConfigured(t, p, func(h *harness) store.Store { return h.store }, func(c *engine.Config) {
		c.ModelTimeout = 50 * time.Millisecond
	})
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: []byte(`[{"text":"unused"}]`)}, Instructions: "Be useful."}, &lt.Budget{MaxTokens: 100000})
	got := h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, got.Status, "journal:\n%s", journalText(t, h, s.ID))
	reqs := events(t, h, s.ID, lt.EventModelRequested)
	require.Len(t, reqs, 2)
	require.Len(t, events(t, h, s.ID, lt.EventModelFailed), 1)
	timedOut := int64(data[lt.ModelRequestedData](t, reqs[0]).ContextTokens)
	// The answered call reported 100 input tokens; the timed-out one was
	// sent with timedOut tokens of context.
	require.GreaterOrEqual(t, got.Usage.InputTokens, 100+timedOut,
		"the timed-out request counts at least its input, as an abandoned one does; journal:\n%s", journalText(t, h, s.ID))
}

// brokenStreamProvider streams part of an answer and breaks off on its
// first call (a server error mid-stream), refuses its second with a rate
// limit (nothing worked on), and answers its third.
type brokenStreamProvider struct{ calls atomic.Int64 }

func (p *brokenStreamProvider) Respond(_ context.Context, req *model.Request) (*model.Response, error) {
	switch p.calls.Add(1) {
	case 1:
		req.OnDelta(model.Delta{Text: "a long answer that the stream cut in the middle of its second sentence"})
		return nil, &model.Error{Kind: model.KindServer, Message: "incomplete response"}
	case 2:
		return nil, &model.Error{Kind: model.KindRateLimited, Status: 429, Message: "slow down"}
	}
	return &model.Response{Text: "done", Usage: lt.Usage{InputTokens: 100, OutputTokens: 10}, CostUSD: 0.01}, nil
}

// TestFailedCallCountsWhatItStreamed: a call whose stream broke off counts
// its input and the output it streamed; a call refused before it was
// worked on (a rate limit) counts only itself.
func TestFailedCallCountsWhatItStreamed(t *testing.T) {
	p := &brokenStreamProvider{}
	h := newHarnessConfigured(t, p, func(h *harness) store.Store { return h.store }, func(*engine.Config) {})
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: []byte(`[{"text":"unused"}]`)}, Instructions: "Be useful."}, nil)
	got := h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, got.Status, "journal:\n%s", journalText(t, h, s.ID))
	failed := events(t, h, s.ID, lt.EventModelFailed)
	require.Len(t, failed, 2)
	reqs := events(t, h, s.ID, lt.EventModelRequested)
	broken := data[lt.ModelFailedData](t, failed[0])
	require.NotNil(t, broken.Usage, "the broken stream counts")
	require.Equal(t, int64(data[lt.ModelRequestedData](t, reqs[0]).ContextTokens), broken.Usage.InputTokens)
	require.Positive(t, broken.Usage.OutputTokens, "what it streamed")
	require.True(t, broken.Usage.Estimated)
	require.Nil(t, data[lt.ModelFailedData](t, failed[1]).Usage, "the rate limit counts only the call")
	require.Equal(t, 100+broken.Usage.InputTokens, got.Usage.InputTokens)
	require.Equal(t, 10+broken.Usage.OutputTokens, got.Usage.OutputTokens)
	require.Equal(t, int64(3), got.Usage.ModelCalls)
}
