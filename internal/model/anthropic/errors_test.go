package anthropic

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func userRequest(api *fakeAPI) *model.Request {
	return &model.Request{
		Spec:     api.spec(),
		Messages: []model.Message{{Role: model.RoleUser, Text: "Hello"}},
		APIKey:   testKey,
	}
}

func TestRespondHTTPErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		kind       model.ErrorKind
		status     int
		retryAfter time.Duration
		retryable  bool
		message    string
	}{
		{
			name:       "429 with retry-after seconds",
			handler:    errorBody(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", map[string]string{"retry-after": "7"}),
			kind:       model.KindRateLimited,
			status:     429,
			retryAfter: 7 * time.Second,
			retryable:  true,
			message:    "anthropic: rate_limit_error: Number of request tokens has exceeded your per-minute rate limit",
		},
		{
			name:       "429 with retry-after-ms",
			handler:    errorBody(429, "rate_limit_error", "Rate limited", map[string]string{"retry-after": "2", "retry-after-ms": "1500"}),
			kind:       model.KindRateLimited,
			status:     429,
			retryAfter: 1500 * time.Millisecond,
			retryable:  true,
			message:    "anthropic: rate_limit_error: Rate limited",
		},
		{
			name:       "429 with retry-after date",
			handler:    errorBody(429, "rate_limit_error", "Rate limited", map[string]string{"retry-after": fixedTime.Add(30 * time.Second).Format(http.TimeFormat)}),
			kind:       model.KindRateLimited,
			status:     429,
			retryAfter: 30 * time.Second,
			retryable:  true,
			message:    "anthropic: rate_limit_error: Rate limited",
		},
		{
			name:      "500",
			handler:   errorBody(500, "api_error", "Internal server error", nil),
			kind:      model.KindServer,
			status:    500,
			retryable: true,
			message:   "anthropic: api_error: Internal server error",
		},
		{
			name:      "529",
			handler:   errorBody(529, "overloaded_error", "Overloaded", nil),
			kind:      model.KindOverloaded,
			status:    529,
			retryable: true,
			message:   "anthropic: overloaded_error: Overloaded",
		},
		{
			name:    "401",
			handler: errorBody(401, "authentication_error", "invalid x-api-key", nil),
			kind:    model.KindAuth,
			status:  401,
			message: "anthropic: authentication_error: invalid x-api-key",
		},
		{
			name:    "403",
			handler: errorBody(403, "permission_error", "Your API key does not have permission to use the specified resource.", nil),
			kind:    model.KindAuth,
			status:  403,
			message: "anthropic: permission_error: Your API key does not have permission to use the specified resource.",
		},
		{
			name:    "prompt too long",
			handler: errorBody(400, "invalid_request_error", "prompt is too long: 212011 tokens > 200000 maximum", nil),
			kind:    model.KindContextTooLong,
			status:  400,
			message: "anthropic: invalid_request_error: prompt is too long: 212011 tokens > 200000 maximum",
		},
		{
			name:    "input and max_tokens exceed the window",
			handler: errorBody(400, "invalid_request_error", "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again", nil),
			kind:    model.KindContextTooLong,
			status:  400,
			message: "anthropic: invalid_request_error: input length and `max_tokens` exceed context limit",
		},
		{
			name:    "request too large",
			handler: errorBody(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.", nil),
			kind:    model.KindContextTooLong,
			status:  413,
			message: "anthropic: request_too_large: Request exceeds the maximum allowed number of bytes.",
		},
		{
			name:    "other invalid request",
			handler: errorBody(400, "invalid_request_error", "messages: roles must alternate between \"user\" and \"assistant\"", nil),
			kind:    model.KindBadRequest,
			status:  400,
			message: `anthropic: invalid_request_error: messages: roles must alternate between "user" and "assistant"`,
		},
		{
			name: "500 with a malformed JSON body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte(`{"type": "error", "error": {"type": "api_err`))
			},
			kind:      model.KindServer,
			status:    500,
			retryable: true,
			message:   "anthropic: error: Internal Server Error",
		},
		{
			name: "502 from a proxy, in HTML",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusBadGateway)
				_, _ = w.Write([]byte("<html>\n<body>Bad Gateway</body>\n</html>"))
			},
			kind:      model.KindServer,
			status:    502,
			retryable: true,
			message:   "anthropic: error: Bad Gateway",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, tt.handler)
			resp, err := api.provider().Respond(context.Background(), userRequest(api))
			require.Nil(t, resp)
			me := requireModelError(t, err, tt.kind)
			require.Equal(t, tt.status, me.Status)
			require.Equal(t, tt.retryAfter, me.RetryAfter)
			require.Equal(t, tt.retryable, me.Retryable())
			require.Contains(t, me.Message, tt.message)
			// The SDK made exactly one attempt: the engine owns retries.
			require.Equal(t, 1, api.count())
		})
	}
}

func TestRespondStreamFailures(t *testing.T) {
	t.Parallel()
	start := messageStart
	toolStart := `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"write_file","input":{}}}`
	toolDelta := `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a.md\", \"content\": \"abc"}}`
	stop := `{"type":"message_stop"}`
	tests := []struct {
		name    string
		handler http.HandlerFunc
		kind    model.ErrorKind
		message string
	}{
		{
			name:    "overloaded error event mid-stream",
			handler: streamBody(fixture(t, "error_event.sse")),
			kind:    model.KindOverloaded,
			message: "anthropic: overloaded_error: Overloaded",
		},
		{
			name:    "api error event mid-stream",
			handler: streamBody(events(start, textStart, textDelta, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)),
			kind:    model.KindServer,
			message: "anthropic: api_error: Internal server error",
		},
		{
			name:    "authentication error event mid-stream",
			handler: streamBody(events(start, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)),
			kind:    model.KindAuth,
			message: "anthropic: authentication_error: invalid x-api-key",
		},
		{
			name:    "stream ends before message_stop",
			handler: streamBody(events(start, textStart, textDelta)),
			kind:    model.KindServer,
			message: "stream ended before message_stop",
		},
		{
			name:    "connection cut mid-event",
			handler: streamThenAbort(events(start, textStart) + "event: content_block_delta\ndata: {\"type\":\"content_block_del"),
			kind:    model.KindServer,
		},
		{
			name:    "connection cut between events",
			handler: streamThenAbort(events(start, textStart, textDelta)),
			kind:    model.KindServer,
		},
		{
			name:    "malformed JSON in an event",
			handler: streamBody(events(start) + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\n\n"),
			kind:    model.KindServer,
			message: "invalid JSON",
		},
		{
			name: "JSON instead of a stream",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}]}`))
			},
			kind:    model.KindServer,
			message: "stream ended before message_stop",
		},
		{
			name:    "content before message_start",
			handler: streamBody(events(textStart, textDelta, stop)),
			kind:    model.KindServer,
			message: `stream event "content_block_start" before message_start`,
		},
		{
			name:    "delta for an unknown block",
			handler: streamBody(events(start, textDelta, stop)),
			kind:    model.KindServer,
			message: "content_block_delta for unknown block 0",
		},
		{
			name:    "block out of order",
			handler: streamBody(events(start, `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`, stop)),
			kind:    model.KindServer,
			message: "content_block_start for block 1, expected 0",
		},
		{
			name: "tool input not valid JSON",
			handler: streamBody(events(start, toolStart, toolDelta, `{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`, stop)),
			kind:    model.KindServer,
			message: "tool_use block 0 (write_file): input is not valid JSON",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, tt.handler)
			var deltas []model.Delta
			req := userRequest(api)
			req.OnDelta = func(d model.Delta) { deltas = append(deltas, d) }
			resp, err := api.provider().Respond(context.Background(), req)
			require.Nil(t, resp, "a broken stream never yields a response")
			me := requireModelError(t, err, tt.kind)
			require.Equal(t, tt.kind != model.KindAuth, me.Retryable(), "only a refused key is permanent")
			require.Zero(t, me.Status)
			require.Contains(t, me.Message, tt.message)
			require.Equal(t, 1, api.count())
		})
	}
}

func TestRespondTruncatedToolCallAtMaxTokens(t *testing.T) {
	t.Parallel()
	// The model ran out of max_tokens inside a tool call: the same request
	// would stop at the same place, so it is not retried.
	api := newFakeAPI(t, streamBody(events(
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"write_file","input":{}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a.md\", \"content\": \"abc"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":8192}}`,
		`{"type":"message_stop"}`,
	)))
	resp, err := api.provider().Respond(context.Background(), userRequest(api))
	require.Nil(t, resp)
	me := requireModelError(t, err, model.KindBadRequest)
	require.False(t, me.Retryable())
	require.Contains(t, me.Message, "max_tokens in the middle of tool call write_file")
}

func TestRespondNeverLeaksTheKey(t *testing.T) {
	t.Parallel()
	// A misbehaving gateway echoes the key back, on several lines.
	api := newFakeAPI(t, errorBody(401, "authentication_error", "invalid key "+testKey+"\nfor workspace default", nil))
	resp, err := api.provider().Respond(context.Background(), userRequest(api))
	require.Nil(t, resp)
	me := requireModelError(t, err, model.KindAuth)
	require.Contains(t, me.Message, "invalid key [redacted] for workspace default")

	// And in an error event of a stream.
	api = newFakeAPI(t, streamBody(events(
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`,
		`{"type":"error","error":{"type":"api_error","message":"upstream rejected `+testKey+`"}}`,
	)))
	_, err = api.provider().Respond(context.Background(), userRequest(api))
	requireModelError(t, err, model.KindServer)
}

func TestRespondTimeoutsAndConnectionErrors(t *testing.T) {
	t.Parallel()

	t.Run("deadline passed", func(t *testing.T) {
		t.Parallel()
		api := newFakeAPI(t, streamBody(fixture(t, "text.sse")))
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		resp, err := api.provider().Respond(ctx, userRequest(api))
		require.Nil(t, resp)
		me := requireModelError(t, err, model.KindTimeout)
		require.True(t, me.Retryable())
	})

	t.Run("deadline passes while streaming", func(t *testing.T) {
		t.Parallel()
		api := newFakeAPI(t, holdOpen(events(messageStart, textStart, textDelta)))
		ctx := newManualDeadline()
		req := userRequest(api)
		// The first delta makes the deadline pass: a clock running out while
		// the answer streams, without waiting for one.
		req.OnDelta = func(model.Delta) { ctx.expire() }
		resp, err := api.provider().Respond(ctx, req)
		require.Nil(t, resp)
		me := requireModelError(t, err, model.KindTimeout)
		require.True(t, me.Retryable())
	})

	t.Run("cancelled while streaming", func(t *testing.T) {
		t.Parallel()
		api := newFakeAPI(t, holdOpen(events(messageStart, textStart, textDelta)))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req := userRequest(api)
		req.OnDelta = func(model.Delta) { cancel() }
		resp, err := api.provider().Respond(ctx, req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, context.Canceled)
		requireClean(t, err)
	})

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		api := newFakeAPI(t, streamBody(fixture(t, "text.sse")))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		resp, err := api.provider().Respond(ctx, userRequest(api))
		require.Nil(t, resp)
		require.ErrorIs(t, err, context.Canceled)
		_, isModelError := model.AsError(err)
		require.False(t, isModelError)
	})

	t.Run("network timeout", func(t *testing.T) {
		t.Parallel()
		p := New(Config{HTTPClient: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, timeoutError{}
		})}})
		req := &model.Request{
			Spec:     specAt("http://127.0.0.1:9"),
			Messages: []model.Message{{Role: model.RoleUser, Text: "x"}},
			APIKey:   testKey,
		}
		resp, err := p.Respond(context.Background(), req)
		require.Nil(t, resp)
		me := requireModelError(t, err, model.KindTimeout)
		require.Contains(t, me.Message, "i/o timeout")
	})

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		api := newFakeAPI(t, streamBody(fixture(t, "text.sse")))
		p := api.provider()
		spec := api.spec()
		api.srv.Close()
		resp, err := p.Respond(context.Background(), &model.Request{Spec: spec, Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}, APIKey: testKey})
		require.Nil(t, resp)
		me := requireModelError(t, err, model.KindServer)
		require.True(t, me.Retryable())
		require.Contains(t, me.Message, "anthropic: connection:")
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// timeoutError is what a transport returns when a network deadline passes.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"12"}}, 12 * time.Second},
		{"fractional seconds", http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{"milliseconds first", http.Header{"Retry-After": {"12"}, "Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
		{"bad milliseconds fall back", http.Header{"Retry-After": {"3"}, "Retry-After-Ms": {"soon"}}, 3 * time.Second},
		{"date", http.Header{"Retry-After": {fixedTime.Add(time.Minute).Format(http.TimeFormat)}}, time.Minute},
		{"past date", http.Header{"Retry-After": {fixedTime.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"negative", http.Header{"Retry-After": {"-4"}}, 0},
		{"garbage", http.Header{"Retry-After": {"tomorrow"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, retryAfter(tt.header, fixedTime))
		})
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	require.Equal(t, "anthropic: x: a [redacted] b c", classifier{key: testKey}.message("x", "a "+testKey+"\n b\tc"))
	require.Equal(t, "no key here", scrub("no key here", ""))

	// Long messages are cut on a rune boundary.
	long := "ü" + strings.Repeat("é", model.MaxMessageLen)
	got := scrub(long, "")
	require.True(t, utf8.ValidString(got))
	require.True(t, strings.HasSuffix(got, "…"))
	require.LessOrEqual(t, len(got), model.MaxMessageLen+len("…"))
}

func specAt(baseURL string) lt.ModelSpec {
	return lt.ModelSpec{Provider: ProviderName, Name: "claude-sonnet-4-5", BaseURL: baseURL}
}

// Stream pieces shared by the failure tests.
const (
	messageStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`
	textStart    = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	textDelta    = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Half an"}}`
)

// holdOpen streams body, then keeps the response open until the client goes.
func holdOpen(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		streamBody(body)(w, r)
		<-r.Context().Done()
	}
}

// manualDeadline is a context whose deadline passes when the test says so.
type manualDeadline struct {
	context.Context
	once sync.Once
	done chan struct{}
}

func newManualDeadline() *manualDeadline {
	return &manualDeadline{Context: context.Background(), done: make(chan struct{})}
}

func (c *manualDeadline) expire() { c.once.Do(func() { close(c.done) }) }

func (c *manualDeadline) Done() <-chan struct{} { return c.done }

func (c *manualDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
