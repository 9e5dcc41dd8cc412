package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/longhaul-dev/longhaul/internal/httpretry"
	"github.com/longhaul-dev/longhaul/internal/model"
)

// maxErrorBody bounds how much of an error response is read for its message.
const maxErrorBody = 64 << 10

// streamEndError is a stream that stopped before its terminal event: the
// answer is incomplete and the call is retried as a whole.
type streamEndError struct{ msg string }

func (e *streamEndError) Error() string { return e.msg }

// apiStreamError is an error the API reported inside a stream that began
// with HTTP 200 (a Responses "error" event or response.failed, a Chat
// Completions {"error": ...} chunk).
type apiStreamError struct{ code, msg string }

func (e *apiStreamError) Error() string { return e.code + ": " + e.msg }

// classifier turns what went wrong in one call into a *model.Error, with the
// call's key scrubbed from every message.
type classifier struct {
	key string
	now func() time.Time
}

// classify turns any error of a call into a *model.Error, except a cancelled
// ctx, which is returned wrapped so that errors.Is(err, context.Canceled)
// holds and the engine can tell a stop from a failure. httpResp is the
// call's HTTP response when one arrived.
func (c classifier) classify(ctx context.Context, err error, httpResp *http.Response) error {
	var me *model.Error
	if errors.As(err, &me) {
		return me
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return &model.Error{Kind: model.KindTimeout, Message: "openai: the call's deadline passed"}
		}
		return fmt.Errorf("openai respond: %w", ctxErr)
	}

	var reqErr *requestError
	if errors.As(err, &reqErr) {
		return &model.Error{Kind: model.KindBadRequest, Message: c.message("invalid request", reqErr.msg)}
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		body := errorBody{code: apiErr.Code, typ: apiErr.Type, msg: apiErr.Message}
		resp := apiErr.Response
		if resp == nil {
			resp = httpResp
		}
		if body.msg == "" && resp != nil {
			body = readErrorBody(resp)
		}
		return c.statusError(apiErr.StatusCode, body, resp)
	}
	// An error body the SDK could not parse still has its status.
	if httpResp != nil && httpResp.StatusCode >= 400 {
		return c.statusError(httpResp.StatusCode, readErrorBody(httpResp), httpResp)
	}

	var sseErr *ssestream.StreamError
	if errors.As(err, &sseErr) {
		b := parseErrorBody(sseErr.Event.Data)
		if b.msg == "" {
			b.msg = "error in the stream"
		}
		return c.streamError(&apiStreamError{code: firstNonEmpty(b.code, b.typ), msg: b.msg})
	}
	var streamErr *apiStreamError
	if errors.As(err, &streamErr) {
		return c.streamError(streamErr)
	}
	var endErr *streamEndError
	if errors.As(err, &endErr) {
		return &model.Error{Kind: model.KindServer, Message: c.message("incomplete response", endErr.msg)}
	}

	return model.TransportError(err, c.message)
}

// statusError classifies an HTTP error response (status >= 400).
func (c classifier) statusError(status int, body errorBody, resp *http.Response) *model.Error {
	kind := model.KindForStatus(status)
	switch {
	case contextTooLong(status, body):
		kind = model.KindContextTooLong
	case model.IsAuthCode(body.code):
		// e.g. a 429 that waiting does not cure: the account is out of
		// credit.
		kind = model.KindAuth
	}
	msg := body.msg
	if msg == "" {
		msg = http.StatusText(status)
	}
	what := firstNonEmpty(body.code, body.typ, "HTTP "+strconv.Itoa(status))
	me := &model.Error{Kind: kind, Status: status, Message: c.message(what, msg)}
	if resp != nil {
		me.RetryAfter = retryAfter(resp.Header, c.now())
	}
	return me
}

// streamError classifies an error reported inside a stream: the call failed
// midway, and unless the API says why, it is a server error worth a retry.
func (c classifier) streamError(e *apiStreamError) *model.Error {
	kind := model.KindServer
	switch {
	case contextTooLong(http.StatusBadRequest, errorBody{code: e.code, msg: e.msg}):
		kind = model.KindContextTooLong
	case e.code == "rate_limit_exceeded" || e.code == "rate_limit_error":
		kind = model.KindRateLimited
	case e.code == "server_is_overloaded" || e.code == "overloaded" || e.code == "overloaded_error":
		kind = model.KindOverloaded
	case model.IsAuthCode(e.code):
		kind = model.KindAuth
	case e.code == "invalid_prompt":
		kind = model.KindBadRequest
	}
	return &model.Error{Kind: kind, Message: c.message(firstNonEmpty(e.code, "stream error"), e.msg)}
}

// contextTooLong reports whether an error says the context does not fit the
// model: OpenAI's code context_length_exceeded, or the wording of the
// compatible servers (vLLM "maximum context length", llama.cpp "exceeds the
// available context size", LiteLLM ContextWindowExceededError), or a 413 (the
// body is over the server's limit). All are cured by compaction, the remedy
// the engine applies to model.KindContextTooLong.
func contextTooLong(status int, b errorBody) bool {
	if b.code == "context_length_exceeded" || b.typ == "context_length_exceeded" {
		return true
	}
	if status == http.StatusRequestEntityTooLarge {
		return true
	}
	if status != http.StatusBadRequest {
		return false
	}
	s := strings.ToLower(b.code + " " + b.typ + " " + b.msg)
	for _, p := range []string{"context length", "context_length", "context window", "contextwindow", "context size", "exceed_context_size"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// errorBody is what an error response or chunk says: OpenAI's
// {"error": {"code", "type", "message"}}, or a compatible server's variant.
type errorBody struct{ code, typ, msg string }

func readErrorBody(resp *http.Response) errorBody {
	if resp == nil || resp.Body == nil {
		return errorBody{}
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return parseErrorBody(b)
}

// parseErrorBody reads the shapes error bodies come in: {"error": {...}}
// (OpenAI, Ollama, LiteLLM), {"error": "..."}, {"message": "..."} (vLLM) and
// {"detail": "..."}. Anything else, if it is short text and not a page of
// HTML, is the message itself.
func parseErrorBody(b []byte) errorBody {
	b = bytes.TrimSpace(b)
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		if len(b) > 0 && b[0] != '<' && utf8.Valid(b) {
			return errorBody{msg: string(b)}
		}
		return errorBody{}
	}
	if raw, ok := top["error"]; ok {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil {
			return errorBody{code: jsonText(obj["code"]), typ: jsonText(obj["type"]), msg: jsonText(obj["message"])}
		}
		return errorBody{msg: jsonText(raw)}
	}
	return errorBody{code: jsonText(top["code"]), typ: jsonText(top["type"]), msg: firstNonEmpty(jsonText(top["message"]), jsonText(top["detail"]))}
}

// jsonText is a JSON string's value or a number's text; "" for anything
// else.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// retryAfter is how long the server asked to wait (0: the engine's
// backoff applies).
func retryAfter(h http.Header, now time.Time) time.Duration { return httpretry.After(h, now) }

// message is "openai: <what>: <detail>" on one line, short, and without the
// key, even if a server echoed it back.
func (c classifier) message(what, detail string) string {
	return c.scrub("openai: " + what + ": " + detail)
}

// keyLike matches what looks like an OpenAI key, whole or masked
// ("sk-abc***xyz", as the API quotes a wrong key): even a part of a key is
// not for the journal.
var keyLike = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-*]{4,}`)

// scrub removes the key and anything key-like from s, then makes s one line
// of at most model.MaxMessageLen bytes (the key goes first, so a cut can never
// leave a part of it).
func (c classifier) scrub(s string) string {
	if c.key != "" {
		s = strings.ReplaceAll(s, c.key, "[redacted]")
	}
	s = keyLike.ReplaceAllString(s, "[redacted]")
	return model.OneLine(s)
}
