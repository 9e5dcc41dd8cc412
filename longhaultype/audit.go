package longhaultype

import "time"

// AuditEntry is one entry of the audit log (GET /v1/audit): a request that
// changed state (POST, PUT, PATCH, DELETE, whatever its outcome) or one
// that was refused (401, 403, 429, whatever its method).
type AuditEntry struct {
	// Seq numbers the entries in the order they were recorded.
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	// Actor is who called; absent when the request authenticated as no
	// one (a missing or refused key).
	Actor *Actor `json:"actor,omitempty"`
	// KeyPrefix is the first characters of a refused key (never the
	// whole key), to tell which one was tried.
	KeyPrefix string `json:"key_prefix,omitempty"`
	// Remote is the peer's IP address.
	Remote string `json:"remote,omitempty"`
	// Method is the HTTP method; Route the pattern of the route
	// ("POST /v1/sessions/{id}/cancel"), "" when no route matched.
	Method string `json:"method"`
	Route  string `json:"route"`
	// Targets are the ids the request named: the route's path values
	// ({"id": "ses_…", "action_id": "act_…"}).
	Targets   map[string]string `json:"targets,omitempty"`
	Status    int               `json:"status"`
	RequestID string            `json:"request_id"`
}

// ListAuditParams filters and pages GET /v1/audit (oldest first).
type ListAuditParams struct {
	// Since is an RFC 3339 time, or a duration before now such as 7d, 36h
	// or 90m. Default: the whole log.
	Since string
	// Actor keeps the entries of one key: its id, its name or, for
	// refused requests, its prefix.
	Actor string
	// Cursor is the previous page's next_cursor.
	Cursor string
	// Limit is 1-1000, default 100.
	Limit int
}
