package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/storeutil"
)

// EventAppend appends p.Events with the next seqs and writes the session's
// projection, docs and blobs, all in one transaction, if the session's last
// seq is p.ExpectedSeq (else store.ErrConflict) and, when p.Fence is set, the
// session's lease is still (Fence.Owner, Fence.Epoch) (else
// store.ErrLeaseLost). The fence is checked first, so a worker that lost its
// lease always learns that, whatever seq it expected; only a seq past what a
// session's positions hold (errJournalFull, 2^32 - 1 events) is refused
// before it, as the parameters' own fault. At least one event is required:
// the journal is the truth, so the projection never changes without one.
func (s *Store) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	write, err := checks.PrepareEventAppend(p)
	if err != nil {
		return nil, err
	}
	events, docs, lastSeq := write.Events, write.Docs, write.LastSeq
	if lastSeq > maxSeq {
		// Refused here, before the writer: insertEvents would refuse it too,
		// but after the batch's other requests had run, which would run again.
		return nil, fmt.Errorf("append events to session %s: seq %d: %w", p.SessionID, lastSeq, errJournalFull)
	}

	var fenced bool
	var owner string
	var epoch int64
	if p.Fence != nil {
		fenced, owner, epoch = true, p.Fence.Owner, p.Fence.Epoch
	}
	// A lease holder's append that keeps its lease wakes no scheduler
	// (see LeavesClaimable): on one node, every step's append sent this
	// node's scheduler into a claim that found nothing.
	claimable := p.LeavesClaimable()

	// A bare request (see request.bare): its refusals come before its
	// first write, and any later failure rolls its batch back.
	err = s.w.do(ctx, &request{bare: true, run: func(w *writer) ([]store.Notification, error) {
		// The happy path is a conditional UPDATE; only when it changes
		// nothing do we read the row to say why.
		num, err := w.appendUpdate(p, lastSeq, fenced, owner, epoch)
		if err != nil {
			return nil, err
		}
		if err := w.insertEvents(num, events); err != nil {
			return nil, err
		}
		if err := w.upsertDocs(num, docs); err != nil {
			return nil, err
		}
		if err := w.insertBlobs(p.SessionID, p.Blobs); err != nil {
			return nil, err
		}
		if err := w.settleTree(p.TreeSettle, toMicros(p.UpdatedAt)); err != nil {
			return nil, err
		}
		notes := []store.Notification{{Kind: store.KindEvents, SessionID: p.SessionID, Seq: lastSeq, Status: p.Status}}
		if claimable {
			notes = append(notes, store.Notification{Kind: store.KindRunnable, SessionID: p.SessionID})
		}
		if store.ActionRaised(p.Docs) {
			notes = append(notes, store.Notification{Kind: store.KindActionRaised, SessionID: p.SessionID})
		}
		return notes, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("append events to session %s: %w", p.SessionID, err)
	}
	return events, nil
}

// The conditional UPDATE of an append sets the session's state, last seq
// and update time (and releases its lease if asked). SQLite rewrites the
// entries of every index on a column a statement sets, whatever the value,
// but only for the rows the statement changes, and most appends change
// none of the session's indexed columns (status, runnable, wake_at:
// sessions_status and sessions_runnable, two pages of the WAL per commit).
// So the first UPDATE (appendSameSQL) sets only the others, and matches the
// row only if the three already hold the append's values; when it changes
// nothing, the second (appendAllSQL) sets all of them, at a turn's start or
// end, or matches nothing for a refused append. Neither returns anything:
// the session's number, which its events' positions begin with
// (021_journal_positions), comes from sessionNums.
var appendSameSQL, appendAllSQL = func() (same, all [2]string) {
	for release := range 2 {
		set := `UPDATE sessions SET state = ?1, last_seq = ?2, updated_at = ?3`
		if release == 1 {
			set += `, lease_owner = NULL, lease_expires_at = NULL`
		}
		const where = `
WHERE id = ?4 AND last_seq = ?5 AND (NOT ?6 OR (lease_owner = ?7 AND lease_epoch = ?8))`
		same[release] = set + where + ` AND status IS ?9 AND runnable IS ?10 AND wake_at IS ?11`
		all[release] = set + `, status = ?9, runnable = ?10, wake_at = ?11` + where
	}
	return same, all
}()

// appendUpdate runs the UPDATEs of an append (appendSameSQL, then
// appendAllSQL if the first changed nothing) and returns the session's
// number. It returns an unwrittenError if neither changed anything (see
// appendRefused): a refused append writes nothing.
func (w *writer) appendUpdate(p *store.EventAppendParams, lastSeq int64, fenced bool, owner string, epoch int64) (int64, error) {
	num, err := w.sessionNum(p.SessionID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, mapErr(err)
	}
	if err == nil {
		release := boolInt(p.ReleaseLease)
		args := []any{jsonText(p.State), lastSeq, toMicros(p.UpdatedAt), p.SessionID, p.ExpectedSeq, boolInt(fenced), owner, epoch,
			p.Status, boolInt(p.Runnable), nullMicros(p.WakeAt)}
		for i, q := range [...]string{appendSameSQL[release], appendAllSQL[release]} {
			n, err := w.changed(q, args...)
			if err != nil {
				return 0, mapErr(err)
			}
			if n == 1 {
				if i == 1 {
					w.indexedSets.Add(1)
				}
				return num, nil
			}
		}
	}
	// Only a refusal wrote nothing for sure: a failed statement (an I/O
	// error may have rolled the transaction back) takes the batch down and
	// its other requests run again.
	err = w.appendRefused(p)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) {
		return 0, unwrittenError{err}
	}
	return 0, err
}

// appendRefused explains why the conditional UPDATE of an append matched no
// row: no session, a lost lease (checked first) or a moved seq.
func (w *writer) appendRefused(p *store.EventAppendParams) error {
	if err := w.journalAt(&store.JournalAt{SessionID: p.SessionID, ExpectedSeq: p.ExpectedSeq, Fence: p.Fence}); err != nil {
		return err
	}
	// The UPDATE and this read run in the same transaction on the only
	// writer, so the row cannot have changed in between.
	return fmt.Errorf("append refused with its session's last seq and lease matching")
}

// insertEvents inserts the events of the session numbered num in
// statements of up to maxEventsPerInsert rows: a step's append carries
// several events, and each statement costs far more than a row.
func (w *writer) insertEvents(num int64, events []store.Event) error {
	if len(events) == 0 {
		return nil
	}
	if last := events[len(events)-1].Seq; last > maxSeq {
		return fmt.Errorf("insert event of seq %d: %w", last, errJournalFull)
	}
	args := make([]any, 0, 7*min(len(events), maxEventsPerInsert))
	for len(events) > 0 {
		n := min(len(events), maxEventsPerInsert)
		args = args[:0]
		for i := range events[:n] {
			e := &events[i]
			args = append(args, eventPos(num, e.Seq), e.Type, toMicros(e.Time), e.TurnID, e.Step, e.WorkerID, jsonText(e.Data))
		}
		if _, err := w.exec(insertEventsSQL[n], args...); err != nil {
			return fmt.Errorf("insert events %d to %d: %w", events[0].Seq, events[n-1].Seq, mapErr(err))
		}
		events = events[n:]
	}
	return nil
}

// maxEventsPerInsert bounds the rows of one INSERT (7 columns each, far
// below SQLite's limit on a statement's parameters).
const maxEventsPerInsert = 16

// insertEventsSQL[n] inserts n events.
var insertEventsSQL = func() [maxEventsPerInsert + 1]string {
	var out [maxEventsPerInsert + 1]string
	for n := 1; n <= maxEventsPerInsert; n++ {
		out[n] = "INSERT INTO events (pos, type, time, turn_id, step, worker_id, data) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?), ", n), ", ")
	}
	return out
}()

// An event's position in the journal is its session's number and its seq
// in one integer (021_journal_positions).
const (
	seqBits = 32
	maxSeq  = 1<<seqBits - 1
)

func eventPos(num, seq int64) int64 { return num<<seqBits | seq }

// positions writes a session's range of positions into a statement: BITS
// its number's shift, MAXSEQ the last place after it.
var positions = strings.NewReplacer("BITS", strconv.Itoa(seqBits), "MAXSEQ", strconv.Itoa(maxSeq))

// errJournalFull refuses a seq beyond its session's range of positions:
// four billion events, which no session reaches.
var errJournalFull = fmt.Errorf("the journal of a session holds at most %d events", maxSeq)

// listEventsSQL reads a session's events after a seq by their positions
// (021_journal_positions), its number looked up once by the subquery.
var listEventsSQL = positions.Replace(
	`WITH s (num) AS (SELECT num FROM sessions WHERE id = ?1)
SELECT e.pos & MAXSEQ, e.type, e.time, e.turn_id, e.step, e.worker_id, e.data FROM s, events e
WHERE e.pos > (s.num << BITS) + ?2 AND e.pos <= (s.num << BITS) + MAXSEQ
ORDER BY e.pos LIMIT ?3`)

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
	err = s.query(ctx, func(rows *sql.Rows) error {
		var (
			e    store.Event
			t    int64
			data sql.NullString
		)
		if err := rows.Scan(&e.Seq, &e.Type, &t, &e.TurnID, &e.Step, &e.WorkerID, &data); err != nil {
			return err
		}
		e.SessionID = sessionID
		e.Time = fromMicros(t)
		e.Data = fromJSONText(data)
		out = append(out, e)
		return nil
	}, listEventsSQL, sessionID, min(afterSeq, maxSeq), limit)
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
