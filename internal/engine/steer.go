package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Steering a running turn (POST /v1/sessions/{id}/steer). A person's
// message is journaled as turn.steered by whichever node took the request,
// and reaches the model verbatim, as a user message, at the turn's next
// step call. Where it goes in the context follows from the journal alone,
// so a replay on any node builds the same context:
//
//   - the messages are numbered in journal order; a step call carries every
//     one journaled before it (the context ends with the ones not yet
//     answered, after the tool results before them) and says how many in
//     its model.requested (Steers);
//   - they enter the transcript's items just before the answer of the call
//     that carried them first, so a later context is the one that was sent
//     plus what came after; from then on they are items like any other
//     (compaction summarises them as a person's words), and the pinned
//     block never changes;
//   - a message to a turn still queued comes after that turn's input;
//   - the turn does not end with a message the model has not read: a final
//     answer with one unread is followed by another call (tick).
//
// With interrupt, a step's model call in flight that does not carry the
// message is abandoned (interruptSteer, through the same watcher as a
// cancel: at once on the node that took the request, through the store's
// notifier on another, or within a poll interval) and made again with it;
// the abandoned call counts as a cancelled one does. A tool call is never
// cut by a steer (it is an effect): the message waits for the next model
// call, as it does while the turn waits for an action or a durable wait.

// maxSteerBytes bounds one steering message: it is a short instruction
// placed in every later context (a long text is a follow-up turn's input).
// Bounded, its event is never moved to a blob (writer.go), so the journal
// keeps inline the interrupt flag the projection reads.
const maxSteerBytes = 32 << 10

// interruptSteer: a steer with interrupt abandoned the model call.
const interruptSteer interruptKind = lt.InterruptedSteered

// SteerSession journals a person's message to the session's current turn
// (queued, running, waiting or requires_action). A session with no turn to
// steer (idle, failed, cancelled), or whose turns are being cancelled, is a
// conflict: a follow-up turn is what carries a new request then.
func (e *Engine) SteerSession(ctx context.Context, id string, req *lt.SteerRequest) (*lt.Session, error) {
	switch {
	case strings.TrimSpace(req.Input) == "":
		return nil, apierror.Invalid("input", "required: the message to the running turn")
	case len(req.Input) > maxSteerBytes:
		return nil, apierror.Invalid("input", "longer than %d bytes (send a long text as a follow-up turn's input)", maxSteerBytes)
	}
	// An earlier run of the request may have steered a turn that has
	// ended since: it answers with the session as it is.
	return e.journalControl(ctx, id, lt.EventTurnSteered, func(b *batch, request string) error {
		if err := e.refuseWhenLow(); err != nil {
			return err
		}
		st := b.st
		turn := st.CurrentTurn()
		switch {
		case turn == nil:
			return apierror.Conflict("session %s has no running turn (it is %s): send a follow-up turn instead (POST /v1/sessions/%s/turns)",
				id, st.Session.Status, id)
		case st.Cancel != nil:
			return apierror.Conflict("session %s is being cancelled: send a follow-up turn once it is", id)
		}
		return b.add(lt.EventTurnSteered, turn.ID, 0, lt.TurnSteeredData{TurnID: turn.ID, Input: req.Input, Interrupt: req.Interrupt, Actor: b.actor(), Request: request})
	})
}

// steerDue is what a step's model call carrying the first sent steering
// messages is watched for: a cancel, or a later message sent with
// interrupt.
func steerDue(sent int) controlDue {
	return func(st *journal.State) *interruptCause {
		if c := cancelDue(st); c != nil {
			return c
		}
		if st.Steer.Interrupt > sent {
			return &interruptCause{kind: interruptSteer,
				msg: "a person steered the turn with interrupt: the call is made again with their message"}
		}
		return nil
	}
}

// steering is the transcript's part for steering messages.
type steering struct {
	// steers are the messages to turns that started, in journal order,
	// from number steerBase on (the ones before were placed, and a
	// transcript resumed from a snapshot does not hold them); placed of
	// them are in the items, the others end the next context.
	steers    []string
	steerBase int
	placed    int
	// sent is how many the latest step call carried.
	sent int
	// early holds the messages to turns not started yet, in journal
	// order.
	early []earlySteer
}

func (t *transcript) observeSteering(ev lt.Event) {
	switch ev.Type {
	case lt.EventTurnSteered:
		d, err := lt.DataAs[lt.TurnSteeredData](ev)
		if err != nil {
			return
		}
		if _, queued := t.inputs[d.TurnID]; queued {
			t.early = append(t.early, earlySteer{turnID: d.TurnID, input: d.Input})
			return
		}
		t.steers = append(t.steers, d.Input)
	case lt.EventModelRequested:
		if d, err := lt.DataAs[lt.ModelRequestedData](ev); err == nil && d.Purpose == "" {
			t.sent = d.Steers
		}
	}
}

// earlySteer is a message to a turn that had not started.
type earlySteer struct{ turnID, input string }

// startTurn puts a starting turn's input in the items: after every message
// a past turn was sent (also to a turn that ended before it started: they
// are not lost), and before the messages sent to this turn while it was
// queued.
func (t *transcript) startTurn(turnID, input string) {
	var mine []string
	for _, e := range t.early {
		if e.turnID == turnID {
			mine = append(mine, e.input)
		} else {
			t.steers = append(t.steers, e.input)
		}
	}
	t.early = nil
	t.placeSteers(t.steerCount())
	t.msgs = append(t.msgs, model.Message{Role: model.RoleUser, Text: input})
	t.steers = append(t.steers, mine...)
}

// placeSteers moves the first n messages into the items, in order.
func (t *transcript) placeSteers(n int) {
	for ; t.placed < min(n, t.steerCount()); t.placed++ {
		t.msgs = append(t.msgs, model.Message{Role: model.RoleUser, Text: t.steers[t.placed-t.steerBase]})
	}
}

// heldSteers are the messages no call has answered yet: they end the
// context, after every item journaled before them.
func (t *transcript) heldSteers() []model.Message {
	held := t.steers[t.placed-t.steerBase:]
	out := make([]model.Message, 0, len(held))
	for _, s := range held {
		out = append(out, model.Message{Role: model.RoleUser, Text: s})
	}
	return out
}

// steerCount is how many messages the next context carries.
func (t *transcript) steerCount() int { return t.steerBase + len(t.steers) }

// steerStop reads in the steer that cut the call (written by another
// writer): the next tick makes the call again with it.
func (r *runner) steerStop(ctx context.Context) error {
	if err := r.merge(ctx); err != nil {
		return fmt.Errorf("read in the steer: %w", err)
	}
	return nil
}

// readSteers reads in a steer (or a cancel) another writer journaled since
// the runner last read the session, so that what it does next sees it: the
// context of a step call carries every message, and a turn does not end
// with one unread. Other writes are left to the next append's merge, as
// everywhere else. flush first makes the runner's pending events durable,
// so that a steer arriving later still cannot cost them (journal.Apply
// refuses turn.completed with a message unread, and the runner starts over
// from the journal).
func (r *runner) readSteers(ctx context.Context, flush bool) error {
	if flush {
		if err := r.flush(ctx, false); err != nil {
			return err
		}
	}
	// Only another writer's append can bring a steer: while the journal
	// ends where this runner last wrote, the state need not be read. The
	// seq this tick's readControls read will do, unless the runner wrote
	// (or was asked to flush) since.
	seq := r.tickSeq
	if seq < 0 || flush {
		var err error
		if seq, err = r.e.store.SessionLastSeq(ctx, r.lease.SessionID); err != nil {
			return err
		}
	}
	if seq <= r.durableSeq {
		return nil
	}
	row, err := r.e.store.SessionGet(ctx, r.lease.SessionID)
	if err != nil {
		return err
	}
	var st journal.State
	if err := json.Unmarshal(row.State, &st); err != nil {
		return fmt.Errorf("decode state of session %s: %w", r.lease.SessionID, err)
	}
	if st.Steer.Count == r.st.Steer.Count {
		return nil
	}
	return r.merge(ctx)
}
