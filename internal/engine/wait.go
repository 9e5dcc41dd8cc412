package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Durable waits (DESIGN.md principle 7): a sleeping or waiting session is a
// row with a wake time or a signal name; it holds no worker, no goroutine
// and no sandbox until then.

const (
	sleepTool         = "sleep"
	waitForSignalTool = "wait_for_signal"
	// maxWait bounds one wait: a month.
	maxWaitSeconds = 30 * 24 * 3600
)

const sleepSchema = `{"type":"object","properties":{"seconds":{"type":"number","minimum":0,"maximum":2592000,"description":"How long to wait; the session holds no resources meanwhile"}},"required":["seconds"],"additionalProperties":false}`

const waitForSignalSchema = `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":200,"description":"The signal to wait for, e.g. deploy.finished"},"timeout_seconds":{"type":"number","minimum":0,"maximum":2592000,"description":"Give up after this long (default: 7 days)"}},"required":["name"],"additionalProperties":false}`

// defaultSignalTimeout is how long wait_for_signal waits without a timeout.
const defaultSignalTimeout = 7 * 24 * time.Hour

// startWait journals the wait a sleep or wait_for_signal call asks for; the
// next tick parks the session until it is over.
func (r *runner) startWait(c *journal.Call) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	now := r.e.clock.Now()
	d := lt.WaitStartedData{Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool}
	var args struct {
		Seconds        float64  `json:"seconds"`
		Name           string   `json:"name"`
		TimeoutSeconds *float64 `json:"timeout_seconds"`
	}
	_ = json.Unmarshal(c.Arguments, &args) // validated against the tool's schema when requested
	var until time.Time
	if c.Tool == sleepTool {
		d.Kind = lt.WaitTimer
		until = now.Add(time.Duration(args.Seconds * float64(time.Second)))
	} else {
		d.Kind, d.Name = lt.WaitSignal, args.Name
		timeout := defaultSignalTimeout
		if args.TimeoutSeconds != nil {
			timeout = time.Duration(*args.TimeoutSeconds * float64(time.Second))
		}
		until = now.Add(timeout)
	}
	until = until.Truncate(time.Millisecond)
	d.Until = &until
	return r.add(lt.EventWaitStarted, turnID, step, d)
}

// endWait completes the waiting call once its wait is over: the signal
// that came (its payload is the result), or the time that passed.
func (r *runner) endWait(ctx context.Context) error {
	w := r.st.Wait
	c := r.st.Call(w.Step, w.Index)
	if c == nil {
		return fmt.Errorf("wait on unknown call %s", w.CallID)
	}
	var out any
	switch {
	case w.Kind == lt.WaitSubagentSlot:
		return r.runSpawn(ctx, c) // a slot is free: spawn now
	case w.Kind == lt.WaitAgents:
		out = r.agentsResult(w)
	case w.Signal != nil:
		out = map[string]any{"signal": w.Signal.Name, "payload": w.Signal.Payload, "signal_id": w.Signal.ID}
	case w.Kind == lt.WaitTimer:
		out = map[string]any{"slept_until": w.Until.UTC().Format(time.RFC3339)}
	default:
		out = map[string]any{"signal": w.Name, "timed_out": true}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return r.add(lt.EventToolCompleted, r.st.Step.TurnID, w.Step, lt.ToolCompletedData{
		Step: w.Step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Output: raw,
	})
}

// signalOf tells the data of signal sigID, which a run of the same request
// journaled (a run after its server died before answering, or one that
// overlapped).
func signalOf(sigID string) func([]byte) bool {
	return func(data []byte) bool {
		var d lt.SignalReceivedData
		return json.Unmarshal(data, &d) == nil && d.ID == sigID
	}
}

// sentBefore is the answer to a signal a run of the same request journaled
// (ev). Delivered says whether it is no longer kept for a wait to come
// (st): a wait has taken it, or, past the hundred kept, newer signals have
// pushed it out.
func sentBefore(ev *lt.Event, st *journal.State, err error) (*lt.Signal, error) {
	if err != nil {
		return nil, err
	}
	d, err := lt.DataAs[lt.SignalReceivedData](*ev)
	if err != nil {
		return nil, err
	}
	delivered := !slices.ContainsFunc(st.Signals, func(s lt.SignalReceivedData) bool { return s.ID == d.ID })
	return &lt.Signal{ID: d.ID, Name: d.Name, Payload: d.Payload, Delivered: delivered, At: ev.Time}, nil
}

// maxSignalPayload bounds a signal's payload (it becomes a tool result).
const maxSignalPayload = 256 << 10

// SendSignal delivers a signal to a session (POST /v1/sessions/{id}/signals):
// it wakes a wait_for_signal of that name, or is kept until one waits.
func (e *Engine) SendSignal(ctx context.Context, id string, req *lt.SignalRequest) (*lt.Signal, error) {
	name := strings.TrimSpace(req.Name)
	switch {
	case name == "":
		return nil, apierror.Invalid("name", "required: the signal's name")
	case len(name) > 200:
		return nil, apierror.Invalid("name", "must be at most 200 bytes")
	case len(req.Payload) > maxSignalPayload:
		return nil, apierror.Invalid("payload", "must be at most %d bytes", maxSignalPayload)
	}
	now := e.clock.Now()
	sigID, _, err := creationID(ctx, "sig_", now)
	if err != nil {
		return nil, err
	}
	sig := lt.SignalReceivedData{ID: sigID, Name: name, Payload: req.Payload}
	look, err := e.newRequestLook(ctx, id, signalOf(sigID), lt.EventSignalReceived)
	if err != nil {
		return nil, err
	}
	out, err := mutateRow(ctx, e, id, func(row *store.SessionRow, b *batch) (*lt.Signal, error) {
		if ev, err := look.upTo(ctx, row.LastSeq); ev != nil || err != nil {
			return sentBefore(ev, b.st, err)
		}
		delivered := false
		if w := b.st.Wait; w != nil && w.Kind == lt.WaitSignal && w.Name == name && w.Signal == nil {
			delivered = true
		}
		if err := b.add(lt.EventSignalReceived, "", 0, sig); err != nil {
			return nil, err
		}
		return &lt.Signal{ID: sig.ID, Name: name, Payload: req.Payload, Delivered: delivered, At: now}, nil
	})
	if err != nil {
		return nil, notFound(err, "session", id)
	}
	return out, nil
}
