package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// recordingAfter is an After that fires at once and records what it was asked
// to wait, so no test sleeps in real time.
type recordingAfter struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (r *recordingAfter) after(d time.Duration) <-chan time.Time {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

func (r *recordingAfter) recorded() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.waits...)
}

func newTestProvider(t *testing.T) (*Provider, *recordingAfter) {
	t.Helper()
	r := &recordingAfter{}
	return New(&Config{After: r.after}), r
}

// messages is a context of 16 + 13 + 2+9 = 40 bytes: 10 estimated input tokens.
var messages = []model.Message{
	{Role: model.RoleSystem, Text: "You are helpful."},
	{Role: model.RoleUser, Text: "Write a brief"},
	{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c", Name: "ls", Arguments: json.RawMessage(`{"p":"."}`)}}},
	{Role: model.RoleTool, CallID: "c", Text: ""},
}

const pricing = `{"input_per_mtok": 3, "cached_input_per_mtok": 0.3, "output_per_mtok": 15}`

func request(script, pricing string, position int) *model.Request {
	return &model.Request{
		Spec:     lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(script), Pricing: json.RawMessage(pricing)},
		Messages: messages,
		Position: position,
	}
}

func TestRespond(t *testing.T) {
	t.Parallel()
	const script = `[
		{"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md"}}, {"name": "list_files"}]},
		{"text": "Checking.", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.md"}, "id": "toolu_7"}, {"name": "ls"}]},
		{"text": "Done.", "usage": {"input_tokens": 900, "output_tokens": 40, "cached_input_tokens": 500, "reasoning_tokens": 10}},
		{"text": "Partly counted.", "usage": {"output_tokens": 7}},
		{"text": "Priced by the step.", "cost_usd": 0.5, "usage": {"input_tokens": 1000000, "output_tokens": 0}},
		{"text": "Priced by the spec.", "usage": {"input_tokens": 1000000, "cached_input_tokens": 1000000, "output_tokens": 1000000}}
	]`
	tests := []struct {
		name     string
		pricing  string
		position int
		want     *model.Response
	}{
		{
			name: "tool calls get ids from their position and index; usage is estimated", position: 0,
			want: &model.Response{
				ToolCalls: []model.ToolCall{
					{ID: "call_0_0", Name: "write_file", Arguments: json.RawMessage(`{"path":"notes.md"}`)},
					{ID: "call_0_1", Name: "list_files", Arguments: json.RawMessage(`{}`)},
				},
				// Output: 19 + 2 bytes of arguments.
				Usage: lt.Usage{InputTokens: 10, OutputTokens: 6, Estimated: true},
			},
		},
		{
			name: "a given id is kept; text and tool calls together", position: 1,
			want: &model.Response{
				Text: "Checking.",
				ToolCalls: []model.ToolCall{
					{ID: "toolu_7", Name: "read_file", Arguments: json.RawMessage(`{"path":"notes.md"}`)},
					{ID: "call_1_1", Name: "ls", Arguments: json.RawMessage(`{}`)},
				},
				// Output: 9 + 19 + 2 bytes.
				Usage: lt.Usage{InputTokens: 10, OutputTokens: 8, Estimated: true},
			},
		},
		{
			name: "usage from the step", position: 2,
			want: &model.Response{Text: "Done.", Usage: lt.Usage{InputTokens: 900, OutputTokens: 40, CachedInputTokens: 500, ReasoningTokens: 10}},
		},
		{
			name: "usage partly from the step, the rest estimated", position: 3,
			want: &model.Response{Text: "Partly counted.", Usage: lt.Usage{InputTokens: 10, OutputTokens: 7, Estimated: true}},
		},
		{
			name: "no pricing: free", position: 2,
			want: &model.Response{Text: "Done.", Usage: lt.Usage{InputTokens: 900, OutputTokens: 40, CachedInputTokens: 500, ReasoningTokens: 10}, CostUSD: 0},
		},
		{
			name: "the spec's pricing", pricing: pricing, position: 2,
			want: &model.Response{Text: "Done.", Usage: lt.Usage{InputTokens: 900, OutputTokens: 40, CachedInputTokens: 500, ReasoningTokens: 10},
				CostUSD: (400*3 + 500*0.3 + 40*15) / 1e6},
		},
		{
			name: "the spec's pricing on estimated usage", pricing: pricing, position: 0,
			want: &model.Response{
				ToolCalls: []model.ToolCall{
					{ID: "call_0_0", Name: "write_file", Arguments: json.RawMessage(`{"path":"notes.md"}`)},
					{ID: "call_0_1", Name: "list_files", Arguments: json.RawMessage(`{}`)},
				},
				Usage: lt.Usage{InputTokens: 10, OutputTokens: 6, Estimated: true}, CostUSD: (10*3 + 6*15) / 1e6,
			},
		},
		{
			name: "the step's cost wins over pricing", pricing: pricing, position: 4,
			want: &model.Response{Text: "Priced by the step.", Usage: lt.Usage{InputTokens: 1_000_000}, CostUSD: 0.5},
		},
		{
			name: "the step's cost without pricing", position: 4,
			want: &model.Response{Text: "Priced by the step.", Usage: lt.Usage{InputTokens: 1_000_000}, CostUSD: 0.5},
		},
		{
			name: "cached input at the cached price", pricing: pricing, position: 5,
			want: &model.Response{Text: "Priced by the spec.", Usage: lt.Usage{InputTokens: 1_000_000, CachedInputTokens: 1_000_000, OutputTokens: 1_000_000}, CostUSD: 0.3 + 15},
		},
	}
	p, after := newTestProvider(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Respond(context.Background(), request(script, tt.pricing, tt.position))
			require.NoError(t, err)
			require.InDelta(t, tt.want.CostUSD, got.CostUSD, 1e-12)
			got.CostUSD = tt.want.CostUSD
			require.Equal(t, tt.want, got)
		})
	}
	require.Empty(t, after.recorded(), "no step has a delay")
}

func TestRespondDeterministic(t *testing.T) {
	t.Parallel()
	const script = `[{"text": "a", "tool_calls": [{"name": "x", "arguments": {"k": [1, 2]}}]}, {"error": {"status": 503}}, {"text": "b"}]`
	p1, _ := newTestProvider(t)
	for position := range 5 {
		// The caller owns what it gets: changing it must not change a replay.
		if earlier, _ := p1.Respond(context.Background(), request(script, pricing, position)); earlier != nil {
			for i := range earlier.ToolCalls {
				earlier.ToolCalls[i].Arguments[0] = 'X'
			}
		}
		first, firstErr := p1.Respond(context.Background(), request(script, pricing, position))

		// Another provider (a cold cache, as after a restart) answers the same.
		p2, _ := newTestProvider(t)
		second, secondErr := p2.Respond(context.Background(), request(script, pricing, position))
		require.Equal(t, first, second, "position %d", position)
		require.Equal(t, firstErr, secondErr, "position %d", position)
	}
}

func TestRespondErrorStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		step      string
		want      *model.Error
		retryable bool
	}{
		{`{"error": {"status": 429, "retry_after_seconds": 1}}`,
			&model.Error{Kind: model.KindRateLimited, Status: 429, RetryAfter: time.Second, Message: "scripted error: HTTP 429 Too Many Requests"}, true},
		{`{"error": {"status": 429, "retry_after_seconds": 0.25}}`,
			&model.Error{Kind: model.KindRateLimited, Status: 429, RetryAfter: 250 * time.Millisecond, Message: "scripted error: HTTP 429 Too Many Requests"}, true},
		{`{"error": {"status": 500}}`,
			&model.Error{Kind: model.KindServer, Status: 500, Message: "scripted error: HTTP 500 Internal Server Error"}, true},
		{`{"error": {"status": 503, "message": "busy"}}`,
			&model.Error{Kind: model.KindOverloaded, Status: 503, Message: "busy"}, true},
		{`{"error": {"status": 529}}`,
			&model.Error{Kind: model.KindOverloaded, Status: 529, Message: "scripted error: HTTP 529"}, true},
		{`{"error": {"status": 504}}`,
			&model.Error{Kind: model.KindTimeout, Status: 504, Message: "scripted error: HTTP 504 Gateway Timeout"}, true},
		{`{"error": {"status": 401}}`,
			&model.Error{Kind: model.KindAuth, Status: 401, Message: "scripted error: HTTP 401 Unauthorized"}, false},
		{`{"error": {"status": 400, "message": "context too long"}}`,
			&model.Error{Kind: model.KindBadRequest, Status: 400, Message: "context too long"}, false},
	}
	p, _ := newTestProvider(t)
	for _, tt := range tests {
		t.Run(tt.step, func(t *testing.T) {
			script := `[` + tt.step + `, {"text": "recovered"}]`
			_, err := p.Respond(context.Background(), request(script, pricing, 0))
			me, ok := model.AsError(err)
			require.True(t, ok, "got %v", err)
			require.Equal(t, tt.want, me)
			require.Equal(t, tt.retryable, me.Retryable())

			// The failed call used up its position: the retry plays the next step.
			resp, err := p.Respond(context.Background(), request(script, pricing, 1))
			require.NoError(t, err)
			require.Equal(t, "recovered", resp.Text)
		})
	}
}

func TestRespondPastEnd(t *testing.T) {
	t.Parallel()
	const script = `[{"text": "only step"}]`
	p, _ := newTestProvider(t)
	for _, position := range []int{1, 2, 1000} {
		resp, err := p.Respond(context.Background(), request(script, "", position))
		require.NoError(t, err)
		require.Equal(t, &model.Response{Text: FinishedText, Usage: lt.Usage{InputTokens: 10, OutputTokens: 4, Estimated: true}}, resp)
	}
	resp, err := p.Respond(context.Background(), request(script, pricing, 1))
	require.NoError(t, err)
	require.Equal(t, FinishedText, resp.Text)
	require.InDelta(t, (10*3+4*15)/1e6, resp.CostUSD, 1e-12)
}

func TestRespondDelay(t *testing.T) {
	t.Parallel()
	const script = `[{"text": "slow", "delay_ms": 1500}, {"error": {"status": 500}, "delay_ms": 20}, {"text": "fast"}]`
	p, after := newTestProvider(t)

	resp, err := p.Respond(context.Background(), request(script, "", 0))
	require.NoError(t, err)
	require.Equal(t, "slow", resp.Text)
	require.Equal(t, []time.Duration{1500 * time.Millisecond}, after.recorded())

	// An error step waits too before it fails, like a slow provider.
	_, err = p.Respond(context.Background(), request(script, "", 1))
	_, ok := model.AsError(err)
	require.True(t, ok)
	require.Equal(t, []time.Duration{1500 * time.Millisecond, 20 * time.Millisecond}, after.recorded())

	_, err = p.Respond(context.Background(), request(script, "", 2))
	require.NoError(t, err)
	require.Len(t, after.recorded(), 2, "a step without delay does not wait")
}

func TestRespondDelayCancelled(t *testing.T) {
	t.Parallel()
	waiting := make(chan time.Duration, 1)
	p := New(&Config{After: func(d time.Duration) <-chan time.Time {
		waiting <- d
		return make(chan time.Time) // never fires: only the cancel can end the wait
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Respond(ctx, request(`[{"text": "slow", "delay_ms": 600000}]`, "", 0))
		done <- err
	}()
	require.Equal(t, 600*time.Second, <-waiting)
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	_, isModelError := model.AsError(err)
	require.False(t, isModelError, "a cancel is not a provider failure")
}

func TestRespondContextDoneBeforeCall(t *testing.T) {
	t.Parallel()
	p := New(&Config{After: func(time.Duration) <-chan time.Time {
		panic("a cancelled call must not start waiting")
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Respond(ctx, request(`[{"text": "slow", "delay_ms": 10}]`, "", 0))
	require.ErrorIs(t, err, context.Canceled)

	ctx, cancel = context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	_, err = p.Respond(ctx, request(`[{"text": "fast"}]`, "", 0))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestRespondBadRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  *model.Request
		want string
	}{
		{"invalid script", request(`[{"text": "a"}, {"tool_calls": [{}]}]`, "", 0),
			"scripted: invalid script: script[1].tool_calls[0].name: required"},
		{"no script", request(``, "", 0), "scripted: invalid script: script: required"},
		{"invalid pricing", request(`[{"text": "a"}]`, `{"input_per_mtok": -1, "output_per_mtok": 1}`, 0),
			"scripted: invalid pricing: pricing.input_per_mtok: must be >= 0 and <= 1000000"},
		{"negative position", request(`[{"text": "a"}]`, "", -1), "scripted: position -1 is negative"},
	}
	p, _ := newTestProvider(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := p.Respond(context.Background(), tt.req)
			require.Nil(t, resp)
			me, ok := model.AsError(err)
			require.True(t, ok, "got %v", err)
			require.Equal(t, &model.Error{Kind: model.KindBadRequest, Message: tt.want}, me)
			require.False(t, me.Retryable())
		})
	}
	_, err := p.Respond(context.Background(), nil)
	require.EqualError(t, err, "scripted respond: nil request")
}

func TestValidateSpec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		spec    lt.ModelSpec
		wantErr string
	}{
		{"valid", lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text": "a"}]`), Pricing: json.RawMessage(pricing)}, ""},
		{"valid without pricing", lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text": "a"}]`)}, ""},
		{"no script", lt.ModelSpec{Provider: "scripted"}, "script: required"},
		{"bad step", lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text": "a"}, {"error": {"status": 302}}]`)},
			"script[1].error.status: must be an HTTP error status (400-599)"},
		{"bad pricing", lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text": "a"}]`), Pricing: json.RawMessage(`{"input_per_mtok": 1}`)},
			"pricing.output_per_mtok: required"},
	}
	p, _ := newTestProvider(t)
	var v model.SpecValidator = p
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.ValidateSpec(tt.spec)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var fe *model.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tt.wantErr, fe.Field+": "+fe.Message)
		})
	}
}

func TestScriptCacheIsBounded(t *testing.T) {
	t.Parallel()
	p := New(&Config{CacheSize: 2, After: (&recordingAfter{}).after})
	script := func(i int) string { return fmt.Sprintf(`[{"text": "script %d"}]`, i) }
	for round := range 2 {
		for i := range 3 {
			resp, err := p.Respond(context.Background(), request(script(i), "", 0))
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("script %d", i), resp.Text, "round %d", round)
			require.LessOrEqual(t, p.cache.len(), 2)
		}
	}
	require.Equal(t, 2, p.cache.len())

	// Invalid scripts are not kept.
	_, err := p.Respond(context.Background(), request(`[{}]`, "", 0))
	require.Error(t, err)
	require.Equal(t, 2, p.cache.len())

	require.Equal(t, DefaultCacheSize, New(nil).cache.size)
	require.Equal(t, DefaultCacheSize, New(&Config{CacheSize: -3}).cache.size)
}

func TestRespondConcurrent(t *testing.T) {
	t.Parallel()
	steps := make([]string, 50)
	for i := range steps {
		steps[i] = fmt.Sprintf(`{"text": "step %d", "tool_calls": [{"name": "t", "arguments": {"i": %d}}], "delay_ms": 5}`, i, i)
	}
	script := "[" + strings.Join(steps, ",") + "]"
	p, _ := newTestProvider(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(steps))
	for range 4 {
		for i := range steps {
			wg.Go(func() {
				resp, err := p.Respond(context.Background(), request(script, pricing, i))
				switch {
				case err != nil:
					errs <- err
				case resp.Text != fmt.Sprintf("step %d", i) || resp.ToolCalls[0].ID != CallID(i, 0):
					errs <- fmt.Errorf("position %d: got %q %q", i, resp.Text, resp.ToolCalls[0].ID)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestEstimateTokens(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int64{0: 1, 1: 1, 4: 1, 5: 2, 8: 2, 9: 3, 4000: 1000, 4001: 1001} {
		require.Equal(t, want, estimateTokens(n), "%d bytes", n)
	}
	require.Equal(t, int64(1), estimateInput(nil), "an empty context still costs a token")
	require.Equal(t, int64(10), estimateInput(messages))
	require.Equal(t, int64(1), estimateOutput(&Step{ToolCalls: []ToolCall{{Name: "a_long_tool_name", Arguments: json.RawMessage(`{}`)}}}),
		"tool names do not count as output, their arguments do")
}

func TestCallID(t *testing.T) {
	t.Parallel()
	require.Equal(t, "call_0_0", CallID(0, 0))
	require.Equal(t, "call_12_3", CallID(12, 3))
	require.NotEqual(t, CallID(1, 11), CallID(11, 1))
}

// TestRespondStreamsText: with a delta callback, the step's text arrives in
// small chunks, in order, cut on rune boundaries, before the response.
func TestRespondStreamsText(t *testing.T) {
	text := "Résumé: the brief is written — " + strings.Repeat("ok ", 20)
	raw, err := json.Marshal([]map[string]any{{"text": text}})
	require.NoError(t, err)
	var chunks []string
	resp, err := New(nil).Respond(context.Background(), &model.Request{
		Spec:    lt.ModelSpec{Provider: "scripted", Script: raw},
		OnDelta: func(d model.Delta) { chunks = append(chunks, d.Text) },
	})
	require.NoError(t, err)
	require.Equal(t, text, resp.Text)
	require.Greater(t, len(chunks), 3)
	require.Equal(t, text, strings.Join(chunks, ""))
	for _, c := range chunks {
		require.True(t, utf8.ValidString(c), "chunk %q cuts a rune", c)
		require.LessOrEqual(t, len(c), streamChunk+3)
	}
}
