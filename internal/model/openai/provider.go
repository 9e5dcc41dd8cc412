package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/longhaul-dev/longhaul/internal/model"
)

// Provider names this package answers: the "provider" of a model spec.
const (
	// NameOpenAI is OpenAI's own API: the Responses API by default, Chat
	// Completions when the spec's api is "chat".
	NameOpenAI = "openai"
	// NameCompatible is any server that speaks Chat Completions (Ollama,
	// vLLM, llama.cpp server, LiteLLM...) at the spec's base_url.
	NameCompatible = "openai-compatible"
)

// The APIs a spec's "api" selects.
const (
	apiResponses = "responses"
	apiChat      = "chat"
)

// Config configures a provider instance.
type Config struct {
	// Name is NameOpenAI ("openai": the Responses API by default, "api":
	// "chat" selects Chat Completions) or NameCompatible
	// ("openai-compatible": Chat Completions at the spec's base_url, which
	// is then required; the key is optional, e.g. for Ollama). Any other
	// name is a wiring mistake and New panics.
	Name string
	// HTTPClient sends the requests. Default (nil): model.HTTPClient(), on a clone of
	// http.DefaultTransport with a response-header timeout of 10 minutes,
	// no redirects followed and no overall timeout (the caller's ctx bounds a call). Tests pass their
	// httptest server's client.
	HTTPClient *http.Client
	// Now tells the time, to turn a Retry-After given as an HTTP date into a
	// duration. Default (nil): time.Now.
	Now func() time.Time
}

// Provider answers model calls through the official OpenAI Go SDK. It keeps
// no per-call state and is safe for concurrent use.
type Provider struct {
	name string
	hc   *http.Client
	now  func() time.Time
}

var (
	_ model.Provider      = (*Provider)(nil)
	_ model.SpecValidator = (*Provider)(nil)
)

// New returns a Provider for cfg. It panics if cfg.Name is neither
// NameOpenAI nor NameCompatible: the name is fixed by the code that wires
// providers, never by user input.
func New(cfg Config) *Provider {
	if cfg.Name != NameOpenAI && cfg.Name != NameCompatible {
		panic(fmt.Sprintf("openai: unknown provider name %q (want %q or %q)", cfg.Name, NameOpenAI, NameCompatible))
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = model.HTTPClient()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Provider{name: cfg.Name, hc: hc, now: now}
}

// Respond makes one streamed call and returns the complete response once the
// stream has properly finished (Responses API: response.completed or
// response.incomplete; Chat Completions: a finish_reason and, from OpenAI,
// the usage chunk). req.OnDelta, when set, receives text and reasoning deltas
// as they arrive, from this goroutine.
//
// Errors: every failure of the call is a *model.Error (see the package doc
// for the classification), except a cancelled ctx, which is returned wrapped
// so that errors.Is(err, context.Canceled) holds. An invalid spec or request
// is a *model.Error of kind model.KindBadRequest: the same call would fail
// again.
func (p *Provider) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	if req == nil {
		return nil, errors.New("openai respond: nil request")
	}
	c := classifier{key: req.APIKey, now: p.now}
	if err := ctx.Err(); err != nil {
		return nil, c.classify(ctx, err, nil)
	}
	if err := p.validateSpec(req.Spec); err != nil {
		return nil, &model.Error{Kind: model.KindBadRequest, Message: c.scrub("openai: invalid model spec: " + err.Error())}
	}

	// The HTTP response is captured even when the call fails, so that an
	// error body the SDK cannot parse is still classified by its status.
	var httpResp *http.Response
	opts := []option.RequestOption{
		option.WithHTTPClient(p.hc),
		// The engine retries, and journals every attempt; a retry hidden
		// in the SDK would be an unrecorded, possibly billed, call.
		option.WithMaxRetries(0),
		option.WithResponseInto(&httpResp),
	}
	if req.Spec.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(req.Spec.BaseURL))
	} else {
		opts = append(opts, option.WithEnvironmentProduction())
	}
	if req.APIKey != "" {
		opts = append(opts, option.WithAPIKey(req.APIKey))
	}

	var (
		resp *model.Response
		err  error
	)
	if p.api(req.Spec.API) == apiResponses {
		resp, err = respondResponses(ctx, req, opts)
	} else {
		resp, err = respondChat(ctx, req, opts, p.name == NameOpenAI)
	}
	if err != nil {
		return nil, c.classify(ctx, err, httpResp)
	}
	resp.CostUSD = model.CostOf(req.Spec, resp.Usage)
	return resp, nil
}

// api is the API a spec's "api" selects for this provider (validated).
func (p *Provider) api(specAPI string) string {
	if p.name == NameCompatible || specAPI == apiChat {
		return apiChat
	}
	return apiResponses
}
