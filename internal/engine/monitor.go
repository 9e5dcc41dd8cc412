package engine

import (
	"context"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/monitor"
	"github.com/longhaul-dev/longhaul/internal/redact"
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
// journals it then.

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
	r.mon = monitor.New(monitor.Config{Actions: actions, DataDir: r.e.cfg.DataDir, WorkspaceRoot: r.e.cfg.WorkspaceRoot, Secrets: secrets})
	return nil
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
	case lt.DecisionContinue:
		return b.add(lt.EventActionResolved, a.TurnID, 0, resolved)
	case lt.DecisionStop:
		msg := "stopped by a person at a finding of the trajectory monitor"
		if a.Finding != nil {
			msg += " (" + a.Finding.Detector + ")"
		}
		if a.Review != nil {
			msg = "stopped by a person at a pause of the model monitor"
		}
		return stopAtAction(b, a, resolved, lt.StopStopped, msg, d.Reason)
	default:
		return apierror.Invalid("decision", "must be continue or stop")
	}
}
