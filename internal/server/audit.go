package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The audit log: every request that changed state (POST, PUT, PATCH,
// DELETE under /v1, whatever its outcome) and every refused request (401,
// 403, 429, whatever its method or path) becomes an entry once its
// response is written: time, who called (or the first characters of the
// key it was refused for, never the key), method, route pattern, the ids
// its path names, status and request id. Reads that succeed are not
// entries.
//
// Each entry goes to two places: the store (Config.Audit, served at GET
// /v1/audit), and Config.AuditLog as one line (serve writes JSON lines to
// its log output). A store that fails to record an entry does not change
// the response, which is already written: the failure is logged at error
// level with the whole entry, so the log line is the record. Failing
// closed (refusing writes that cannot be audited) would need the entry
// written before the handler runs, without its outcome, and makes the
// audit store's availability the API's; it is not done.

// AuditRecorder keeps the audit log (the App's RecordAudit).
type AuditRecorder interface {
	RecordAudit(ctx context.Context, e *lt.AuditEntry) (int64, error)
}

// auditTimeout bounds the write of one entry: the request is answered,
// and its client may be gone.
const auditTimeout = 5 * time.Second

// maxAuditTarget bounds a target's length in an entry (a file path may be
// long; an id never is), and maxAuditMethod a method's (any token is one,
// and a refused request may send a long one).
const (
	maxAuditTarget = 256
	maxAuditMethod = 32
)

// audited reports whether a request with this method, path and status is
// an entry of the audit log.
func audited(method, path string, status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		return true
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return isAPIPath(path)
	}
	return false
}

// audit records r, answered with status, when it is an entry (audited).
// r carries its caller when it authenticated as one.
func (s *Server) audit(r *http.Request, status int) {
	if (s.cfg.Audit == nil && s.cfg.AuditLog == nil) || !audited(r.Method, r.URL.Path, status) {
		return
	}
	e := &lt.AuditEntry{
		Time:      s.cfg.Now().UTC().Truncate(time.Microsecond),
		Remote:    remoteIP(r),
		Method:    truncate(r.Method, maxAuditMethod),
		Status:    status,
		RequestID: requestID(r),
	}
	if c, ok := app.CallerFrom(r.Context()); ok {
		a := c.Actor()
		e.Actor = &a
	} else if token, ok := bearerToken(r.Header.Get("Authorization")); ok {
		e.KeyPrefix = app.KeyPrefix(token)
	}
	e.Route, e.Targets = s.routeTargets(r)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	if s.cfg.Audit != nil {
		seq, err := s.cfg.Audit.RecordAudit(ctx, e)
		if err != nil {
			s.log.LogAttrs(ctx, slog.LevelError, "audit entry not stored; this line is its record", append(auditAttrs(e), slog.Any("error", err))...)
			return
		}
		e.Seq = seq
	}
	if s.cfg.AuditLog != nil {
		s.cfg.AuditLog.LogAttrs(ctx, slog.LevelInfo, "audit", auditAttrs(e)...)
	}
}

// auditAttrs is e as log attributes.
func auditAttrs(e *lt.AuditEntry) []slog.Attr {
	attrs := []slog.Attr{slog.Time("audit_time", e.Time)}
	if e.Seq != 0 {
		attrs = append(attrs, slog.Int64("seq", e.Seq))
	}
	if e.Actor != nil {
		attrs = append(attrs, slog.Group("actor", "key_id", e.Actor.KeyID, "name", e.Actor.Name, "role", string(e.Actor.Role)))
	}
	if e.KeyPrefix != "" {
		attrs = append(attrs, slog.String("key_prefix", e.KeyPrefix))
	}
	attrs = append(attrs, slog.String("remote", e.Remote), slog.String("method", e.Method), slog.String("route", e.Route))
	if len(e.Targets) > 0 {
		targets := make([]any, 0, 2*len(e.Targets))
		for k, v := range e.Targets {
			targets = append(targets, k, v)
		}
		attrs = append(attrs, slog.Group("targets", targets...))
	}
	return append(attrs, slog.Int("status", e.Status), slog.String("request_id", e.RequestID))
}

// routeTargets returns the pattern of the route r matches ("" for none)
// and the ids its path names, each under the name of what it is: the
// singular of the path segment before it ("/v1/sessions/{id}/actions/
// {action_id}" gives session and action), or the wildcard's own name. It
// matches r again, on a copy, through s.matcher: a refused request never
// reached the router.
func (s *Server) routeTargets(r *http.Request) (string, map[string]string) {
	m := r.WithContext(r.Context())
	s.matcher.ServeHTTP(discardWriter{}, m)
	if m.Pattern == "" {
		return "", nil
	}
	var targets map[string]string
	for _, t := range s.targetNames[m.Pattern] {
		v := m.PathValue(t.wildcard)
		if v == "" {
			continue
		}
		v = truncate(v, maxAuditTarget)
		if targets == nil {
			targets = map[string]string{}
		}
		targets[t.name] = v
	}
	return m.Pattern, targets
}

// truncate cuts s to at most n bytes, at a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// auditTarget names a wildcard of a route in its entries.
type auditTarget struct{ name, wildcard string }

// patternTargets lists the wildcards of a ServeMux pattern with the name
// each target gets (see routeTargets).
func patternTargets(pattern string) []auditTarget {
	_, p, _ := strings.Cut(pattern, " ")
	segs := strings.Split(strings.Trim(p, "/"), "/")
	var out []auditTarget
	for i, seg := range segs {
		if !strings.HasPrefix(seg, "{") || !strings.HasSuffix(seg, "}") {
			continue
		}
		wildcard := strings.TrimSuffix(strings.Trim(seg, "{}"), "...")
		if wildcard == "$" {
			continue
		}
		name := wildcard
		if i > 0 && !strings.HasPrefix(segs[i-1], "{") {
			name = strings.TrimSuffix(segs[i-1], "s")
		}
		out = append(out, auditTarget{name: name, wildcard: wildcard})
	}
	return out
}

// discardWriter is the ResponseWriter of s.matcher's no-op handlers (and
// of its 404s and redirects): nothing is written anywhere.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// listAudit is GET /v1/audit?since=&actor=&cursor=&limit= (admin only): a
// page of the audit log, oldest first.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) error {
	var p lt.ListAuditParams
	var err error
	if p.Since, err = queryString(r, "since"); err != nil {
		return err
	}
	if p.Actor, err = queryString(r, "actor"); err != nil {
		return err
	}
	if p.Cursor, err = queryString(r, "cursor"); err != nil {
		return err
	}
	if p.Limit, err = queryLimit(r); err != nil {
		return err
	}
	l, err := s.b.ListAudit(r.Context(), p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, l)
}
