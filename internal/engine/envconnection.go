package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// An agent whose environment lives on a runner (environment.runner) waits
// for one when none that matches is connected: its session parks in
// requires_action with an environment_connection action, holding no worker
// and no goroutine, like a function-result wait. A runner's connection
// resolves it (Engine.RunnerConnected), or the application stops the turn.

// runnerSelector is the agent's environment.runner as the environment
// seam takes it (nil: none).
func runnerSelector(spec *lt.AgentSpec) *environment.RunnerSelector {
	if spec.Environment == nil || spec.Environment.Runner == nil {
		return nil
	}
	sel := spec.Environment.Runner
	return &environment.RunnerSelector{Name: sel.Name, Labels: sel.Labels}
}

// waitsForRunner reports whether err, from opening the session's
// environment, means no runner it may use is connected: nothing ran, and
// the session waits for one.
func (r *runner) waitsForRunner(err error) bool {
	return errors.Is(err, environment.ErrUnavailable) && runnerSelector(&r.spec) != nil
}

// askEnvironment raises the environment_connection action: why is the
// open's failure.
func (r *runner) askEnvironment(ctx context.Context, why error) error {
	turn := r.st.CurrentTurn()
	sid := r.st.Session.ID
	sel := *r.spec.Environment.Runner
	summary := "The session's environment lives on a runner, and no matching runner (" + sel.String() + ") is connected: it goes on when one connects, or stop the turn"
	pin, err := r.e.environmentPin(ctx, r.st)
	if err != nil {
		return err
	}
	switch {
	case errors.Is(why, environment.ErrPinnedKeyChanged) && pin.runner != "":
		summary = "The session's environment lives on runner " + pin.runner + ", whose name is now held by another key than the one the environment was opened with: it goes on when that key's runner connects; decide unpin to let any matching runner take it (a runner whose key was replaced), or stop the turn"
	case errors.Is(why, environment.ErrFull) && pin.runner != "":
		summary = "The session's environment lives on runner " + pin.runner + ", which is at its capacity: it goes on when one of its environments closes, or stop the turn"
	case errors.Is(why, environment.ErrFull):
		summary = "Every matching runner (" + sel.String() + ") is at its capacity: the session goes on when one of their environments closes, or stop the turn"
	case pin.runner != "":
		summary = "The session's environment lives on runner " + pin.runner + ", which is not connected: it goes on when it connects, or stop the turn"
	}
	a := lt.Action{
		ID:        derivedID("act_", sid, turn.ID, "environment_connection", r.durableSeq, len(r.b.events)),
		SessionID: sid, Type: lt.ActionEnvironmentConnection, Status: lt.ActionPending, TurnID: turn.ID,
		Summary: summary, Runner: &lt.RunnerSelector{Name: sel.Name, Labels: append([]string(nil), sel.Labels...)},
		Reason: why.Error(), CreatedAt: r.e.clock.Now(),
	}
	return r.add(lt.EventActionRequired, turn.ID, 0, lt.ActionRequiredData{Action: a})
}

// pendingOfType returns the first pending action of type t, nil if none.
func pendingOfType(pending []lt.Action, t lt.ActionType) *lt.Action {
	for i := range pending {
		if pending[i].Type == t {
			return &pending[i]
		}
	}
	return nil
}

// awaitEnvironment parks the session on its environment_connection action.
// Before the first park of a claim it makes the action durable and opens
// the environment again: a runner that connected before the action was
// written is found here, one that connects after finds the action
// (RunnerConnected), so no connection is missed.
func (r *runner) awaitEnvironment(ctx context.Context, a *lt.Action) (bool, error) {
	if !r.envRechecked {
		r.envRechecked = true
		if err := r.flush(ctx, false); err != nil {
			return false, err
		}
		r.e.waiters.raised(r.project)
		if r.env != nil && r.env.env != nil {
			// This claim's open already found the runner (the session was
			// claimed for something else than the wake, after a runner
			// connected): that environment is the session's, and opening
			// another would leave it open.
			return false, r.add(lt.EventActionResolved, a.TurnID, 0, connectedResolution(a, r.envRunner))
		}
		r.env.close()
		err := r.setupEnvironment(ctx)
		if err == nil {
			return false, r.add(lt.EventActionResolved, a.TurnID, 0, connectedResolution(a, r.envRunner))
		}
		r.env.close()
		r.env = nil
		var elsewhere *environment.ElsewhereError
		if errors.As(err, &elsewhere) {
			return r.handOver(ctx, elsewhere)
		}
		if !r.waitsForRunner(err) {
			r.envErr = err
			return false, nil
		}
	}
	if r.env == nil {
		// The park goes on instead when a runner connected since this
		// claim last looked (its RunnerConnected resolved the action,
		// read in by the park's merge): the turn runs in an environment,
		// opened on it by the next tick, as after an idle stop.
		r.envDeferred = true
	}
	if err := r.status(lt.SessionRequiresAction, ""); err != nil {
		return false, err
	}
	return r.park(ctx)
}

// connectedResolution resolves an environment_connection action: runner
// connected.
func connectedResolution(a *lt.Action, runner string) lt.ActionResolvedData {
	d := lt.Decision{Decision: lt.DecisionConnected, Reason: "runner " + runner + " connected"}
	sum, _ := decisionSHA256(&d) // a Decision always marshals
	return lt.ActionResolvedData{ActionID: a.ID, Type: string(a.Type), Decision: d, DecisionSHA256: sum}
}

// envConnectionDecision carries out the application's decision on an
// environment_connection action: stop (the turn ends), or unpin (a session
// pinned to a runner may open on any matching one: the pin's key was
// revoked and replaced, say); the action resolves by itself otherwise.
func envConnectionDecision(b *batch, a *lt.Action, d *lt.Decision, resolved lt.ActionResolvedData) error {
	if d.Arguments != nil || d.Answer != "" || len(d.Output) > 0 || d.Error != "" || d.Budget != nil || d.ArgumentsSHA256 != "" {
		return apierror.Invalid("decision", "an environment_connection action takes only decision stop or unpin (and reason)")
	}
	switch d.Decision {
	case lt.DecisionStop:
		return stopAtAction(b, a, resolved, lt.StopStopped, "stopped by a person while the session waited for a runner", d.Reason)
	case lt.DecisionUnpin:
		if root := b.st.WorkspaceID(); root != b.st.Session.ID {
			// The pin is the root's, whose workspace the sub-agent shares.
			return apierror.Conflict("session %s is a sub-agent: its environment is its root session %s's, pinned there; decide unpin on the root's environment_connection action", b.st.Session.ID, root)
		}
		if b.st.EnvironmentRunner == "" {
			return apierror.Conflict("session %s is pinned to no runner: its environment_connection action resolves when a runner matching its agent's environment.runner connects", b.st.Session.ID)
		}
		// Applied (the journal drops the pin), the session is claimed
		// again and opens its environment on a matching runner.
		return b.add(lt.EventActionResolved, a.TurnID, 0, resolved)
	}
	return apierror.Invalid("decision", "must be stop or unpin: an environment_connection action resolves by itself when a matching runner connects")
}

// runnerWakePage is how many pending environment_connection actions
// RunnerConnected reads at once.
const runnerWakePage = 200

// RunnerConnected resolves the environment_connection actions of project's
// sessions that the runner named name, connected with key keyID, with
// labels matches (a session pinned to another runner, or to this name
// held by another key, keeps waiting for its own): each session becomes
// runnable and is claimed as any other. It returns how many it woke. The
// hub calls it for each runner that connects.
func (e *Engine) RunnerConnected(ctx context.Context, project, name, keyID string, labels []string) (int, error) {
	_, gen := e.waiters.mayWait(project, e.clock.Now())
	return e.wakeAndNote(ctx, project, name, keyID, labels, 0, gen)
}

// RunnerFreed is RunnerConnected for a runner that takes free more
// environments now (one of its environments closed): it wakes at most
// free of the sessions waiting for it, so that a freed slot
// does not wake every session that waits for one.
func (e *Engine) RunnerFreed(ctx context.Context, project, name, keyID string, labels []string, free int) (int, error) {
	if free <= 0 {
		return 0, nil
	}
	may, gen := e.waiters.mayWait(project, e.clock.Now())
	if !may {
		return 0, nil // the common case: nothing waits, nothing read
	}
	return e.wakeAndNote(ctx, project, name, keyID, labels, free, gen)
}

// wakeAndNote is wakeForRunner, noting a scan that found nothing pending
// in the project (started at generation gen of e.waiters).
func (e *Engine) wakeAndNote(ctx context.Context, project, name, keyID string, labels []string, limit int, gen uint64) (int, error) {
	started := e.clock.Now()
	woke, none, err := e.wakeForRunner(ctx, project, name, keyID, labels, limit)
	if err == nil && none {
		e.waiters.scanned(project, gen, started)
	}
	return woke, err
}

// wakeForRunner wakes the sessions waiting for the runner, at most limit
// of them (0: all). none reports that the project had no pending
// environment_connection action at all.
func (e *Engine) wakeForRunner(ctx context.Context, project, name, keyID string, labels []string, limit int) (woke int, none bool, err error) {
	none = true
	// One session that cannot be woken (a failing write, a row that will
	// not load) must not keep the ones after it parked while their runner
	// is connected: each is tried, and the errors are returned together.
	var failed []error
	var after *store.DocCursor
	for {
		rows, err := e.store.ActionListAll(ctx, &store.ActionListParams{
			Status: string(lt.ActionPending), Type: string(lt.ActionEnvironmentConnection), Project: project,
			After: after, Limit: runnerWakePage,
		})
		if err != nil {
			return woke, none, errors.Join(append(failed, err)...)
		}
		none = none && len(rows) == 0
		actions, err := decodeDocs[lt.Action](rows)
		if err != nil {
			return woke, none, errors.Join(append(failed, err)...)
		}
		for i := range actions {
			a := &actions[i]
			if a.Runner == nil {
				continue
			}
			// A runner that does not match the selector may still be the
			// one the session's environment lives on (restarted with other
			// labels): resolveConnected looks at the pin first.
			matches := (&environment.RunnerSelector{Name: a.Runner.Name, Labels: a.Runner.Labels}).Matches(name, labels)
			ok, err := e.resolveConnected(ctx, a, name, keyID, matches)
			if err != nil {
				if ctx.Err() != nil {
					return woke, none, errors.Join(append(failed, err)...)
				}
				failed = append(failed, fmt.Errorf("wake session %s: %w", a.SessionID, err))
				continue
			}
			if ok {
				woke++
				if woke == limit {
					return woke, none, errors.Join(failed...)
				}
			}
		}
		if len(rows) < runnerWakePage {
			return woke, none, errors.Join(failed...)
		}
		last := rows[len(rows)-1]
		after = &store.DocCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// resolveConnected resolves one session's environment_connection action
// when it is still pending and runner name (with key keyID) is the one the
// session is pinned to (environmentPin: its root's for a sub-agent, as
// the open goes), or, for a session pinned to none, matches its
// selector: the router opens a pinned session on its runner whatever
// that runner's labels are now.
func (e *Engine) resolveConnected(ctx context.Context, a *lt.Action, name, keyID string, matches bool) (bool, error) {
	return mutateRow(ctx, e, a.SessionID, func(_ *store.SessionRow, b *batch) (bool, error) {
		pending, _ := b.st.PendingAction(a.ID)
		if pending == nil {
			return false, nil
		}
		pin, err := e.environmentPin(ctx, b.st)
		if err != nil {
			return false, err
		}
		switch {
		case pin.runner == "" && !matches:
			return false, nil
		case pin.runner != "" && (pin.runner != name || (pin.key != "" && pin.key != keyID)):
			return false, nil
		}
		if err := b.add(lt.EventActionResolved, pending.TurnID, 0, connectedResolution(pending, name)); err != nil {
			return false, err
		}
		if len(b.st.Pending) == 0 && b.st.Session.Status == lt.SessionRequiresAction {
			if err := b.status(lt.SessionRunning, ""); err != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// handOver gives the session to the node its runner is connected to
// (environment.ElsewhereError): the hub is per node, so only that node
// can open the environment. What the runner wrote is made durable and
// the lease is given back for that node alone to claim, for a lease's
// time (a node that died meanwhile does not hold the session: any node
// claims it after). The runner is done.
func (r *runner) handOver(ctx context.Context, to *environment.ElsewhereError) (bool, error) {
	if err := r.flush(ctx, false); err != nil {
		return false, err
	}
	r.e.log.Info("the session's runner is connected to another node: handing the session to it",
		"session", r.st.Session.ID, "runner", to.Runner, "node", to.Node)
	if err := r.e.store.LeaseHandOver(ctx, r.lease, to.Node, r.e.clock.Now().Add(r.e.cfg.LeaseTTL)); err != nil {
		return false, fmt.Errorf("hand the session over to node %s: %w", to.Node, err)
	}
	r.released = true
	return true, nil
}
