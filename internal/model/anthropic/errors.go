package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/longhaul-dev/longhaul/internal/httpretry"
	"github.com/longhaul-dev/longhaul/internal/model"
)

// classifier turns what went wrong in one call into a *model.Error, with the
// call's key scrubbed from every message.
type classifier struct {
	key string
	now func() time.Time
}

// apiError classifies an HTTP error response (status >= 400).
func (c classifier) apiError(e *sdk.Error) *model.Error {
	kind := model.KindForStatus(e.StatusCode)
	errType := string(e.Type())
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	if contextTooLong(e.StatusCode, errType, msg) {
		kind = model.KindContextTooLong
	}
	me := &model.Error{Kind: kind, Status: e.StatusCode, Message: c.message(errType, msg)}
	if e.Response != nil {
		me.RetryAfter = retryAfter(e.Response.Header, c.now())
	}
	return me
}

// streamEventError classifies an "error" event inside a stream that began
// with HTTP 200: the call failed midway, so it is retried as a whole.
func (c classifier) streamEventError(e *sdk.Error) *model.Error {
	errType := string(e.Type())
	kind := model.KindServer
	switch errType {
	case "overloaded_error":
		kind = model.KindOverloaded
	case "rate_limit_error":
		kind = model.KindRateLimited
	default:
		if model.IsAuthCode(errType) {
			// A refused key is not cured by a retry, wherever it is said.
			kind = model.KindAuth
		}
	}
	msg := e.Message
	if msg == "" {
		msg = "error event in the stream"
	}
	return &model.Error{Kind: kind, Message: c.message(errType, msg)}
}

// contextTooLong reports whether an error response says the context does not
// fit: a 400 invalid_request_error "prompt is too long: N tokens > M maximum"
// or "input length and `max_tokens` exceed context limit: ...", or a 413
// request_too_large (the body is over the API's size limit). All are cured by
// compaction, the remedy the engine applies to model.KindContextTooLong.
func contextTooLong(status int, errType, msg string) bool {
	switch {
	case status == http.StatusRequestEntityTooLarge:
		return true
	case status == http.StatusBadRequest && errType == "invalid_request_error":
		m := strings.ToLower(msg)
		return strings.Contains(m, "prompt is too long") ||
			strings.Contains(m, "exceed context limit") ||
			strings.Contains(m, "exceeds the context window")
	}
	return false
}

// classify turns any error of a call into a *model.Error, except a cancelled
// ctx, which is returned wrapped so that errors.Is(err, context.Canceled)
// holds and the engine can tell a stop from a failure.
func (c classifier) classify(ctx context.Context, err error) error {
	var me *model.Error
	if errors.As(err, &me) {
		return me
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return &model.Error{Kind: model.KindTimeout, Message: "anthropic: the call's deadline passed"}
		}
		return fmt.Errorf("anthropic respond: %w", ctxErr)
	}
	var se *streamError
	if errors.As(err, &se) {
		return &model.Error{Kind: model.KindServer, Message: c.message("malformed stream", se.msg)}
	}
	var ae *sdk.Error
	if errors.As(err, &ae) {
		if ae.StatusCode >= 400 {
			return c.apiError(ae)
		}
		return c.streamEventError(ae)
	}
	return model.TransportError(err, c.message)
}

// message is "anthropic: <what>: <detail>" on one line, short, and without
// the key, even if a proxy echoed it back.
func (c classifier) message(what, detail string) string {
	if what == "" {
		what = "error"
	}
	return scrub("anthropic: "+what+": "+detail, c.key)
}

// scrub removes key from s, then makes s one line of at most
// model.MaxMessageLen bytes (the key goes first, so a cut can never leave a
// part of it).
func scrub(s, key string) string {
	if key != "" {
		s = strings.ReplaceAll(s, key, "[redacted]")
	}
	return model.OneLine(s)
}

// retryAfter is how long the server asked to wait (0: the engine's
// backoff applies).
func retryAfter(h http.Header, now time.Time) time.Duration { return httpretry.After(h, now) }
