package scripted

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// FinishedText is the final answer at every position past the end of the
// script: a session that outlives its script ends its turn instead of failing.
const FinishedText = "Script finished."

// DefaultCacheSize is the number of parsed scripts a Provider keeps by default.
const DefaultCacheSize = 256

// Config configures a Provider. The zero value (or nil) means defaults.
type Config struct {
	// After returns a channel that receives once d has passed; it times
	// delay_ms. Default time.After. Tests inject one that fires at once or on
	// demand, so they never sleep in real time.
	After func(d time.Duration) <-chan time.Time
	// CacheSize bounds the number of parsed scripts kept. Default
	// DefaultCacheSize; values below 1 mean the default.
	CacheSize int
}

// Provider is the scripted model provider. It is safe for concurrent use by
// any number of sessions.
type Provider struct {
	after func(time.Duration) <-chan time.Time
	cache *scriptCache
}

var (
	_ model.Provider      = (*Provider)(nil)
	_ model.SpecValidator = (*Provider)(nil)
)

// New returns a Provider; cfg nil means defaults.
func New(cfg *Config) *Provider {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.After == nil {
		c.After = time.After
	}
	if c.CacheSize < 1 {
		c.CacheSize = DefaultCacheSize
	}
	return &Provider{after: c.After, cache: newScriptCache(c.CacheSize)}
}

// ValidateSpec refuses a model spec whose script (see Parse) or pricing (see
// model.ParsePricing) is invalid, with a *model.FieldError whose Field starts
// with "script" or "pricing". The engine calls it when an agent is defined or
// a session is created, so a bad script is refused up front. A valid script is
// kept in the cache, ready for the session's first call.
func (p *Provider) ValidateSpec(spec lt.ModelSpec) error {
	if _, err := p.cache.steps(spec.Script); err != nil {
		return err
	}
	if _, err := model.ParsePricing(spec.Pricing); err != nil {
		return err
	}
	return nil
}

// Respond plays step req.Position of req.Spec.Script (see the package doc).
//
// Errors: a step's scripted failure is a *model.Error classified by
// model.KindForStatus; an invalid script, invalid pricing or a negative
// position is a *model.Error of kind model.KindBadRequest (not retryable: the
// same request would fail again); a context cancelled before or during the
// step's delay is returned wrapped, so errors.Is(err, context.Canceled) holds.
func (p *Provider) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	if req == nil {
		return nil, errors.New("scripted respond: nil request")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted respond: %w", err)
	}
	if req.Position < 0 {
		return nil, &model.Error{Kind: model.KindBadRequest, Message: fmt.Sprintf("scripted: position %d is negative", req.Position)}
	}
	steps, err := p.cache.steps(req.Spec.Script)
	if err != nil {
		return nil, &model.Error{Kind: model.KindBadRequest, Message: "scripted: invalid script: " + err.Error()}
	}
	pricing, err := model.ParsePricing(req.Spec.Pricing)
	if err != nil {
		return nil, &model.Error{Kind: model.KindBadRequest, Message: "scripted: invalid pricing: " + err.Error()}
	}

	if req.Position >= len(steps) {
		u := lt.Usage{
			InputTokens:  estimateInput(req.Messages),
			OutputTokens: estimateTokens(len(FinishedText)),
			Estimated:    true,
		}
		return &model.Response{Text: FinishedText, Usage: u, CostUSD: cost(nil, pricing, u)}, nil
	}

	step := &steps[req.Position]
	if step.DelayMS > 0 {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("scripted delay: %w", ctx.Err())
		case <-p.after(time.Duration(step.DelayMS) * time.Millisecond):
		}
	}
	if step.Error != nil {
		return nil, step.Error.modelError()
	}

	streamText(req.OnDelta, step.Text)
	resp := &model.Response{Text: step.Text}
	for j, c := range step.ToolCalls {
		id := c.ID
		if id == "" {
			id = CallID(req.Position, j)
		}
		// Cloned: the cached step is shared with every other session.
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: id, Name: c.Name, Arguments: bytes.Clone(c.Arguments)})
	}
	resp.Usage = stepUsage(step, req.Messages)
	resp.CostUSD = cost(step.CostUSD, pricing, resp.Usage)
	return resp, nil
}

func (e *StepError) modelError() *model.Error {
	msg := e.Message
	if msg == "" {
		msg = fmt.Sprintf("scripted error: HTTP %d", e.Status)
		if text := http.StatusText(e.Status); text != "" {
			msg += " " + text
		}
	}
	return &model.Error{
		Kind:       model.KindForStatus(e.Status),
		Status:     e.Status,
		RetryAfter: time.Duration(e.RetryAfterSeconds * float64(time.Second)),
		Message:    msg,
	}
}

// cost is the step's own cost if it gives one, else the cost at the spec's
// pricing, else 0: the scripted model itself is free, and pricing lets a test
// or a demo show realistic money.
func cost(stepCost *float64, pricing *model.Pricing, u lt.Usage) float64 {
	switch {
	case stepCost != nil:
		return *stepCost
	case pricing != nil:
		return pricing.Cost(u)
	default:
		return 0
	}
}

// streamChunk is how many bytes of text one streamed delta carries, about a
// few tokens, as a real provider streams.
const streamChunk = 16

// streamText plays a step's text to the request's delta callback in small
// chunks (cut on rune boundaries), the way a streaming provider would, so
// the offline demo and the tests exercise the streaming path.
func streamText(onDelta func(model.Delta), text string) {
	if onDelta == nil {
		return
	}
	for len(text) > 0 {
		n := min(streamChunk, len(text))
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n++
		}
		onDelta(model.Delta{Text: text[:n]})
		text = text[n:]
	}
}
