package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/freespace"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// codeMethodNotAllowed is the error code of a 405. API.md lists no code for
// it; this one follows the pattern of the others.
const codeMethodNotAllowed = "method_not_allowed"

// writeError is the one place an error becomes a response. An
// *apierror.Error is shown as it is (its Cause is logged, never sent);
// anything else is a 500 "internal error" with the cause in the log only.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := apierror.From(err)
	switch {
	case ae.Code == lt.CodeInternal && store.IsStorageFull(err):
		ae = storageFull(err)
	case ae.Code == lt.CodeInternal && errors.Is(err, store.ErrUnavailable):
		// The database went away (a restart, a failover): a client may
		// try again; whether a write in flight was made is unknown, so
		// the message says to look before writing again. The driver's
		// error (which may name the database's address) stays in the log.
		ae = &apierror.Error{Status: http.StatusServiceUnavailable, Code: lt.CodeUnavailable, Cause: err,
			Message: "the database is out of reach; retry shortly (a write in flight may or may not have been made: read before writing again)"}
	}
	if ae.Status < 400 || ae.Status > 599 {
		// A user-facing error with a non-error status is a backend bug;
		// nothing of it is shown.
		ae = apierror.Internal(err)
	}
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", ae.Status, "request_id", requestID(r)}
	switch {
	case r.Context().Err() != nil && errors.Is(err, context.Canceled):
		s.log.Debug("request abandoned by client", append(attrs, "error", err)...)
	case ae.Status >= 500:
		s.log.Error("request failed", append(attrs, "error", err, "cause", ae.Cause)...)
	default:
		s.log.Debug("request rejected", append(attrs, "error", err)...)
	}
	if hw, ok := w.(interface{ headerWritten() bool }); ok && hw.headerWritten() {
		// The response is under way (a stream); an error can only end it.
		return
	}
	body := ae.Body()
	if ae.Status >= 500 && ae.Code == lt.CodeInternal {
		body = internalBody()
	}
	if err := writeJSON(w, ae.Status, body); err != nil {
		s.log.Error("write error response", "error", err, "request_id", requestID(r))
	}
}

// storageFull is the 507 of a write that failed because the data volume
// is full. The message says what is full and what to do; the file system's
// own error (which names a path) stays in the log.
func storageFull(err error) *apierror.Error {
	var low *freespace.LowError
	if errors.As(err, &low) {
		return apierror.InsufficientStorage(err, "%s; nothing was saved: retry once space is freed", low.Error())
	}
	return apierror.InsufficientStorage(err, "the data volume is full; nothing was saved: retry once space is freed")
}

// internalBody is what every 500 says: nothing about the cause.
func internalBody() lt.ErrorResponse {
	return lt.ErrorResponse{Error: lt.Error{Code: lt.CodeInternal, Message: "internal error"}}
}

// writeJSON writes v as the JSON body of a response with the given status.
// It encodes before writing anything, so an encoding error can still become
// an error response. A write error means the client left; it is not
// reported.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	b = append(b, '\n')
	writeJSONBytes(w, status, b)
	return nil
}

// writeJSONBytes writes an already encoded JSON body.
func writeJSONBytes(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// unrouted explains a request that matched no route: 405 (setting Allow on
// w) when the path exists under another method, else 404. It asks the
// router's own fallback handler, which knows the path's methods, and keeps
// only its status and Allow header.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request) error {
	h, _ := s.mux.Handler(r)
	rec := &headerRecorder{header: make(http.Header)}
	h.ServeHTTP(rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		return &apierror.Error{
			Status:  http.StatusMethodNotAllowed,
			Code:    codeMethodNotAllowed,
			Message: fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow),
		}
	}
	return apierror.NotFound("no route for %s %s", r.Method, r.URL.Path)
}

// headerRecorder is a ResponseWriter that keeps the status and header and
// discards the body: enough to ask the router what it would have answered.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }

func (h *headerRecorder) Write(p []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(p), nil
}

func (h *headerRecorder) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

// unauthorized is a 401; the caller sets WWW-Authenticate.
func unauthorized(msg string) *apierror.Error {
	return &apierror.Error{Status: http.StatusUnauthorized, Code: lt.CodeUnauthorized, Message: msg}
}

// forbidden is a 403.
func forbidden(msg string) *apierror.Error {
	return &apierror.Error{Status: http.StatusForbidden, Code: lt.CodeForbidden, Message: msg}
}

// quoteField shortens and quotes a user-supplied string for an error
// message, so a huge or multi-line value cannot flood the response.
func quoteField(v string) string {
	const maxLen = 64
	if len(v) > maxLen {
		v = v[:maxLen] + "…"
	}
	return strconv.Quote(strings.ToValidUTF8(v, "\uFFFD"))
}
