package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/monitor"
	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The trajectory monitor (internal/monitor) reads the session's journal as
// the runner derives everything else from it: every event the runner
// appends or reads in (observe) goes through its detectors, whose state is
// rebuilt at a claim from the latest context snapshot and the events after
// it (resume.go), as the transcript is. What they find waits in the runner
// (monFound) for the next tick, which journals it (monitor.finding) before
// anything else runs: a probe found in a call's arguments (tool.requested)
// is journaled, and asked about or stopped, before the call runs. A replay
// that finds again what was journaled reports nothing twice
// (monitor.Journaled); one that finds what a crash kept from the journal
// journals it then. What the tree-wide detectors count goes to the tree's
// record in the store (syncTreeMonitor) at the start of a tick, before the
// findings are journaled; merge moves what the monitor holds of the
// runner's unsaved events when another writer's came first (Renumber).

// monitorSecrets caches the fragment index of the vault's values, rebuilt
// when the vault's redactor is (a secret changed).
type monitorSecrets struct {
	mu  sync.Mutex
	red *redact.Redactor
	idx *monitor.SecretIndex
}

// secretIndex returns the index of the vault's values (nil: no vault, or
// no secret).
func (e *Engine) secretIndex(ctx context.Context) (*monitor.SecretIndex, error) {
	red, err := e.redactor(ctx)
	if err != nil || red.Empty() {
		return nil, err
	}
	c := &e.monSecrets
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.red != red {
		c.red, c.idx = red, monitor.NewSecretIndex(red.Values())
	}
	return c.idx, nil
}

// newMonitor sets up the runner's detectors for its agent's monitor spec.
func (r *runner) newMonitor(ctx context.Context) error {
	actions, err := monitor.Actions(r.spec.Monitor, "monitor")
	if err != nil {
		return err
	}
	secrets, err := r.e.secretIndex(ctx)
	if err != nil {
		return err
	}
	// A session counts toward its tree's record when it is in a tree or
	// may start one: a root's events before its first spawn count too.
	tree := r.st.Session.ParentID != nil || len(r.st.Children) > 0 || slices.ContainsFunc(r.spec.Tools, func(t lt.ToolSpec) bool { return t.Name == monitor.SpawnTool })
	r.mon = monitor.New(monitor.Config{Actions: actions, DataDir: r.e.cfg.DataDir, WorkspaceRoot: r.e.cfg.WorkspaceRoot, Secrets: secrets, Tree: tree})
	return nil
}

// maxTreeMonitorRetries bounds the conflicts of one update of the tree's
// monitor record (another session of the tree wrote it meanwhile).
const maxTreeMonitorRetries = 50

// syncTreeMonitor applies what the session's events added to the tree-wide
// detectors to its tree's record (monitor/tree.go), once those events are
// durable, and keeps the tree findings they complete for reportFindings.
// It runs at the start of a tick, before the findings are journaled and
// before any call runs, so a call whose arguments complete a tree finding
// is asked about or stopped as one that completes the session's own.
func (r *runner) syncTreeMonitor(ctx context.Context) error {
	n, last := r.mon.TreePending()
	if n == 0 {
		return nil
	}
	if last > r.durableSeq {
		// Only durable events count: a contribution of an event that a
		// conflict or a crash drops would stay in the record.
		if err := r.flush(ctx, false); err != nil {
			return err
		}
	}
	root := treeRoot(r.st)
	for attempt := 0; ; attempt++ {
		var raw []byte
		var version int64
		row, err := r.e.store.MonitorTreeGet(ctx, root)
		switch {
		case err == nil:
			raw, version = row.State, row.Version
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("read the tree's monitor record: %w", err)
		}
		state, applied, found, err := r.mon.ApplyTree(raw, r.st.Session.ID)
		if err != nil {
			return err
		}
		err = r.e.store.MonitorTreePut(ctx, &store.MonitorTreePutParams{RootID: root, State: state, Version: version})
		if errors.Is(err, store.ErrConflict) && attempt < maxTreeMonitorRetries {
			continue
		}
		if err != nil {
			return fmt.Errorf("update the tree's monitor record: %w", err)
		}
		r.mon.TreeApplied(applied)
		r.monFound = append(r.monFound, found...)
		return nil
	}
}

// validateMonitor checks an agent's monitor spec.
func validateMonitor(spec *lt.MonitorSpec, prefix string) error {
	if _, err := monitor.Actions(spec, prefix); err != nil {
		if fe, ok := err.(*monitor.FieldError); ok {
			return apierror.Invalid(fe.Field, "%s", fe.Message)
		}
		return err
	}
	return nil
}

// reportFindings journals what the detectors found since the last tick,
// then does what the first finding whose action is stop or ask says: ends
// the turn, or raises a monitor action the session waits on.
func (r *runner) reportFindings() error {
	found := r.monFound
	r.monFound = nil
	var ask, stop *monitor.Finding
	for i := range found {
		f := &found[i]
		if r.mon.Journaled(f) {
			continue
		}
		if err := r.add(lt.EventMonitorFinding, f.TurnID, f.Step, f.MonitorFindingData); err != nil {
			return err
		}
		switch {
		case f.Action == lt.MonitorStop && stop == nil:
			stop = f
		case f.Action == lt.MonitorAsk && ask == nil:
			ask = f
		}
	}
	turn := r.st.CurrentTurn()
	if turn == nil {
		return nil // nothing runs that a finding could stop
	}
	if stop != nil && stop.TurnID == turn.ID {
		return r.failTurn(lt.StopPolicyViolation, "stopped by the trajectory monitor ("+stop.Detector+"): "+stop.Summary)
	}
	if ask == nil || ask.TurnID != turn.ID || pendingOfType(r.st.Pending, lt.ActionMonitor) != nil {
		return nil
	}
	sid := r.st.Session.ID
	finding := ask.MonitorFindingData
	a := lt.Action{
		ID:        derivedID("act_", sid, turn.ID, "monitor", r.durableSeq, len(r.b.events)),
		SessionID: sid, Type: lt.ActionMonitor, Status: lt.ActionPending, TurnID: turn.ID, Step: ask.Step,
		Summary: "The trajectory monitor (" + ask.Detector + ", " + ask.Severity + "): " + ask.Summary + ". Let the session continue, or stop the turn.",
		Finding: &finding, CreatedAt: r.e.clock.Now(),
	}
	return r.add(lt.EventActionRequired, turn.ID, ask.Step, lt.ActionRequiredData{Action: a})
}

// monitorDecision carries out a decision on a monitor action: continue
// (the session goes on) or stop (the turn ends).
func monitorDecision(b *batch, a *lt.Action, d *lt.Decision, resolved lt.ActionResolvedData) error {
	if d.Arguments != nil || d.Answer != "" || len(d.Output) > 0 || d.Error != "" || d.Budget != nil || d.ArgumentsSHA256 != "" {
		return apierror.Invalid("decision", "a monitor action takes only decision (continue or stop) and reason")
	}
	switch d.Decision {
	case lt.DecisionContinue, lt.DecisionStop:
	default:
		return apierror.Invalid("decision", "must be continue or stop")
	}
	// Journaled at the step of the call the finding was about, as the
	// action was raised, so the timeline shows the decision there.
	if err := b.add(lt.EventActionResolved, a.TurnID, a.Step, resolved); err != nil {
		return err
	}
	if d.Decision == lt.DecisionContinue {
		return nil
	}
	msg := "stopped by a person at a finding of the trajectory monitor"
	if a.Finding != nil {
		msg += " (" + a.Finding.Detector + ")"
	}
	if a.Review != nil {
		msg = "stopped by a person at a pause of the model monitor"
	}
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return endTurn(b, lt.StopStopped, msg)
}

// renumberFinding returns the data of ev, an unsaved event the runner
// appends after another writer's events, with the evidence seqs of the
// finding it holds (a monitor.finding, a monitor action) moved as the
// unsaved events are (after base, by shift): they name the same events.
func renumberFinding(ev lt.Event, base, shift int64) (json.RawMessage, error) {
	switch ev.Type {
	case lt.EventMonitorFinding:
		var d lt.MonitorFindingData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("decode monitor.finding: %w", err)
		}
		monitor.RenumberEvidence(&d, base, shift)
		return json.Marshal(&d)
	case lt.EventActionRequired:
		var d lt.ActionRequiredData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("decode action.required: %w", err)
		}
		if d.Action.Type != lt.ActionMonitor || d.Action.Finding == nil {
			return ev.Data, nil
		}
		monitor.RenumberEvidence(d.Action.Finding, base, shift)
		return json.Marshal(&d)
	}
	return ev.Data, nil
}
