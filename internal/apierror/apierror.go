package apierror

import (
	"errors"
	"fmt"
	"net/http"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Error is a user-facing error.
type Error struct {
	Status  int
	Code    string
	Message string
	Field   string
	// Cause is logged, never sent.
	Cause error
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// Body is the wire form.
func (e *Error) Body() lt.ErrorResponse {
	return lt.ErrorResponse{Error: lt.Error{Code: e.Code, Message: e.Message, Field: e.Field}}
}

// Invalid is a 400 naming the field at fault.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: lt.CodeInvalidRequest, Message: fmt.Sprintf(format, args...), Field: field}
}

// NotFound is a 404.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: lt.CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// Conflict is a 409.
func Conflict(format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: lt.CodeConflict, Message: fmt.Sprintf(format, args...)}
}

// TooLarge is a 413.
func TooLarge(format string, args ...any) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: lt.CodePayloadTooLarge, Message: fmt.Sprintf(format, args...)}
}

// Unavailable is a 503 (the server is draining or storage is down).
func Unavailable(format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: lt.CodeUnavailable, Message: fmt.Sprintf(format, args...)}
}

// InsufficientStorage is a 507: the data volume is full, so the write was
// not made. The message says what is full, never where (a path of the
// server's machine).
func InsufficientStorage(cause error, format string, args ...any) *Error {
	return &Error{Status: http.StatusInsufficientStorage, Code: lt.CodeInsufficientStorage, Message: fmt.Sprintf(format, args...), Cause: cause}
}

// Internal wraps an unexpected error as a 500 whose message reveals nothing.
func Internal(cause error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: lt.CodeInternal, Message: "internal error", Cause: cause}
}

// From returns err as an *Error, wrapping anything else as Internal.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(err)
}

// Forbidden is a 403: the caller is known and may not do this.
func Forbidden(format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Code: lt.CodeForbidden, Message: fmt.Sprintf(format, args...)}
}
