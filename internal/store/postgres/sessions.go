package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// SessionCreate inserts a session with its first events (seqs 1..n),
// projection rows and blobs in one transaction; store.ErrConflict if the id
// exists. The session's LastSeq and Lease in the params are ignored: it
// starts with the seq of its last event and no lease (epoch 0). A zero
// UpdatedAt is taken to be CreatedAt. Subscribers hear KindEvents (if there
// were events) and, when the session is runnable or has a wake time,
// KindRunnable.
func (s *Store) SessionCreate(ctx context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	sess, write, err := checks.PrepareSessionCreate(p)
	if err != nil {
		return nil, err
	}
	events, docs, lastSeq := write.Events, write.Docs, write.LastSeq

	// One batch, run by the committer (committer.go) like an append.
	err = s.committer.submit(ctx, func(t *txn) {
		var (
			owner   *string
			epoch   int64
			expires *time.Time
		)
		if cl := p.Claim; cl != nil {
			owner, epoch, expires = &cl.Owner, 1, &cl.ExpiresAt
		}
		if pa := p.ParentAt; pa != nil {
			queueJournalAt(t, pa)
		}
		t.queue(`INSERT INTO sessions (id, project, agent_name, agent_version, parent_id, status, spec, state,
    last_seq, runnable, wake_at, lease_owner, lease_epoch, lease_expires_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
			sess.ID, sess.Project, sess.AgentName, sess.AgentVersion, nullText(sess.ParentID), sess.Status,
			jsonArg(sess.Spec), jsonArg(sess.State), lastSeq, sess.Runnable,
			sess.WakeAt, owner, epoch, expires, sess.CreatedAt, sess.UpdatedAt)
		queueEvents(t, events)
		queueDocs(t, docs)
		queueBlobs(t, sess.ID, p.Blobs)
		for _, d := range p.BlobRefs {
			t.queue(insertBlobRefSQL, d, sess.ID)
		}
		if wh := p.Webhook; wh != nil {
			t.queue(`INSERT INTO webhook_sessions (session_id, secret, cursor) VALUES ($1, $2, $3)`, sess.ID, wh.Secret, wh.Cursor)
		}
		if lastSeq > 0 {
			t.notify(store.Notification{Kind: store.KindEvents, SessionID: sess.ID, Seq: lastSeq, Status: sess.Status})
		}
		if (sess.Runnable || sess.WakeAt != nil) && p.Claim == nil {
			t.notify(store.Notification{Kind: store.KindRunnable, SessionID: sess.ID})
		}
	})
	if errors.Is(err, errParentMoved) {
		err = s.parentMoved(ctx, p.ParentAt)
	}
	if err != nil {
		return nil, fmt.Errorf("create session %s: %w", sess.ID, s.mapErr(err))
	}
	return events, nil
}

// errParentMoved is queueJournalAt's refusal, before it is explained.
var errParentMoved = fmt.Errorf("%w: %w", store.ErrParentMoved, store.ErrConflict)

// journalAtSQL holds a session's row (FOR SHARE, until the transaction
// ends: a write to that session's journal waits for it) if it is as
// SessionCreateParams.ParentAt expects it, and fails inside the database
// otherwise (checkedSQL's division by zero), aborting the transaction.
const journalAtSQL = `WITH parent AS (SELECT 1 FROM sessions
    WHERE id = $1 AND last_seq = $2 AND (NOT $3 OR (lease_owner = $4 AND lease_epoch = $5)) FOR SHARE)
SELECT 1 / count(*) FROM parent`

// queueJournalAt queues the check of pa (SessionCreateParams.ParentAt).
func queueJournalAt(t *txn, pa *store.JournalAt) {
	var (
		fenced bool
		owner  string
		epoch  int64
	)
	if f := pa.Fence; f != nil {
		fenced, owner, epoch = true, f.Owner, f.Epoch
	}
	onNoRow(t.queue(journalAtSQL, pa.SessionID, pa.ExpectedSeq, fenced, owner, epoch), func() error { return errParentMoved })
}

// parentMoved says why a creation's ParentAt was refused, from the
// parent's row as it is now.
func (s *Store) parentMoved(ctx context.Context, pa *store.JournalAt) error {
	if err := s.journalAtRefused(ctx, pa); err != nil {
		return storeutil.ParentRefused(err)
	}
	return errParentMoved // it moved, and came back, since
}

// journalAtRefused says why a session is not as pa expects it, from its
// row as it is now (storeutil.JournalAtRefusal), or nil if it is.
func (s *Store) journalAtRefused(ctx context.Context, pa *store.JournalAt) error {
	var (
		lastSeq, epoch int64
		owner          *string
	)
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&lastSeq, &owner, &epoch) },
		`SELECT last_seq, lease_owner, lease_epoch FROM sessions WHERE id = $1`, pa.SessionID)
	if err != nil {
		return fmt.Errorf("session %s: %w", pa.SessionID, err)
	}
	held := ""
	if owner != nil {
		held = *owner
	}
	return storeutil.JournalAtRefusal(pa, lastSeq, held, epoch)
}

const sessionColumns = `id, project, agent_name, agent_version, parent_id, status, spec, state, last_seq, runnable,
    wake_at, lease_owner, lease_epoch, lease_expires_at, created_at, updated_at`

func scanSession(sc rowScanner) (*store.SessionRow, error) {
	var (
		r             store.SessionRow
		parent, owner *string
		spec, state   []byte
		wake, expires *time.Time
	)
	err := sc.Scan(&r.ID, &r.Project, &r.AgentName, &r.AgentVersion, &parent, &r.Status, &spec, &state, &r.LastSeq,
		&r.Runnable, &wake, &owner, &r.Lease.Epoch, &expires, &r.CreatedAt, &r.UpdatedAt)
	if err != nil {
		return nil, err
	}
	if parent != nil {
		r.ParentID = *parent
	}
	r.Spec = fromJSON(spec)
	r.State = fromJSON(state)
	r.WakeAt = utcPtr(wake)
	r.Lease.SessionID = r.ID
	if owner != nil {
		r.Lease.Owner = *owner
		if expires != nil {
			r.Lease.ExpiresAt = expires.UTC()
		}
	}
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	return &r, nil
}

// SessionGet returns a session; store.ErrNotFound if there is none.
func (s *Store) SessionGet(ctx context.Context, id string) (*store.SessionRow, error) {
	if err := checks.ID("id", id); err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	// Read with the other sessions asked for at the same time (reader.go).
	r, err := s.reader.get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, s.mapErr(err))
	}
	return r, nil
}

// SessionLastSeq returns the seq of a session's last event;
// store.ErrNotFound if there is no such session.
func (s *Store) SessionLastSeq(ctx context.Context, id string) (int64, error) {
	if err := checks.ID("id", id); err != nil {
		return 0, fmt.Errorf("session last seq: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	// Read with the other sessions asked for at the same time (reader.go).
	seq, err := s.seqs.get(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("last seq of session %s: %w", id, s.mapErr(err))
	}
	return seq, nil
}

// SessionProject returns a session's project; store.ErrNotFound if there
// is no such session.
func (s *Store) SessionProject(ctx context.Context, id string) (string, error) {
	if err := checks.ID("id", id); err != nil {
		return "", fmt.Errorf("session project: %w", err)
	}
	var project string
	err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&project) },
		`SELECT project FROM sessions WHERE id = $1`, id)
	if err != nil {
		return "", fmt.Errorf("project of session %s: %w", id, err)
	}
	return project, nil
}

// SessionList returns sessions newest first (created_at, then id,
// descending), filtered by the non-empty fields of p. Limit 0 means 50; more
// than 1000 is an error. Cursor is the id of the last session of the
// previous page; store.ErrNotFound if no such session exists.
func (s *Store) SessionList(ctx context.Context, p *store.SessionListParams) ([]*store.SessionRow, error) {
	if p == nil {
		p = &store.SessionListParams{}
	}
	limit, err := storeutil.SessionPage.Limit(p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}

	// One statement shape per combination of filters keeps each one able to
	// use its index; pgx prepares each shape once per connection.
	q := `SELECT ` + sessionColumns + ` FROM sessions WHERE true`
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if p.Project != "" {
		q += ` AND project = ` + arg(p.Project)
	}
	if p.Status != "" {
		q += ` AND status = ` + arg(p.Status)
	}
	if p.Agent != "" {
		q += ` AND agent_name = ` + arg(p.Agent)
	}
	if p.ParentID != "" {
		q += ` AND parent_id = ` + arg(p.ParentID)
	}
	if p.RootsOnly {
		q += ` AND parent_id IS NULL`
	}
	if !p.CreatedFrom.IsZero() {
		if err := checks.Time("created_from", p.CreatedFrom); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		q += ` AND created_at >= ` + arg(p.CreatedFrom)
	}
	if !p.CreatedBefore.IsZero() {
		if err := checks.Time("created_before", p.CreatedBefore); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		q += ` AND created_at < ` + arg(p.CreatedBefore)
	}
	if p.Cursor != "" {
		var created time.Time
		err := s.queryRow(ctx, func(row pgx.Row) error { return row.Scan(&created) },
			`SELECT created_at FROM sessions WHERE id = $1`, p.Cursor)
		if err != nil {
			return nil, fmt.Errorf("list sessions: cursor %q: %w", p.Cursor, err)
		}
		q += ` AND (created_at, id) < (` + arg(created) + `, ` + arg(p.Cursor) + `)`
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ` + arg(limit)

	out := make([]*store.SessionRow, 0, min(limit, 64))
	err = s.query(ctx, func(rows pgx.Rows) error {
		r, err := scanSession(rows)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// SessionCountByStatus counts the sessions of each status; it reads only
// the sessions_status index.
func (s *Store) SessionCountByStatus(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64)
	err := s.query(ctx, func(rows pgx.Rows) error {
		var (
			status string
			n      int64
		)
		if err := rows.Scan(&status, &n); err != nil {
			return err
		}
		out[status] = n
		return nil
	}, `SELECT status, count(*) FROM sessions GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count sessions by status: %w", err)
	}
	return out, nil
}
