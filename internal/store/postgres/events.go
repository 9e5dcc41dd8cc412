package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// appendSQL is the whole condition of an append in one UPDATE: the seq the
// caller expects and, when fenced ($10), the lease it holds. Under READ
// COMMITTED a concurrent writer of the same session waits for the row lock
// and then re-checks the condition on the row as the other committed it.
// It fails (as checkedSQL does) when the condition does not hold, so the
// rest of the append, in the same statement or queued behind it in the
// same batch, is not kept.
//
// The same statement inserts the append's events ($13 on, as
// insertEventsSQL's arrays): one statement fewer for the server to bind,
// start and end at each append. The main query reads the UPDATE, so it
// runs first (its lock wait and re-check included) and its refusal aborts
// the statement before the INSERT, which PostgreSQL runs to completion
// after the main query, has written anything. appendStatement
// (appenddocs.go) adds the events' rows (appendrows.go), the docs' upserts
// and the main query.
//
// appended_at is moved only when it is a second (appendedAtStep) or more
// behind: an unchanged indexed column lets the update be heap-only
// (migration 013).
const appendSQL = `WITH changed AS (UPDATE sessions SET status = $1, state = $2, last_seq = $3, updated_at = $4,
    runnable = $5, wake_at = $6,
    appended_at = CASE WHEN appended_at > clock_timestamp() - interval '1 second' THEN appended_at ELSE clock_timestamp() END,
    lease_owner = CASE WHEN $7 THEN NULL ELSE lease_owner END,
    lease_expires_at = CASE WHEN $7 THEN NULL ELSE lease_expires_at END
WHERE id = $8 AND last_seq = $9 AND (NOT $10 OR (lease_owner = $11 AND lease_epoch = $12))
RETURNING 1), inserted AS (INSERT INTO events (session_id, seq, type, time, turn_id, step, worker_id, data)
`

// errAppendRefused: the append's condition did not hold; appendRefused
// reads why.
var errAppendRefused = errors.New("append refused")

// maxAppendAttempts bounds the sends of an append refused while the session
// changed back and forth between its refusal and the read that explains it.
const maxAppendAttempts = 3

// EventAppend appends p.Events with the next seqs and writes the session's
// projection, docs and blobs, all in one transaction, if the session's last
// seq is p.ExpectedSeq (else store.ErrConflict) and, when p.Fence is set, the
// session's lease is still (Fence.Owner, Fence.Epoch) (else
// store.ErrLeaseLost). The fence is checked first, so a worker that lost its
// lease always learns that, whatever seq it expected. At least one event is
// required: the journal is the truth, so the projection never changes
// without one.
//
// The whole append is one batch, run by the committer (committer.go): one
// round trip, and a commit shared with the appends of other sessions sent
// at the same time.
func (s *Store) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	events, docs, build, err := prepareAppend(p)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		err = s.committer.submit(ctx, build)
		if errors.Is(err, errDocRefused) {
			err = s.docRefused(ctx, docs, p.SessionID)
			break
		}
		if !errors.Is(err, errAppendRefused) {
			break
		}
		// Refused: say why, from the row as it is now. If it matches after
		// all (it changed, and changed back, since), send the append again.
		if err = s.appendRefused(ctx, p); err != nil {
			break
		}
		if attempt == maxAppendAttempts {
			err = fmt.Errorf("%w: the session kept changing while the append was sent", store.ErrConflict)
			break
		}
	}
	if err != nil {
		// The documents' JSON was left to the server (appendChecks): bad
		// input is refused as the other checks refuse it, whatever else
		// failed with it (a stale seq is read before the events' data).
		if _, bad := checks.PrepareEventAppend(p); bad != nil {
			return nil, bad
		}
		return nil, fmt.Errorf("append events to session %s: %w", p.SessionID, s.mapErr(err))
	}
	return events, nil
}

// prepareAppend checks an append and returns its events, its docs and
// what queues it, for the committer.
func prepareAppend(p *store.EventAppendParams) ([]store.Event, []store.DocWrite, func(t *txn), error) {
	write, err := appendChecks.PrepareEventAppend(p)
	if err != nil {
		// The first bad field is named, a document's JSON included.
		if _, first := checks.PrepareEventAppend(p); first != nil {
			err = first
		}
		return nil, nil, nil, err
	}
	events, docs, lastSeq := write.Events, write.Docs, write.LastSeq
	var (
		fenced bool
		owner  string
		epoch  int64
	)
	if p.Fence != nil {
		fenced, owner, epoch = true, p.Fence.Owner, p.Fence.Epoch
	}
	args := []any{p.Status, jsonArg(p.State), lastSeq, p.UpdatedAt, p.Runnable, p.WakeAt, p.ReleaseLease,
		p.SessionID, p.ExpectedSeq, fenced, owner, epoch}
	eventsForm := formFor(len(events))
	if eventsForm == oneRow {
		args = append(args, eventRow(&events[0])...)
	} else {
		args = append(args, eventColumns(events)...)
	}
	variant, docArgs := appendDocs(docs)
	variant |= withForm(0, eventsForm)
	args = append(args, docArgs...)
	build := func(t *txn) {
		onAppendRefused(t.queue(appendStatementFor(variant), args...))
		queueBlobs(t, p.SessionID, p.Blobs)
		queueSettleTree(t, p.TreeSettle, p.UpdatedAt)
		grew := store.Notification{Kind: store.KindEvents, SessionID: p.SessionID, Seq: lastSeq, Status: p.Status}
		if store.ActionRaised(p.Docs) {
			// Other nodes act on it at once (a runner's freed slot looks
			// for the sessions waiting for one).
			t.notify(store.Notification{Kind: store.KindActionRaised, SessionID: p.SessionID})
		}
		switch {
		case p.LeavesClaimable():
			t.notify(grew, store.Notification{Kind: store.KindRunnable, SessionID: p.SessionID})
		case p.Fence != nil:
			// The lease holder's own step: on other nodes only readers
			// of the journal (event streams, webhooks) hear of it, never
			// a runner, which this append did not make claimable and
			// which is this worker; they can hear it a moment late.
			t.notifyLater(grew)
		default:
			t.notify(grew)
		}
	}
	return events, docs, build, nil
}

// appendRefused explains why an append's condition did not hold: no
// session, a lost lease (checked first) or a moved seq. It returns nil if
// the row, as read now, matches after all.
func (s *Store) appendRefused(ctx context.Context, p *store.EventAppendParams) error {
	return s.journalAtRefused(ctx, &store.JournalAt{SessionID: p.SessionID, ExpectedSeq: p.ExpectedSeq, Fence: p.Fence})
}

// insertEventsSQL inserts a whole append's events in one statement, from one
// array per column.
const insertEventsSQL = `INSERT INTO events (session_id, seq, type, time, turn_id, step, worker_id, data)
SELECT $1, u.seq, u.type, u.time, u.turn_id, u.step, u.worker_id, NULLIF(u.data, '')::json
FROM unnest($2::bigint[], $3::text[], $4::timestamptz[], $5::text[], $6::bigint[], $7::text[], $8::text[])
    AS u(seq, type, time, turn_id, step, worker_id, data)`

func queueEvents(t *txn, events []store.Event) {
	if len(events) == 0 {
		return
	}
	t.queue(insertEventsSQL, append([]any{events[0].SessionID}, eventColumns(events)...)...)
}

// eventColumns returns the arrays, one per column but the session's, that
// insertEventsSQL and appendSQL insert events from. An event without data
// is sent as "" (no JSON document is empty), which the statements store as
// NULL: an array of strings is encoded without reflection, unlike one of
// pointers.
func eventColumns(events []store.Event) []any {
	var (
		seqs    = make([]int64, len(events))
		types   = make([]string, len(events))
		times   = make([]time.Time, len(events))
		turns   = make([]string, len(events))
		steps   = make([]int64, len(events))
		workers = make([]string, len(events))
		data    = make([]string, len(events))
	)
	for i := range events {
		e := &events[i]
		seqs[i], types[i], times[i], turns[i], steps[i], workers[i] = e.Seq, e.Type, e.Time, e.TurnID, int64(e.Step), e.WorkerID
		data[i] = string(e.Data)
	}
	return []any{seqs, types, times, turns, steps, workers, data}
}

// eventRow returns the values of one event's row, as eventColumns' arrays
// hold them, for an append of one event (appendrows.go).
func eventRow(e *store.Event) []any {
	return []any{e.Seq, e.Type, e.Time, e.TurnID, int64(e.Step), e.WorkerID, string(e.Data)}
}

// EventList returns up to limit events of a session with seq > afterSeq, in
// seq order; store.ErrNotFound for an unknown session. Limit 0 means 100;
// more than 10000 is an error.
func (s *Store) EventList(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]store.Event, error) {
	if err := checks.ID("session_id", sessionID); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	if afterSeq < 0 {
		return nil, fmt.Errorf("list events of session %s: after_seq must not be negative, got %d", sessionID, afterSeq)
	}
	limit, err := storeutil.EventPage.Limit(limit)
	if err != nil {
		return nil, fmt.Errorf("list events of session %s: %w", sessionID, err)
	}
	out := make([]store.Event, 0, min(limit, 256))
	err = s.query(ctx, func(rows pgx.Rows) error {
		var (
			e    store.Event
			data []byte
		)
		if err := rows.Scan(&e.Seq, &e.Type, &e.Time, &e.TurnID, &e.Step, &e.WorkerID, &data); err != nil {
			return err
		}
		e.SessionID = sessionID
		e.Time = e.Time.UTC()
		e.Data = fromJSON(data)
		out = append(out, e)
		return nil
	}, `SELECT seq, type, time, turn_id, step, worker_id, data FROM events
WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sessionID, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("list events of session %s: %w", sessionID, err)
	}
	if len(out) == 0 {
		if err := s.sessionExists(ctx, sessionID); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
	}
	return out, nil
}
