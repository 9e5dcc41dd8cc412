package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var fixedNow = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func TestHTTPErrorsAreClassified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		body       string
		headers    []string
		kind       model.ErrorKind
		retryAfter time.Duration
		want       string
	}{
		{
			name: "429 with Retry-After seconds", status: 429, headers: []string{"Retry-After", "7"},
			body: `{"error":{"message":"Rate limit reached for gpt-5 in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			kind: model.KindRateLimited, retryAfter: 7 * time.Second, want: "rate_limit_exceeded: Rate limit reached for gpt-5",
		},
		{
			name: "429 with retry-after-ms, which wins", status: 429, headers: []string{"Retry-After", "2", "retry-after-ms", "1500"},
			body: `{"error":{"message":"Rate limit reached.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			kind: model.KindRateLimited, retryAfter: 1500 * time.Millisecond, want: "Rate limit reached.",
		},
		{
			name: "429 with Retry-After as an HTTP date", status: 429, headers: []string{"Retry-After", fixedNow.Add(30 * time.Second).Format(http.TimeFormat)},
			body: `{"error":{"message":"Slow down.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			kind: model.KindRateLimited, retryAfter: 30 * time.Second, want: "Slow down.",
		},
		{
			name: "429 insufficient_quota is not cured by waiting", status: 429,
			body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			kind: model.KindAuth, want: "insufficient_quota: You exceeded your current quota",
		},
		{
			name: "500", status: 500,
			body: `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
			kind: model.KindServer, want: "server_error: The server had an error",
		},
		{
			name: "503", status: 503,
			body: `{"error":{"message":"The engine is currently overloaded, please try again later.","type":"server_error","param":null,"code":null}}`,
			kind: model.KindOverloaded, want: "overloaded, please try again later",
		},
		{
			name: "529", status: 529, headers: []string{"Retry-After", "3"},
			body: `{"error":{"message":"Overloaded","type":"overloaded_error","param":null,"code":null}}`,
			kind: model.KindOverloaded, retryAfter: 3 * time.Second, want: "overloaded_error: Overloaded",
		},
		{
			name: "401 quoting the masked key", status: 401,
			body: `{"error":{"message":"Incorrect API key provided: sk-test-****************CRET. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			kind: model.KindAuth, want: "invalid_api_key: Incorrect API key provided: [redacted]. You can find",
		},
		{
			name: "401 from a proxy echoing the whole key", status: 401,
			body: `{"error":{"message":"key ` + testKey + ` is not allowed","type":"auth_error","code":null}}`,
			kind: model.KindAuth, want: "auth_error: key [redacted] is not allowed",
		},
		{
			name: "400 context_length_exceeded", status: 400,
			body: `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			kind: model.KindContextTooLong, want: "context_length_exceeded: This model's maximum context length",
		},
		{
			name: "400 context too long, said in words (llama.cpp)", status: 400,
			body: `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`,
			kind: model.KindContextTooLong, want: "exceeds the available context size",
		},
		{
			name: "400 context too long (vLLM)", status: 400,
			body: `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`,
			kind: model.KindContextTooLong, want: "maximum context length is 4096",
		},
		{
			name: "400 other", status: 400,
			body: `{"error":{"message":"Unsupported parameter: 'temperature' is not supported with this model.","type":"invalid_request_error","param":"temperature","code":"unsupported_parameter"}}`,
			kind: model.KindBadRequest, want: "unsupported_parameter: Unsupported parameter",
		},
		{
			name: "500 with a malformed JSON body", status: 500, body: `{"error": {"message": "bo`,
			kind: model.KindServer, want: "HTTP 500",
		},
		{
			name: "502 with an HTML page", status: 502, body: `<html><body><h1>502 Bad Gateway</h1></body></html>`,
			kind: model.KindServer, want: "HTTP 502: Bad Gateway",
		},
		{
			name: "404 with the error as a string", status: 404, body: `{"error":"model 'llama9' not found, try pulling it first"}`,
			kind: model.KindBadRequest, want: "model 'llama9' not found",
		},
	}
	specs := map[string]lt.ModelSpec{"responses": openaiSpec("gpt-5"), "chat": chatSpec(), "compatible": compatSpec()}
	for _, tc := range tests {
		for api, spec := range specs {
			t.Run(tc.name+"/"+api, func(t *testing.T) {
				t.Parallel()
				f := newFakeAPI(t, jsonError(tc.status, tc.body, tc.headers...))
				p := New(Config{Name: spec.Provider, HTTPClient: f.Client(), Now: func() time.Time { return fixedNow }})
				resp, err := respond(t, p, f, "", &model.Request{Spec: spec, APIKey: testKey, Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
				require.Nil(t, resp)
				me := requireModelError(t, err, tc.kind)
				require.Equal(t, tc.status, me.Status)
				require.Equal(t, tc.retryAfter, me.RetryAfter)
				require.Contains(t, me.Message, tc.want)
				require.NotContains(t, me.Message, "sk-test")
				require.LessOrEqual(t, len(me.Message), model.MaxMessageLen+len("…"))
				// The SDK does not retry: the engine does, and journals
				// every attempt.
				require.Len(t, f.Calls(), 1)
			})
		}
	}
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	p := New(Config{Name: NameCompatible})
	spec := compatSpec()
	spec.BaseURL = "http://" + addr + "/v1"
	resp, err := p.Respond(t.Context(), &model.Request{Spec: spec, APIKey: testKey, Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	require.Nil(t, resp)
	me := requireModelError(t, err, model.KindServer)
	require.True(t, me.Retryable())
	require.Contains(t, me.Message, "connection refused")
}

// timeoutTransport fails every request with a network timeout.
type timeoutTransport struct{}

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

func (timeoutTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: netTimeout{}}
}

func TestNetworkTimeoutIsTimeout(t *testing.T) {
	t.Parallel()
	p := New(Config{Name: NameOpenAI, HTTPClient: &http.Client{Transport: timeoutTransport{}}})
	resp, err := p.Respond(t.Context(), &model.Request{Spec: openaiSpec("gpt-5"), APIKey: testKey, Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	require.Nil(t, resp)
	me := requireModelError(t, err, model.KindTimeout)
	require.Contains(t, me.Message, "i/o timeout")
}

func TestDeadlinePassedIsTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0))
	defer cancel()
	p := New(Config{Name: NameOpenAI})
	resp, err := p.Respond(ctx, &model.Request{Spec: openaiSpec("gpt-5"), Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	require.Nil(t, resp)
	requireModelError(t, err, model.KindTimeout)
}

// deadlineCtx is a context whose deadline passes when expire is called, so a
// test can end a call's deadline mid-stream without waiting for a clock.
type deadlineCtx struct {
	context.Context
	done chan struct{}
}

func (c *deadlineCtx) Done() <-chan struct{} { return c.done }

func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func TestCtxEndedMidStream(t *testing.T) {
	t.Parallel()
	// The server streams a delta, then holds the response open until the
	// client goes away.
	hold := func(w http.ResponseWriter, r *http.Request) {
		msg, _ := messageEvents(2, 0, "msg_1", "first")
		sse(append([]string{created(0), inProgress(1)}, msg[:3]...)...)(w, r)
		<-r.Context().Done()
	}

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		f := newFakeAPI(t, hold)
		p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		spec := openaiSpec("gpt-5")
		spec.BaseURL = f.URL
		resp, err := p.Respond(ctx, &model.Request{Spec: spec, Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}},
			OnDelta: func(model.Delta) { cancel() }})
		require.Nil(t, resp)
		require.ErrorIs(t, err, context.Canceled)
		_, isModelErr := model.AsError(err)
		require.False(t, isModelErr, "a cancelled call is a stop, not a provider failure")
	})

	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		f := newFakeAPI(t, hold)
		p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})
		ctx := &deadlineCtx{Context: t.Context(), done: make(chan struct{})}
		spec := openaiSpec("gpt-5")
		spec.BaseURL = f.URL
		resp, err := p.Respond(ctx, &model.Request{Spec: spec, APIKey: testKey, Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}},
			OnDelta: func(model.Delta) { close(ctx.done) }})
		require.Nil(t, resp)
		requireModelError(t, err, model.KindTimeout)
	})
}

func TestRespondWithCancelCtx(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := New(Config{Name: NameOpenAI}).Respond(ctx, &model.Request{Spec: openaiSpec("gpt-5")})
	require.ErrorIs(t, err, context.Canceled)
}

// The SDK's client defaults read OPENAI_API_KEY and OPENAI_BASE_URL; the
// provider must not: the key and the address come from the request only.
func TestEnvironmentIsIgnored(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-environment")
	f := newFakeAPI(t, sse(textStream(usageObject(1, 0, 1, 0), "ok")...))
	p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})
	resp, err := respond(t, p, f, "", &model.Request{Spec: openaiSpec("gpt-5"), Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	require.NoError(t, err)
	require.Equal(t, "ok", resp.Text)
	c := f.Calls()[0]
	require.Empty(t, c.Header.Values("Authorization"))
	require.Empty(t, c.Header.Values("OpenAI-Organization"))
}

func TestInvalidRequestsAreRefusedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  model.Request
		want string
	}{
		{
			name: "unknown role",
			req:  model.Request{Messages: []model.Message{{Role: "narrator", Text: "once"}}},
			want: `message 0: unknown role "narrator"`,
		},
		{
			name: "tool result without its call id",
			req:  model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}, {Role: model.RoleTool, Text: "42"}}},
			want: "message 1: a tool result needs the id of its call",
		},
		{
			name: "tool schema that is not an object",
			req:  model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}, Tools: []model.ToolDef{{Name: "bad", Parameters: json.RawMessage(`["x"]`)}}},
			want: `tool "bad": parameters must be a JSON schema object`,
		},
	}
	for _, tc := range tests {
		for api, spec := range map[string]lt.ModelSpec{"responses": openaiSpec("gpt-5"), "chat": chatSpec()} {
			t.Run(tc.name+"/"+api, func(t *testing.T) {
				t.Parallel()
				f := newFakeAPI(t, sse(textStream(usageObject(1, 0, 1, 0), "ok")...))
				p := New(Config{Name: NameOpenAI, HTTPClient: f.Client()})
				req := tc.req
				req.Spec = spec
				_, err := respond(t, p, f, "", &req)
				me := requireModelError(t, err, model.KindBadRequest)
				require.Contains(t, me.Message, tc.want)
				require.Empty(t, f.Calls())
			})
		}
	}
}

func TestRespondRefusesAnInvalidSpec(t *testing.T) {
	t.Parallel()
	p := New(Config{Name: NameCompatible})
	_, err := p.Respond(t.Context(), &model.Request{Spec: compatSpec(), Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
	me := requireModelError(t, err, model.KindBadRequest)
	require.Contains(t, me.Message, "base_url: required")

	_, err = p.Respond(t.Context(), nil)
	require.Error(t, err)
}

func TestNewPanicsOnAnUnknownName(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { New(Config{Name: "anthropic"}) })
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"none", h(), 0},
		{"seconds", h("Retry-After", "20"), 20 * time.Second},
		{"fractional seconds", h("Retry-After", "0.5"), 500 * time.Millisecond},
		{"milliseconds", h("retry-after-ms", "250"), 250 * time.Millisecond},
		{"bad milliseconds fall back to seconds", h("retry-after-ms", "soon", "Retry-After", "4"), 4 * time.Second},
		{"date", h("Retry-After", fixedNow.Add(time.Minute).Format(http.TimeFormat)), time.Minute},
		{"date in the past", h("Retry-After", fixedNow.Add(-time.Minute).Format(http.TimeFormat)), 0},
		{"negative", h("Retry-After", "-3"), 0},
		{"garbage", h("Retry-After", "tomorrow-ish"), 0},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, retryAfter(tc.header, fixedNow), tc.name)
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	c := classifier{key: "my-local-key-123"}
	got := c.scrub("bad key my-local-key-123\nand sk-proj-AbCd****wxyz\tagain; task-force stays")
	require.Equal(t, "bad key [redacted] and [redacted] again; task-force stays", got)

	long := c.scrub(strings.Repeat("é", 400))
	require.LessOrEqual(t, len(long), model.MaxMessageLen+len("…"))
	require.True(t, strings.HasSuffix(long, "…"))
}

func TestClassifyKeepsModelErrors(t *testing.T) {
	t.Parallel()
	me := &model.Error{Kind: model.KindAuth, Message: "x"}
	got := classifier{}.classify(t.Context(), errors.Join(errors.New("ctx"), me), nil)
	require.Same(t, me, got)
}
