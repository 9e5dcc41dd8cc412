package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// batch accumulates events for one append. Each event is applied to the
// working state as it is added, so the code that builds a batch always sees
// the state its next event will land on; the state and the projection rows
// the batch touched are written with the events in one transaction.
type batch struct {
	e *Engine
	// ctx is the context of the write the batch belongs to (the request,
	// or the runner's claim): what add reads on the way (the vault's
	// redactor) is read under it.
	ctx      context.Context
	st       *journal.State
	workerID string
	events   []lt.Event
	blobs    []store.BlobWrite
	changes  journal.Changes
	// encoded counts the events add encoded itself, unredacted: when they
	// are all the batch holds, every JSON document of the append is the
	// encoder's (store.EventAppendParams.Encoded). An event put in the
	// batch another way (a fork's copies, a batch carried over a
	// conflict, whose data may be rewritten) leaves the store to check
	// the append's JSON.
	encoded int
}

func (e *Engine) newBatch(ctx context.Context, st *journal.State, workerID string) *batch {
	return &batch{e: e, ctx: ctx, st: st, workerID: workerID}
}

// actor is who the decisions of the batch are journaled as made by: the
// actor of the request it belongs to (nil for a runner's batch).
func (b *batch) actor() *lt.Actor { return actorOf(b.ctx) }

// add appends one event to the batch and applies it to the working state.
func (b *batch) add(typ, turnID string, step int, data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode %s: %w", typ, err)
	}
	// No secret value is ever journaled (DESIGN.md principle 8): a tool
	// output that echoes one keeps only its name.
	red, err := b.e.redactor(b.ctx)
	if err != nil {
		return err
	}
	redacted := false
	if red != nil && !red.Empty() {
		out := red.JSON(raw)
		redacted = !bytes.Equal(out, raw)
		raw = out
	}
	// The stores keep an event's time to the microsecond: the projection
	// must see the time a replay of the journal will read back, or the
	// stored state would not be the journal's (updated_at, a tally's end).
	ev := lt.Event{
		Seq: b.st.Session.LastEventSeq + 1, Type: typ, Time: b.e.clock.Now().Truncate(time.Microsecond), SessionID: b.st.Session.ID,
		TurnID: turnID, Step: step, WorkerID: b.workerID, Data: raw,
	}
	if typ == lt.EventSessionCreated {
		ev.Seq = 1
	}
	if !redacted {
		// Applied and followed as the value just encoded, not decoded
		// again: the copy kept is what decoding raw gives (a redacted
		// payload is not its value: it is decoded).
		ev = ev.WithPayload(data)
	}
	if err := journal.Apply(b.st, ev, &b.changes); err != nil {
		return err
	}
	if b.events == nil {
		// A step's batch holds a few events: room for them at once
		// rather than growing the slice event by event.
		b.events = make([]lt.Event, 0, 4)
	}
	b.events = append(b.events, ev)
	if !redacted {
		b.encoded++
	}
	return nil
}

// status appends a status change if the session is not already in to.
// A paused session stays paused until it is resumed or its turns end: a
// decision taken meanwhile does not make it running.
func (b *batch) status(to lt.SessionStatus, stopReason string) error {
	from := b.st.Session.Status
	if from == to && stopReason == "" {
		return nil
	}
	if b.st.Paused() && to != lt.SessionPaused && !to.Terminal() {
		return nil
	}
	return b.add(lt.EventSessionStatusChanged, "", 0, lt.SessionStatusChangedData{From: from, To: to, StopReason: stopReason})
}

func (b *batch) blob(data []byte) string {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	b.blobs = append(b.blobs, store.BlobWrite{SHA256: h, Data: data})
	return h
}

func (b *batch) empty() bool { return len(b.events) == 0 }

// storeEvents converts the batch's events for the store, moving payloads
// over the blob threshold into content-addressed blobs written in the same
// transaction: the journal stays small however long a session runs.
func (b *batch) storeEvents() ([]store.NewEvent, []store.BlobWrite, error) {
	out := make([]store.NewEvent, 0, len(b.events))
	blobs := b.blobs
	for _, ev := range b.events {
		data := ev.Data
		// A steering message stays inline (it is bounded, maxSteerBytes):
		// the projection reads its interrupt flag on replay.
		if len(data) > b.e.cfg.BlobThreshold && ev.Type != lt.EventTurnSteered {
			sum := sha256.Sum256(data)
			h := hex.EncodeToString(sum[:])
			blobs = append(blobs, store.BlobWrite{SHA256: h, Data: data})
			stub, err := json.Marshal(lt.BlobData{Blob: lt.BlobRef{SHA256: h, Size: int64(len(data))}, Preview: preview(data, 1024)})
			if err != nil {
				return nil, nil, err
			}
			data = stub
		}
		out = append(out, store.NewEvent{Type: ev.Type, Time: ev.Time, TurnID: ev.TurnID, Step: ev.Step, WorkerID: ev.WorkerID, Data: data})
	}
	return out, blobs, nil
}

func preview(data []byte, n int) string {
	if len(data) <= n {
		return string(data)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(data[cut]) {
		cut--
	}
	return string(data[:cut])
}

func (b *batch) docs() ([]store.DocWrite, error) {
	changed := b.changes.Docs()
	out := make([]store.DocWrite, 0, len(changed))
	for _, d := range changed {
		raw, err := json.Marshal(d.Value)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", d.Kind, d.ID, err)
		}
		out = append(out, store.DocWrite{Kind: store.DocKind(d.Kind), ID: d.ID, SessionID: b.st.Session.ID, Status: d.Status, Doc: raw, CreatedAt: d.CreatedAt})
	}
	return out, nil
}

// appendParams builds the store call for the batch. expectedSeq is the seq the
// batch was built on.
func (b *batch) appendParams(expectedSeq int64, fence *store.Lease, release bool) (*store.EventAppendParams, error) {
	evs, blobs, err := b.storeEvents()
	if err != nil {
		return nil, err
	}
	docs, err := b.docs()
	if err != nil {
		return nil, err
	}
	state, err := json.Marshal(b.st)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return &store.EventAppendParams{
		SessionID: b.st.Session.ID, ExpectedSeq: expectedSeq, Fence: fence, Events: evs,
		Status: string(b.st.Session.Status), State: state, UpdatedAt: b.st.Session.UpdatedAt,
		Runnable: b.st.Runnable(), WakeAt: wakeAt(b.st), ReleaseLease: release, Docs: docs, Blobs: blobs,
		// The state, the docs and the blob stubs are json.Marshal's.
		Encoded: b.encoded == len(b.events),
	}, nil
}

// loadState reads a session's row and decodes its projection.
func (e *Engine) loadState(ctx context.Context, sessionID string) (*store.SessionRow, *journal.State, error) {
	row, err := e.store.SessionGet(ctx, sessionID)
	if err != nil {
		return nil, nil, err
	}
	st, err := decodeState(row)
	if err != nil {
		return nil, nil, err
	}
	return row, st, nil
}

// decodeState decodes the state of row, which must be at its last seq.
func decodeState(row *store.SessionRow) (*journal.State, error) {
	var st journal.State
	if err := json.Unmarshal(row.State, &st); err != nil {
		return nil, fmt.Errorf("decode state of session %s: %w", row.ID, err)
	}
	if st.Session.LastEventSeq != row.LastSeq {
		return nil, fmt.Errorf("session %s: state at seq %d but journal at %d", row.ID, st.Session.LastEventSeq, row.LastSeq)
	}
	return &st, nil
}

// mutate runs an API-side change: fn builds a batch on the session's current
// state; the batch is appended conditional on that state's seq. If the
// journal moved meanwhile (a worker appended), fn runs again on the new state.
// fn returns the value the caller wants; an empty batch writes nothing.
func mutate[T any](ctx context.Context, e *Engine, sessionID string, fn func(b *batch) (T, error)) (T, error) {
	return mutateRow(ctx, e, sessionID, func(_ *store.SessionRow, b *batch) (T, error) { return fn(b) })
}

// mutateRow is mutate for a change that also needs the session's row (its
// pinned agent spec): fn gets the row its state was read from, so the
// change reads the session once per attempt.
func mutateRow[T any](ctx context.Context, e *Engine, sessionID string, fn func(row *store.SessionRow, b *batch) (T, error)) (T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		row, st, err := e.loadState(ctx, sessionID)
		if err != nil {
			return zero, err
		}
		b := e.newBatch(ctx, st, "")
		out, err := fn(row, b)
		if err != nil || b.empty() {
			return out, err
		}
		p, err := b.appendParams(row.LastSeq, nil, false)
		if err != nil {
			return zero, err
		}
		_, err = e.store.EventAppend(ctx, p)
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= 100 {
			return zero, fmt.Errorf("append to session %s: %w", sessionID, err)
		}
	}
}
