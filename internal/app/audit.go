package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/report"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// DefaultAuditRetention is how long the audit log keeps an entry when
// serve is given no --audit-retention.
const DefaultAuditRetention = 90 * 24 * time.Hour

// A page of ListAudit: the store's own page (storeutil.AuditPage).
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// KeyPrefix is what the audit log keeps of a refused token: the first
// characters a key's list shows (keyPrefixLen), and never more than half
// of the token; nothing of a token that is not shaped as a stored key
// (KeyTokenPrefix): that is a bootstrap key, or a password pasted by
// mistake, of which no part may be written down.
func KeyPrefix(token string) string {
	if !strings.HasPrefix(token, KeyTokenPrefix) {
		return ""
	}
	n := min(keyPrefixLen, len(token)/2)
	// Cut at a character boundary: the prefix is stored as text.
	for n > 0 && n < len(token) && !utf8.RuneStart(token[n]) {
		n--
	}
	return token[:n]
}

// RecordAudit appends e to the audit log and returns its Seq. It is the
// transport's record of a request (internal/server audit.go), not a use
// case: no Service method, and no caller check (the request it records
// may be one that was refused for having no caller).
func (a *App) RecordAudit(ctx context.Context, e *lt.AuditEntry) (int64, error) {
	row := &store.AuditRow{
		Time:      e.Time,
		KeyPrefix: e.KeyPrefix,
		Remote:    e.Remote,
		Method:    e.Method,
		Route:     e.Route,
		Targets:   e.Targets,
		Status:    e.Status,
		RequestID: e.RequestID,
	}
	if e.Actor != nil {
		row.KeyID, row.ActorName, row.ActorRole = e.Actor.KeyID, e.Actor.Name, string(e.Actor.Role)
	}
	seq, err := a.store.AuditAppend(ctx, row)
	if err != nil {
		return 0, fmt.Errorf("record audit entry: %w", err)
	}
	return seq, nil
}

// ListAudit implements Service: a page of the audit log, oldest first;
// NextCursor is set when the page is full.
func (a *App) ListAudit(ctx context.Context, p lt.ListAuditParams) (*lt.List[lt.AuditEntry], error) {
	if err := Allow(ctx, "ListAudit"); err != nil {
		return nil, err
	}
	q := &store.AuditListParams{Actor: strings.TrimSpace(p.Actor), Limit: cmp.Or(p.Limit, defaultAuditLimit)}
	if q.Limit < 1 || q.Limit > maxAuditLimit {
		return nil, apierror.Invalid("limit", "limit must be between 1 and %d, got %d", maxAuditLimit, p.Limit)
	}
	if p.Since != "" {
		since, err := parseSince(p.Since, a.now())
		if err != nil {
			return nil, err
		}
		q.Since = since
	}
	if p.Cursor != "" {
		after, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil || after < 0 {
			return nil, apierror.Invalid("cursor", "cursor must be a next_cursor of this list, got %q", p.Cursor)
		}
		q.After = after
	}
	rows, err := a.store.AuditList(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	entries := make([]lt.AuditEntry, 0, len(rows))
	for _, r := range rows {
		entries = append(entries, auditEntry(r))
	}
	l := list(entries)
	if len(rows) == q.Limit {
		next := strconv.FormatInt(rows[len(rows)-1].Seq, 10)
		l.NextCursor = &next
	}
	return l, nil
}

// parseSince reads since: an RFC 3339 time, or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if y := t.Year(); y < 1 || y > 9999 {
			return time.Time{}, apierror.Invalid("since", "since must be between the years 1 and 9999")
		}
		return t.UTC(), nil
	}
	if d, ok := report.ParseDuration(s); ok && d < now.Sub(time.Time{}) {
		return now.Add(-d), nil
	}
	return time.Time{}, apierror.Invalid("since", "since must be an RFC 3339 time (2025-03-04T05:06:07Z) or a duration before now (7d, 36h, 90m), got %q", s)
}

// auditEntry is the wire form of r.
func auditEntry(r *store.AuditRow) lt.AuditEntry {
	e := lt.AuditEntry{
		Seq:       r.Seq,
		Time:      r.Time,
		KeyPrefix: r.KeyPrefix,
		Remote:    r.Remote,
		Method:    r.Method,
		Route:     r.Route,
		Targets:   r.Targets,
		Status:    r.Status,
		RequestID: r.RequestID,
	}
	if r.KeyID != "" || r.ActorName != "" || r.ActorRole != "" {
		e.Actor = &lt.Actor{KeyID: r.KeyID, Name: r.ActorName, Role: lt.Role(r.ActorRole)}
	}
	return e
}

// PruneAudit deletes the audit entries older than retention (as of the
// App's clock) and returns how many it deleted; retention 0 keeps every
// entry. Several nodes may prune at once: each entry goes once, and no
// prune fails for another's. Like RecordAudit it is the server's own
// bookkeeping, not a use case.
func (a *App) PruneAudit(ctx context.Context, retention time.Duration) (int64, error) {
	if retention < 0 {
		return 0, errors.New("prune audit log: negative retention")
	}
	if retention == 0 {
		return 0, nil
	}
	n, err := a.store.AuditPrune(ctx, a.now().Add(-retention))
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return n, nil
}
