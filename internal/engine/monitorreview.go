package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/monitor"
	"github.com/longhaul-dev/longhaul/internal/redact"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The model monitor (lt.MonitorSpec.Model): a second model reads a compact,
// redacted summary of the session tree's trajectory every EverySteps steps
// of a turn and before every call of an effect class listed in Before, and
// answers ok, warn or pause (monitor.reviewed). pause raises a monitor
// action the session waits on, as a detector's ask does; warn is journaled
// and the session goes on.
//
// Crash safety: a review is journaled, and made durable, before the call it
// is about runs; journal.Apply marks the call (Call.Review) or the step
// (Step.Reviewed), so a runner that resumes after a crash or a restart
// finds the review and never makes it again.
//
// Failing closed: an answer that is not the expected JSON, a model error
// after the retries, an unconfigured provider or a spent budget journal a
// pause (Failed set), its reason saying why.
//
// The monitor's call goes through invoke (purpose monitor) with its own
// model spec and its own script position (State.MonitorPosition): it is
// journaled, retried, budgeted and interruptible like the agent's, its
// cost counts in the session's, and apart as Usage.MonitorCostUSD.

// monitorEventsPerSession bounds how many of a session's latest events a
// review reads (the summary keeps at most monitor.SummaryLimit of them).
const monitorEventsPerSession = 2000

// clipReviewedArgs bounds the arguments of the call under review in the
// prompt.
const clipReviewedArgs = 2000

// validateModelMonitor checks the model monitor's part of an agent's
// monitor spec: its model as the agent's own is checked (provider,
// script, where its key may go: a monitor model is a model credential
// granted by whoever wrote the spec), every_steps and before.
func (e *Engine) validateModelMonitor(ctx context.Context, project string, m *lt.MonitorSpec, prefix string) error {
	if m == nil {
		return nil
	}
	if m.EverySteps < 0 {
		return apierror.Invalid(prefix+".every_steps", "must be >= 0 (0: no periodic review)")
	}
	seen := map[lt.EffectClass]bool{}
	for i, c := range m.Before {
		f := fmt.Sprintf("%s.before[%d]", prefix, i)
		if !c.Valid() {
			return apierror.Invalid(f, "must be read, idempotent or irreversible")
		}
		if seen[c] {
			return apierror.Invalid(f, "%s is listed twice", c)
		}
		seen[c] = true
	}
	if m.Model == nil {
		if m.EverySteps > 0 || len(m.Before) > 0 {
			return apierror.Invalid(prefix+".model", "required with every_steps or before: the model that reviews")
		}
		return nil
	}
	if m.EverySteps == 0 && len(m.Before) == 0 {
		return apierror.Invalid(prefix+".model", "the model monitor would review nothing: set every_steps or before")
	}
	if err := e.validateModelProvider(*m.Model, prefix+".model"); err != nil {
		return err
	}
	return e.validateModelAccess(ctx, project, *m.Model, prefix+".model")
}

// childMonitor is the monitor of a sub-agent: its parent's, which a
// child's spec can neither drop nor weaken. A child may add a model
// monitor only where its parent has none.
func childMonitor(parent, child *lt.MonitorSpec) *lt.MonitorSpec {
	if child == nil || child.Model == nil || (parent != nil && parent.Model != nil) {
		return parent
	}
	var m lt.MonitorSpec
	if parent != nil {
		m = *parent
	}
	m.Model, m.EverySteps, m.Before = child.Model, child.EverySteps, child.Before
	return &m
}

// modelMonitor returns the agent's monitor spec when it has a model
// monitor, else nil.
func (r *runner) modelMonitor() *lt.MonitorSpec {
	if m := r.spec.Monitor; m != nil && m.Model != nil {
		return m
	}
	return nil
}

// periodicReviewDue reports whether the current step is one the model
// monitor reviews (every EverySteps steps of a turn) and its review is not
// journaled yet.
func (r *runner) periodicReviewDue() bool {
	m, step := r.modelMonitor(), r.st.Step
	return m != nil && m.EverySteps > 0 && step != nil && step.N%m.EverySteps == 0 && !step.Reviewed
}

// reviewBefore has the model monitor review call c before it runs, when
// its effect class is listed in Before; c's arguments are final (policy,
// approval and any edit are behind it). It reports whether c may run now:
// a review journaled for c, whatever its verdict, lets it run (a pause was
// decided by a person: continue). After a new review the next tick runs
// the call (or parks on the pause's action).
func (r *runner) reviewBefore(ctx context.Context, c *journal.Call) (bool, error) {
	m := r.modelMonitor()
	if m == nil || c.Review != "" || !slices.Contains(m.Before, c.Class) {
		return true, nil
	}
	return false, r.review(ctx, lt.ReviewBefore, c)
}

// reviewPeriodic makes the periodic review of the current step.
func (r *runner) reviewPeriodic(ctx context.Context) error {
	return r.review(ctx, lt.ReviewEverySteps, nil)
}

// pendingReview is the review whose model call is under way (modelFailed
// fails it closed).
type pendingReview struct {
	trigger string
	step    int
	call    *journal.Call
	prompt  string
}

// review makes one review of the model monitor and journals its verdict.
func (r *runner) review(ctx context.Context, trigger string, c *journal.Call) error {
	step := r.st.Step.N
	red, err := r.e.redactor(ctx)
	if err != nil {
		return err
	}
	// The summary reads the journal from the store: this session's own
	// events first made durable.
	if err := r.flush(ctx, false); err != nil {
		return err
	}
	summary, err := r.trajectorySummary(ctx, red)
	if err != nil {
		return err
	}
	var call map[string]any
	if c != nil {
		call = map[string]any{"call": c.ID, "tool": c.Tool, "effect": c.Class, "arguments": clip(redactString(red, string(c.Arguments)), clipReviewedArgs)}
	}
	prompt := redactString(red, monitor.ReviewRequest(summary, trigger, step, call))
	r.monReview = &pendingReview{trigger: trigger, step: step, call: c, prompt: prompt}
	defer func() { r.monReview = nil }()
	if why := r.monitorCannotRun(); why != "" {
		return r.reviewFailedClosed(ctx, why)
	}
	msgs := []model.Message{{Role: model.RoleSystem, Text: monitor.ReviewInstructions}, {Role: model.RoleUser, Text: prompt}}
	res, err := r.invoke(ctx, lt.PurposeMonitor, step, msgs, nil, nil)
	if res == nil || err != nil {
		return err // failed closed (modelFailed), retried at the next tick, or the turn ended
	}
	d := r.reviewData()
	d.Usage, d.CostUSD, d.DurationMS = res.usage(), res.resp.CostUSD, res.durMS
	if res.resp.Model != "" {
		d.Model = res.resp.Model
	}
	// The answer is redacted before its reasons are clipped: a clipped
	// value escapes the redactor (the monitor never read one, but its
	// model may know one).
	answer := redactString(red, res.resp.Text)
	verdict, reasons, perr := monitor.ParseVerdict(answer)
	if perr != nil {
		verdict, d.Failed = lt.VerdictPause, true
		reasons = []string{"failed closed: " + perr.Error() + "; the answer began: " + clip(strings.TrimSpace(answer), 200)}
	}
	d.Verdict, d.Reasons = verdict, reasons
	return r.journalReview(ctx, d)
}

// reviewData is the part of monitor.reviewed the review under way fixes
// before its model answers.
func (r *runner) reviewData() lt.MonitorReviewedData {
	p, m := r.monReview, r.spec.Monitor.Model
	d := lt.MonitorReviewedData{Trigger: p.trigger, Step: p.step, Prompt: p.prompt, Provider: m.Provider, Model: m.Name}
	if p.call != nil {
		d.CallID, d.Tool = p.call.ID, p.call.Tool
	}
	return d
}

// monitorCannotRun says why the monitor's model cannot be called now ("":
// it can): its provider is not configured here, or a hard limit of the
// session's budget that a model call would pass is reached.
func (r *runner) monitorCannotRun() string {
	m := r.spec.Monitor.Model
	if r.e.cfg.Providers[m.Provider] == nil {
		return fmt.Sprintf("failed closed: the monitor's model provider %q is not configured on this server", m.Provider)
	}
	for _, d := range r.budgetDims(false) {
		if d.max > 0 && d.used >= d.max {
			return fmt.Sprintf("failed closed: the monitor cannot run, the session's budget max_%s is spent (%g of %g)", d.name, d.used, d.max)
		}
	}
	return ""
}

// reviewFailedClosed journals the review under way as a pause the engine
// gave: the monitor could not give a verdict.
func (r *runner) reviewFailedClosed(ctx context.Context, why string) error {
	d := r.reviewData()
	d.Verdict, d.Failed, d.Reasons = lt.VerdictPause, true, []string{why}
	return r.journalReview(ctx, d)
}

// journalReview journals a review and, for a pause, raises the monitor
// action the session waits on. A review before a call is made durable at
// once: the call must not run before its review is in the journal.
func (r *runner) journalReview(ctx context.Context, d lt.MonitorReviewedData) error {
	turn := r.st.CurrentTurn()
	if err := r.add(lt.EventMonitorReviewed, turn.ID, d.Step, d); err != nil {
		return err
	}
	if d.Verdict == lt.VerdictPause {
		sid := r.st.Session.ID
		shown := d
		shown.Prompt = "" // in the journal; the inbox shows the reasons
		what := "at step " + fmt.Sprint(d.Step)
		if d.Trigger == lt.ReviewBefore {
			what = "before the call " + d.CallID + " (" + d.Tool + ")"
		}
		a := lt.Action{
			ID:        derivedID("act_", sid, turn.ID, "monitor_review", d.Step, d.CallID, r.st.MonitorPosition, r.durableSeq, len(r.b.events)),
			SessionID: sid, Type: lt.ActionMonitor, Status: lt.ActionPending, TurnID: turn.ID, Step: d.Step,
			Summary: "The model monitor paused the session " + what + ": " + clip(strings.Join(d.Reasons, "; "), 500) + ". Let the session continue, or stop the turn.",
			Review:  &shown, CreatedAt: r.e.clock.Now(),
		}
		if err := r.add(lt.EventActionRequired, turn.ID, d.Step, lt.ActionRequiredData{Action: a}); err != nil {
			return err
		}
	}
	return r.flush(ctx, false)
}

// trajectorySummary is the summary the model monitor reads: the latest
// events of every session of the tree (this one, its root and all the
// root's descendants), redacted of every vault value.
func (r *runner) trajectorySummary(ctx context.Context, red *redact.Redactor) (string, error) {
	ids := []string{r.st.Session.ID}
	if r.st.Session.ParentID != nil || len(r.st.Children) > 0 {
		var err error
		if ids, err = r.e.treeSessions(ctx, r.st); err != nil {
			return "", err
		}
	}
	redFn := func(s string) string { return redactString(red, s) }
	var items []monitor.SummaryItem
	for _, id := range ids {
		last := r.durableSeq
		if id != r.st.Session.ID {
			row, err := r.e.store.SessionGet(ctx, id)
			if err != nil {
				return "", fmt.Errorf("read session %s of the tree: %w", id, err)
			}
			last = row.LastSeq
		}
		after := max(0, last-monitorEventsPerSession)
		for after < last {
			evs, err := r.e.store.EventList(ctx, id, after, 1000)
			if err != nil {
				return "", fmt.Errorf("read the journal of session %s of the tree: %w", id, err)
			}
			for _, ev := range evs {
				w, err := r.e.resolveBlob(ctx, wireEvent(ev), false)
				if err != nil {
					return "", err
				}
				if it, ok := monitor.Summarize(id, w, redFn); ok {
					items = append(items, it)
				}
				after = ev.Seq
			}
			if len(evs) < 1000 {
				break
			}
		}
	}
	return monitor.BuildSummary(items, monitor.SummaryLimit), nil
}

// redactString replaces every vault value in s (red nil: no vault).
func redactString(red *redact.Redactor, s string) string {
	if red.Empty() {
		return s
	}
	return red.String(s)
}
