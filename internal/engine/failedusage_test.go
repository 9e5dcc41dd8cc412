package engine_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/openai"
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

// TestCallCutByTheHTTPClientsTimeoutCountsItsInput: a call whose request
// reached the provider and that a timeout of the HTTP client cut before
// any answer (here the transport's wait for response headers, which fires
// before the engine's own ModelTimeout when a library user raises the
// latter past it) counts its input, as one the engine's timeout cut does:
// the provider worked on it, and bills it. Before, only the engine's own
// deadline was seen, so such a call counted nothing. A connection refused
// before the request was written counts nothing still. Through the
// official OpenAI SDK (Chat Completions) against a local server.
func TestCallCutByTheHTTPClientsTimeoutCountsItsInput(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if calls.Add(1) == 1 {
			select { // sent whole, and never answered
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"done"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 100 * time.Millisecond
	p := openai.New(openai.Config{Name: openai.NameCompatible, HTTPClient: &http.Client{Transport: tr}})
	h := newHarnessConfigured(t, p, func(h *harness) store.Store { return h.store }, func(c *engine.Config) {
		c.ModelTimeout = time.Hour
		c.Providers = map[string]model.Provider{openai.NameCompatible: p}
	})
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: openai.NameCompatible, Name: "m", BaseURL: srv.URL + "/v1"}, Instructions: "Be useful."}, nil)
	got := h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, got.Status, "journal:\n%s", journalText(t, h, s.ID))
	reqs := events(t, h, s.ID, lt.EventModelRequested)
	failed := events(t, h, s.ID, lt.EventModelFailed)
	require.Len(t, reqs, 2)
	require.Len(t, failed, 1)
	cut := data[lt.ModelFailedData](t, failed[0])
	require.Equal(t, string(model.KindTimeout), cut.Kind, "journal:\n%s", journalText(t, h, s.ID))
	require.NotNil(t, cut.Usage, "the call the transport's timeout cut counts; journal:\n%s", journalText(t, h, s.ID))
	require.Equal(t, int64(data[lt.ModelRequestedData](t, reqs[0]).ContextTokens), cut.Usage.InputTokens)
	require.True(t, cut.Usage.Estimated)
	require.Equal(t, 100+cut.Usage.InputTokens, got.Usage.InputTokens)
}

// TestCallNeverSentCountsNothing: a call whose request was never written
// counts only itself: its dial timed out, or the engine's own limit on a
// call (ModelTimeout) passed while it was still dialling a host that does
// not answer.
func TestCallNeverSentCountsNothing(t *testing.T) {
	// The transport dials on a context of its own, which the call's end
	// does not cancel: a dial held until the call's deadline ends with
	// the test.
	hung := make(chan struct{})
	t.Cleanup(func() { close(hung) })
	for name, dial := range map[string]func(ctx context.Context, network, _ string) (net.Conn, error){
		"dial timed out": func(ctx context.Context, network, _ string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: network, Err: timeoutError{}}
		},
		"ModelTimeout while dialling": func(ctx context.Context, network, _ string) (net.Conn, error) {
			select {
			case <-ctx.Done():
			case <-hung:
			}
			return nil, &net.OpError{Op: "dial", Net: network, Err: context.Canceled}
		},
	} {
		t.Run(name, func(t *testing.T) {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.DialContext = dial
			p := openai.New(openai.Config{Name: openai.NameCompatible, HTTPClient: &http.Client{Transport: tr}})
			h := newHarnessConfigured(t, p, func(h *harness) store.Store { return h.store }, func(c *engine.Config) {
				c.MaxModelAttempts = 1
				c.ModelTimeout = 100 * time.Millisecond
				c.Providers = map[string]model.Provider{openai.NameCompatible: p}
			})
			s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: openai.NameCompatible, Name: "m", BaseURL: "http://127.0.0.1:9/v1"}, Instructions: "Be useful."}, nil)
			h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
			failed := events(t, h, s.ID, lt.EventModelFailed)
			require.Len(t, failed, 1, "journal:\n%s", journalText(t, h, s.ID))
			f := data[lt.ModelFailedData](t, failed[0])
			require.Equal(t, string(model.KindTimeout), f.Kind, "journal:\n%s", journalText(t, h, s.ID))
			require.Nil(t, f.Usage, "a request never written counts nothing; journal:\n%s", journalText(t, h, s.ID))
		})
	}
}

// timeoutError is a net.Error that timed out.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
