package anthropic

import (
	"context"
	"errors"
	"net/http"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/longhaul-dev/longhaul/internal/model"
)

// Config configures a Provider. The zero value means defaults.
type Config struct {
	// HTTPClient sends the requests. Default: model.HTTPClient(), on a clone of
	// http.DefaultTransport with a response-header timeout of 10 minutes,
	// no redirects followed and no overall timeout (the caller's ctx bounds a call). Tests pass their
	// httptest server's client.
	HTTPClient *http.Client
	// Now tells the time, to turn a Retry-After given as an HTTP date into a
	// duration. Default time.Now.
	Now func() time.Time
}

// Provider answers model calls with Anthropic's Messages API through the
// official SDK. It is safe for concurrent use: it keeps no per-call state.
type Provider struct {
	client sdk.Client
	now    func() time.Time
}

var (
	_ model.Provider      = (*Provider)(nil)
	_ model.SpecValidator = (*Provider)(nil)
)

// New returns a Provider.
func New(cfg Config) *Provider {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = model.HTTPClient()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	client := sdk.NewClient(
		// Nothing from the environment: the key comes with each request
		// (model.Request.APIKey) and the base URL with its spec, so a stray
		// ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL never changes where a
		// session's calls go or whose account pays for them.
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(hc),
		// The engine retries, and journals every attempt; a retry hidden
		// in the SDK would be an unrecorded, possibly billed, call.
		option.WithMaxRetries(0),
	)
	return &Provider{client: client, now: now}
}

// Respond makes one streamed Messages API call and returns the complete
// response once the stream's message_stop has arrived. req.OnDelta, when set,
// receives the text and thinking deltas as they arrive, from this goroutine.
//
// Errors: a *model.Error classified for the retry policy (see the package
// doc), with the key never in its message; a spec or context this package
// cannot send is a *model.Error of kind model.KindBadRequest. A cancelled ctx
// is returned wrapped, so errors.Is(err, context.Canceled) holds.
func (p *Provider) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	if req == nil {
		return nil, errors.New("anthropic respond: nil request")
	}
	c := classifier{key: req.APIKey, now: p.now}
	if err := ctx.Err(); err != nil {
		return nil, c.classify(ctx, err)
	}
	if err := validateSpec(req.Spec); err != nil {
		return nil, &model.Error{Kind: model.KindBadRequest, Message: c.message("invalid model spec", err.Error())}
	}
	params, err := buildParams(req)
	if err != nil {
		return nil, &model.Error{Kind: model.KindBadRequest, Message: c.message("invalid request", err.Error())}
	}

	var opts []option.RequestOption
	if req.Spec.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(req.Spec.BaseURL))
	}
	if req.APIKey != "" {
		// The SDK sends the key as "Authorization: Bearer"; x-api-key is
		// the header Anthropic's API reference documents and the one
		// Anthropic-compatible gateways read, and the API takes it first
		// when both are present.
		opts = append(opts, option.WithAPIKey(req.APIKey), option.WithHeader("x-api-key", req.APIKey))
	}

	stream := p.client.Messages.NewStreaming(ctx, params, opts...)
	// Closing releases the connection whatever happened; a close error
	// changes nothing about the outcome.
	defer func() { _ = stream.Close() }()

	acc := &accumulator{onDelta: req.OnDelta}
	for !acc.stopped && stream.Next() {
		if err := acc.handle(stream.Current()); err != nil {
			return nil, c.classify(ctx, err)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, c.classify(ctx, err)
	}
	resp, err := acc.response(req.Spec)
	if err != nil {
		return nil, c.classify(ctx, err)
	}
	return resp, nil
}
