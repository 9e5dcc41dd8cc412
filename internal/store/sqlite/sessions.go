package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// SessionCreate inserts a session with its first events (seqs 1..n) and
// projection rows in one transaction; store.ErrConflict if the id exists.
// The session's LastSeq and Lease in the params are ignored: it starts with
// the seq of its last event and no lease (epoch 0). A zero UpdatedAt is
// taken to be CreatedAt. Subscribers hear KindEvents (if there were events)
// and, when the session is runnable or has a wake time, KindRunnable.
func (s *Store) SessionCreate(ctx context.Context, p *store.SessionCreateParams) ([]store.Event, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	sess, write, err := checks.PrepareSessionCreate(p)
	if err != nil {
		return nil, err
	}
	events, docs, lastSeq := write.Events, write.Docs, write.LastSeq

	err = s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		var (
			owner, expires any
			epoch          int64
		)
		if cl := p.Claim; cl != nil {
			owner, epoch, expires = cl.Owner, 1, toMicros(cl.ExpiresAt)
		}
		if pa := p.ParentAt; pa != nil {
			// The only writer: the parent cannot move before the commit.
			if err := w.journalAt(pa); err != nil {
				return nil, storeutil.ParentRefused(err)
			}
		}
		spec := jsonText(sess.Spec)
		if len(sess.Spec) > specInlineMax {
			spec = nil
		}
		var num int64
		err := w.queryRow(insertSessionSQL,
			sess.ID, sess.Project, sess.AgentName, sess.AgentVersion, nullString(sess.ParentID), sess.Status,
			spec, jsonText(sess.State), lastSeq, boolInt(sess.Runnable),
			nullMicros(sess.WakeAt), owner, epoch, expires, toMicros(sess.CreatedAt), toMicros(sess.UpdatedAt)).Scan(&num)
		if err != nil {
			return nil, mapErr(err)
		}
		if spec == nil && len(sess.Spec) > 0 {
			if _, err := w.exec(`INSERT INTO session_specs (id, spec) VALUES (?, ?)`, sess.ID, string(sess.Spec)); err != nil {
				return nil, mapErr(err)
			}
		}
		if err := w.insertEvents(num, events); err != nil {
			return nil, err
		}
		if err := w.upsertDocs(num, docs); err != nil {
			return nil, err
		}
		if err := w.insertBlobs(sess.ID, p.Blobs); err != nil {
			return nil, err
		}
		for _, d := range p.BlobRefs {
			if _, err := w.exec(`INSERT OR IGNORE INTO blob_refs (sha256, session_id) VALUES (?, ?)`, d, sess.ID); err != nil {
				return nil, fmt.Errorf("refer to blob %s: %w", d, mapErr(err))
			}
		}
		if wh := p.Webhook; wh != nil {
			if _, err := w.exec(`INSERT INTO webhook_sessions (session_id, secret, cursor) VALUES (?, ?, ?)`, sess.ID, wh.Secret, wh.Cursor); err != nil {
				return nil, fmt.Errorf("webhook state: %w", mapErr(err))
			}
		}
		var notes []store.Notification
		if lastSeq > 0 {
			notes = append(notes, store.Notification{Kind: store.KindEvents, SessionID: sess.ID, Seq: lastSeq, Status: sess.Status})
		}
		if (sess.Runnable || sess.WakeAt != nil) && p.Claim == nil {
			notes = append(notes, store.Notification{Kind: store.KindRunnable, SessionID: sess.ID})
		}
		return notes, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("create session %s: %w", sess.ID, err)
	}
	return events, nil
}

// insertSessionSQL inserts a session with the next number
// (021_journal_positions: its events' positions begin at num << 32) and
// returns the number. sessions_num finds the largest; the writer is the
// only one, so no other insert takes the same number meanwhile.
const insertSessionSQL = `INSERT INTO sessions (num, id, project, agent_name, agent_version, parent_id, status, spec, state,
    last_seq, runnable, wake_at, lease_owner, lease_epoch, lease_expires_at, created_at, updated_at)
VALUES ((SELECT coalesce(max(num), 0) + 1 FROM sessions), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING num`

// specInlineMax is the largest spec kept in its session's row, in bytes;
// a larger one is written once in session_specs (019_session_specs). Every
// append rewrites the session's row whole, and a row that does not fit its
// page is rewritten with a new chain of overflow pages; a spec up to this
// size leaves room in the page for a state of 1.5 kB or more.
const specInlineMax = 2048

// sessionColumns are a session row's columns for scanSession, its spec
// read from session_specs when the row holds none (coalesce reads it only
// then).
const sessionColumns = `id, project, agent_name, agent_version, parent_id, status,
    coalesce(spec, (SELECT p.spec FROM session_specs p WHERE p.id = sessions.id)), state, last_seq, runnable,
    wake_at, lease_owner, lease_epoch, lease_expires_at, created_at, updated_at`

func scanSession(sc interface{ Scan(...any) error }) (*store.SessionRow, error) {
	var (
		r                  store.SessionRow
		parent, owner      sql.NullString
		spec, state        sql.NullString
		runnable           int64
		wake, leaseExpires sql.NullInt64
		created, updated   int64
	)
	err := sc.Scan(&r.ID, &r.Project, &r.AgentName, &r.AgentVersion, &parent, &r.Status, &spec, &state, &r.LastSeq,
		&runnable, &wake, &owner, &r.Lease.Epoch, &leaseExpires, &created, &updated)
	if err != nil {
		return nil, err
	}
	r.ParentID = parent.String
	r.Spec = fromJSONText(spec)
	r.State = fromJSONText(state)
	r.Runnable = runnable != 0
	r.WakeAt = fromNullMicros(wake)
	r.Lease.SessionID = r.ID
	if owner.Valid {
		r.Lease.Owner = owner.String
		if leaseExpires.Valid {
			r.Lease.ExpiresAt = fromMicros(leaseExpires.Int64)
		}
	}
	r.CreatedAt = fromMicros(created)
	r.UpdatedAt = fromMicros(updated)
	return &r, nil
}

// SessionGet returns a session; store.ErrNotFound if there is none.
func (s *Store) SessionGet(ctx context.Context, id string) (*store.SessionRow, error) {
	if err := checks.ID("id", id); err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	row, err := s.queryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	r, err := scanSession(row)
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, s.readErr(err))
	}
	return r, nil
}

// SessionLastSeq returns the seq of a session's last event;
// store.ErrNotFound if there is no such session. It reads the database
// only for a session the writer has not appended to lately (lastSeqs).
func (s *Store) SessionLastSeq(ctx context.Context, id string) (int64, error) {
	if err := checks.ID("id", id); err != nil {
		return 0, fmt.Errorf("session last seq: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	seq, known, epoch := s.seqs.get(id)
	if known {
		return seq, nil
	}
	row, err := s.queryRow(ctx, `SELECT last_seq FROM sessions WHERE id = ?`, id)
	if err != nil {
		return 0, fmt.Errorf("last seq of session %s: %w", id, err)
	}
	if err := row.Scan(&seq); err != nil {
		return 0, fmt.Errorf("last seq of session %s: %w", id, s.readErr(err))
	}
	s.seqs.fill(id, seq, epoch)
	return seq, nil
}

// SessionProject returns a session's project; store.ErrNotFound if there
// is no such session.
func (s *Store) SessionProject(ctx context.Context, id string) (string, error) {
	if err := checks.ID("id", id); err != nil {
		return "", fmt.Errorf("session project: %w", err)
	}
	row, err := s.queryRow(ctx, `SELECT project FROM sessions WHERE id = ?`, id)
	if err != nil {
		return "", fmt.Errorf("project of session %s: %w", id, err)
	}
	var project string
	if err := row.Scan(&project); err != nil {
		return "", fmt.Errorf("project of session %s: %w", id, s.readErr(err))
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
	// use its index; the combinations are few and their statements cached.
	q := `SELECT ` + sessionColumns + ` FROM sessions WHERE 1 = 1`
	var args []any
	if p.Project != "" {
		q += ` AND project = ?`
		args = append(args, p.Project)
	}
	if p.Status != "" {
		q += ` AND status = ?`
		args = append(args, p.Status)
	}
	if p.Agent != "" {
		q += ` AND agent_name = ?`
		args = append(args, p.Agent)
	}
	if p.ParentID != "" {
		q += ` AND parent_id = ?`
		args = append(args, p.ParentID)
	}
	if p.RootsOnly {
		q += ` AND parent_id IS NULL`
	}
	if !p.CreatedFrom.IsZero() {
		if err := checks.Time("created_from", p.CreatedFrom); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		q += ` AND created_at >= ?`
		args = append(args, toMicros(p.CreatedFrom))
	}
	if !p.CreatedBefore.IsZero() {
		if err := checks.Time("created_before", p.CreatedBefore); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		q += ` AND created_at < ?`
		args = append(args, toMicros(p.CreatedBefore))
	}
	if p.Cursor != "" {
		row, err := s.queryRow(ctx, `SELECT created_at FROM sessions WHERE id = ?`, p.Cursor)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		var created int64
		if err := row.Scan(&created); err != nil {
			return nil, fmt.Errorf("list sessions: cursor %q: %w", p.Cursor, s.readErr(err))
		}
		q += ` AND (created_at < ? OR (created_at = ? AND id < ?))`
		args = append(args, created, created, p.Cursor)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)

	out := make([]*store.SessionRow, 0, min(limit, 64))
	err = s.query(ctx, func(rows *sql.Rows) error {
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
	err := s.query(ctx, func(rows *sql.Rows) error {
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

// journalAt refuses unless a session's journal ends at pa.ExpectedSeq and
// its lease is pa.Fence (when set): an append's condition, or a creation's
// ParentAt.
func (w *writer) journalAt(pa *store.JournalAt) error {
	var (
		lastSeq, epoch int64
		owner          sql.NullString
	)
	err := w.queryRow(`SELECT last_seq, lease_owner, lease_epoch FROM sessions WHERE id = ?`, pa.SessionID).
		Scan(&lastSeq, &owner, &epoch)
	if err != nil {
		return fmt.Errorf("session %s: %w", pa.SessionID, mapErr(err))
	}
	return storeutil.JournalAtRefusal(pa, lastSeq, owner.String, epoch)
}
