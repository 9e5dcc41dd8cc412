package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// stallingProvider streams its first call's text and then hangs until the
// call is cut, as a provider does when its worker dies mid-stream; every
// later call streams its text and answers.
type stallingProvider struct {
	calls atomic.Int32
}

// stalledText is long enough that the engine journals it as model.delta
// events before the call hangs (deltas are coalesced by size).
var stalledText = strings.Repeat("first attempt streaming. ", 60)

const resumedText = "second attempt answers."

func (p *stallingProvider) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	if p.calls.Add(1) == 1 {
		req.OnDelta(model.Delta{Text: stalledText})
		<-ctx.Done()
		return nil, ctx.Err()
	}
	req.OnDelta(model.Delta{Text: resumedText})
	return &model.Response{Text: resumedText, Usage: lt.Usage{InputTokens: 10, OutputTokens: 4}}, nil
}

// TestStreamedCallResumesAsTheNextAttempt: a worker killed while a model
// call streams leaves model.delta events of attempt 1 without an outcome;
// the call made again after the restart is attempt 2, so its deltas never
// merge with the dead call's.
func TestStreamedCallResumesAsTheNextAttempt(t *testing.T) {
	p := &stallingProvider{}
	h := newHarnessWith(t, map[string]model.Provider{"stall": p}, nil)
	ctx := context.Background()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "stall", Name: "m"}, Instructions: "Answer."},
		Input:     "go",
	})
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for len(events(t, h, s.ID, lt.EventModelDelta)) == 0 {
		require.True(t, time.Now().Before(deadline), "the first call's deltas are never journaled")
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}

	// Kill the engine hard: the call is cut with no outcome journaled,
	// as a SIGKILL leaves it.
	hard, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, h.eng.Stop(hard))
	h.start("node-a")
	h.waitStatus(s.ID, lt.SessionIdle)

	requested := events(t, h, s.ID, lt.EventModelRequested)
	require.Len(t, requested, 2)
	for i, ev := range requested {
		d := data[lt.ModelRequestedData](t, ev)
		require.Equal(t, 1, d.Step)
		require.Equal(t, i+1, d.Attempt, "request %d", i)
	}
	text := map[int]string{}
	for _, ev := range events(t, h, s.ID, lt.EventModelDelta) {
		d := data[lt.ModelDeltaData](t, ev)
		require.Equal(t, 1, d.Step)
		text[d.Attempt] += d.Text
	}
	require.Equal(t, map[int]string{1: stalledText, 2: resumedText}, text, "each attempt's deltas apart")
	require.Empty(t, events(t, h, s.ID, lt.EventModelFailed), "a crash is no failure of the model")
	checkJournal(t, h.store, s.ID)
}
