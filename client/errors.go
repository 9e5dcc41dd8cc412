package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// APIError is a non-2xx response of the API. Code, Message and Field come
// from the API's error body ({"error": {"code", "message", "field"}}); when the
// body is not that (a proxy's HTML page, plain text), Code is derived from the
// status and Message holds the start of the body.
type APIError struct {
	Status  int
	Code    string
	Message string
	Field   string

	header http.Header // for Retry-After
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d)", e.Code, e.Status)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %s)", e.Field)
	}
	return b.String()
}

// maxErrorMessage bounds the part of a non-JSON error body kept as Message.
const maxErrorMessage = 512

func newAPIError(status int, header http.Header, body []byte) *APIError {
	e := &APIError{Status: status, header: header}
	var er lt.ErrorResponse
	if json.Unmarshal(body, &er) == nil && er.Error.Code != "" {
		e.Code, e.Message, e.Field = er.Error.Code, er.Error.Message, er.Error.Field
		return e
	}
	e.Code = codeForStatus(status)
	e.Message = bodySnippet(body)
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// bodySnippet is the first line-collapsed maxErrorMessage bytes of a body,
// cut at a rune boundary, so a stray HTML page still says something useful.
func bodySnippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) <= maxErrorMessage {
		return s
	}
	cut := maxErrorMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// codeForStatus maps a status to the API's error code (API.md
// "Conventions"), for error bodies that carry none.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return lt.CodeInvalidRequest
	case http.StatusUnauthorized:
		return lt.CodeUnauthorized
	case http.StatusForbidden:
		return lt.CodeForbidden
	case http.StatusNotFound:
		return lt.CodeNotFound
	case http.StatusConflict:
		return lt.CodeConflict
	case http.StatusRequestEntityTooLarge:
		return lt.CodePayloadTooLarge
	case http.StatusTooManyRequests:
		return lt.CodeRateLimited
	case http.StatusServiceUnavailable:
		return lt.CodeUnavailable
	}
	if status >= 500 {
		return lt.CodeInternal
	}
	return "http_" + fmt.Sprint(status)
}

// IsNotFound reports whether err is (or wraps) an API 404.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict reports whether err is (or wraps) an API 409: the same
// Idempotency-Key with another body, another decision on a resolved action,
// or the same Idempotency-Key still running on another node once the
// retries (which a 409 with a Retry-After gets) are spent.
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// HasCode reports whether err is (or wraps) an API error whose code is code,
// one of longhaultype's Code constants (CodeInvalidRequest, CodeNotFound...)
// or another the server sent (such as "not_implemented"). For the field an
// invalid_request names, use errors.As to reach the *APIError.
func HasCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

func hasStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}
