package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/jsonstrict"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// readBody reads the whole request body. ServeHTTP has wrapped it in an
// http.MaxBytesReader, so an oversized body stops reading at the limit and
// becomes a 413 here.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, apierror.TooLarge("request body is larger than %d bytes", tooLarge.Limit)
		}
		if isTimeout(err) {
			// http.Server's ReadTimeout passed (which also ends the
			// request's context): the client is too slow, the server fine.
			return nil, &apierror.Error{Status: http.StatusBadRequest, Code: lt.CodeInvalidRequest,
				Message: "the request body did not arrive within the server's read timeout", Cause: err}
		}
		if r.Context().Err() != nil {
			return nil, fmt.Errorf("read request body: %w", r.Context().Err())
		}
		return nil, &apierror.Error{Status: http.StatusBadRequest, Code: lt.CodeInvalidRequest,
			Message: "the request body could not be read", Cause: err}
	}
	return data, nil
}

// isTimeout reports whether err is a deadline's expiry.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// decodeCreateSession decodes the body of POST /v1/sessions.
func decodeCreateSession(data []byte) (*lt.CreateSessionRequest, error) {
	var req lt.CreateSessionRequest
	if err := decodeJSON(data, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeCreateTurn decodes the body of POST /v1/sessions/{id}/turns.
func decodeCreateTurn(data []byte) (*lt.CreateTurnRequest, error) {
	var req lt.CreateTurnRequest
	if err := decodeJSON(data, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeSignal decodes the body of POST /v1/sessions/{id}/signals.
func decodeSignal(data []byte) (*lt.SignalRequest, error) {
	var req lt.SignalRequest
	if err := decodeJSON(data, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeFork decodes the body of POST /v1/sessions/{id}/fork.
func decodeFork(data []byte) (*lt.ForkRequest, error) {
	var req lt.ForkRequest
	if err := decodeJSON(data, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeReview decodes the body of POST /v1/sessions/{id}/review.
func decodeReview(data []byte) (*lt.ReviewRequest, error) {
	var req lt.ReviewRequest
	if err := decodeJSON(data, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeAddConstraint decodes the body of POST /v1/sessions/{id}/constraints.
func decodeAddConstraint(data []byte) (*lt.AddConstraintRequest, error) {
	var req lt.AddConstraintRequest
	if err := decodeJSON(data, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeCancel decodes the body of POST /v1/sessions/{id}/cancel. The
// reason is optional, so an empty body means "no reason" rather than an
// error: `curl -X POST .../cancel` is the natural way to cancel.
func decodeCancel(data []byte) (*lt.CancelRequest, error) {
	var req lt.CancelRequest
	if len(bytes.TrimSpace(data)) == 0 {
		return &req, nil
	}
	if err := decodeJSON(data, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeDecision decodes the body of POST /v1/sessions/{id}/actions/{action_id}.
func decodeDecision(data []byte) (*lt.Decision, error) {
	var d lt.Decision
	if err := decodeJSON(data, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// decodeBudgetPatch decodes the body of PATCH /v1/sessions/{id}/budget.
func decodeBudgetPatch(data []byte) (*lt.BudgetPatch, error) {
	var p lt.BudgetPatch
	if err := decodeJSON(data, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// decodeAgent decodes the body of POST /v1/agents.
func decodeAgent(data []byte) (*lt.PutAgentRequest, error) {
	var req lt.PutAgentRequest
	if err := decodeJSON(data, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeJSON decodes one JSON object from data into dst strictly: UTF-8,
// no unknown fields, no wrong types, no key given twice, nothing after the
// object, and not empty. Every failure is a 400 naming the field (a dotted
// path with [i] for array elements) or the byte offset.
func decodeJSON(data []byte, dst any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return apierror.Invalid("", "request body is empty: send a JSON object")
	}
	if err := jsonstrict.CheckUTF8(data, "the request body"); err != nil {
		return jsonstrict.Invalid(err, "re-read request body")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(data, dst, err)
	}
	if first := bytes.TrimLeft(data, " \t\r\n"); first[0] != '{' {
		// Only null gets here: other non-objects fail to decode above.
		return apierror.Invalid("", "request body must be a JSON object, got %s", jsonKind(first[0]))
	}
	end := dec.InputOffset()
	rest := data[end:]
	if trimmed := bytes.TrimLeft(rest, " \t\r\n"); len(trimmed) > 0 {
		return apierror.Invalid("", "unexpected data after the JSON object at byte offset %d",
			end+int64(len(rest)-len(trimmed)))
	}
	// The body decoded already, so it is valid JSON: another error than
	// a refusal is the server's, a 500.
	return jsonstrict.Invalid(jsonstrict.CheckUnambiguous(data[:end], reflect.TypeOf(dst)), "re-read request body")
}

// decodeError turns an encoding/json error into a 400 that says where.
func decodeError(data []byte, dst any, err error) error {
	var (
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		invalid   *json.InvalidUnmarshalError
	)
	switch {
	case errors.As(err, &syntaxErr):
		// Offset counts the bytes read including the offending one; report
		// the 0-based position of that byte.
		return apierror.Invalid("", "malformed JSON at byte offset %d: %s", max(syntaxErr.Offset-1, 0), syntaxErr.Error())
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return apierror.Invalid("", "malformed JSON: the body ends at byte offset %d before the JSON value does", len(data))
	case errors.As(err, &typeErr):
		path, ok := jsonstrict.ValuePathAt(data, typeErr.Offset)
		if !ok {
			path = typeErr.Field
		}
		if path == "" {
			return apierror.Invalid("", "request body must be a JSON object, got %s", typeErr.Value)
		}
		return apierror.Invalid(path, "field %q must be %s, got %s", path, describeType(typeErr.Type), shorten(typeErr.Value))
	case errors.As(err, &invalid):
		// dst is not a pointer: a programmer error, so a 500.
		return fmt.Errorf("decode request body: %w", err)
	}
	if name, ok := jsonstrict.UnknownFieldName(err); ok {
		path := jsonstrict.UnknownFieldPath(data, reflect.TypeOf(dst), name)
		return apierror.Invalid(path, "unknown field %q", path)
	}
	// An UnmarshalJSON method of a field type refused its value.
	return apierror.Invalid("", "invalid request body: %s", shorten(err.Error()))
}

// describeType names the JSON a Go type accepts, for messages such as
// `field "budget.max_tokens" must be an integer, got string`.
func describeType(t reflect.Type) string {
	if t == nil {
		return "a valid value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	default:
		return "a valid value"
	}
}

// jsonKind names the JSON value that starts with byte c.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// shorten bounds a value echoed in an error message.
func shorten(s string) string {
	const maxLen = 80
	if len(s) <= maxLen {
		return s
	}
	return strings.ToValidUTF8(s[:maxLen], "") + "…"
}

// Query parameters.

// queryInt parses the optional integer query parameter name, which must lie
// in [lo, hi]; def when it is absent or empty.
func queryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	vals := r.URL.Query()[name]
	if len(vals) == 0 || (len(vals) == 1 && vals[0] == "") {
		return def, nil
	}
	if len(vals) > 1 {
		return 0, apierror.Invalid(name, "query parameter %q is given %d times", name, len(vals))
	}
	n, err := strconv.ParseInt(vals[0], 10, 64)
	if err != nil {
		return 0, apierror.Invalid(name, "query parameter %q must be an integer, got %s", name, quoteField(vals[0]))
	}
	if n < lo || n > hi {
		if hi == math.MaxInt64 {
			return 0, apierror.Invalid(name, "query parameter %q must be at least %d, got %d", name, lo, n)
		}
		return 0, apierror.Invalid(name, "query parameter %q must be between %d and %d, got %d", name, lo, hi, n)
	}
	return n, nil
}

// Page sizes of list endpoints (API.md "Lists").
const (
	defaultLimit = 50
	maxLimit     = 500
)

// queryLimit parses ?limit= (1..500, default 50).
func queryLimit(r *http.Request) (int, error) {
	n, err := queryInt(r, "limit", defaultLimit, 1, maxLimit)
	return int(n), err
}

// queryString returns the optional string query parameter name, refusing
// repeats (which would otherwise be silently dropped).
func queryString(r *http.Request, name string) (string, error) {
	vals := r.URL.Query()[name]
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
		return vals[0], nil
	default:
		return "", apierror.Invalid(name, "query parameter %q is given %d times", name, len(vals))
	}
}

// queryEnum returns the optional query parameter name, which must be one of
// allowed when set.
func queryEnum(r *http.Request, name string, allowed ...string) (string, error) {
	v, err := queryString(r, name)
	if err != nil || v == "" {
		return v, err
	}
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", apierror.Invalid(name, "query parameter %q must be one of %s, got %s",
		name, strings.Join(allowed, ", "), quoteField(v))
}
