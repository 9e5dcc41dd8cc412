package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type eventsOpts struct {
	client    *clientOpts
	after     int64
	follow    bool
	json      bool
	subagents bool
}

func (c *cli) eventsCmd() *cobra.Command {
	o := &eventsOpts{}
	cmd := &cobra.Command{
		Use:   "events SESSION_ID",
		Short: "Print a session's journal, or follow it live",
		Long: `Print the events of a session's journal in order, one per line. With --follow,
keep printing new events as they are appended, across turns and across server
restarts (the stream resumes where it stopped, without gaps or duplicates),
until interrupted.

With --follow --subagents, follow the session and every sub-agent it spawns,
recursively, including those spawned later: each line starts with the id of
the session the event belongs to (in --json, its session_id). Each session's
events are in order; events of different sessions interleave as they happen.
--after then skips the session's own events up to that seq, not its
sub-agents'.`,
		Example: `  longhaul events ses_01J9Z
  longhaul events ses_01J9Z --after 40 --follow
  longhaul events ses_01J9Z --follow --subagents
  longhaul events ses_01J9Z --json | jq -r .type`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.events(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.Int64Var(&o.after, "after", 0, "print only events with a seq above this one")
	fs.BoolVarP(&o.follow, "follow", "f", false, "keep following new events until interrupted")
	fs.BoolVar(&o.json, "json", false, "print one JSON event per line")
	fs.BoolVar(&o.subagents, "subagents", false, "with --follow: the events of the session's sub-agents too, recursively")
	return cmd
}

func (c *cli) events(cmd *cobra.Command, o *eventsOpts, id string) error {
	if o.after < 0 {
		return usagef("--after %d: must not be negative", o.after)
	}
	if o.subagents && !o.follow {
		return usagef("--subagents needs --follow: a session tree's events are served as a stream")
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	p := &eventPrinter{w: c.stdout, json: o.json, session: o.subagents}
	if o.subagents {
		for ev, err := range cl.StreamTreeEvents(ctx, id, strconv.FormatInt(o.after, 10)) {
			if err != nil {
				if ctx.Err() != nil {
					return nil // interrupted: the normal way to stop following
				}
				return err
			}
			if err := p.print(ev.Event); err != nil {
				return err
			}
		}
		return nil
	}
	if !o.follow {
		after := o.after
		for {
			page, err := cl.ListEvents(ctx, id, after, client.MaxListLimit)
			if err != nil {
				return err
			}
			for _, ev := range page.Data {
				if err := p.print(ev); err != nil {
					return err
				}
				after = ev.Seq
			}
			if page.NextCursor == nil || len(page.Data) == 0 {
				return nil
			}
		}
	}
	for ev, err := range cl.StreamEvents(ctx, id, o.after) {
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the normal way to stop following
			}
			return err
		}
		if err := p.print(ev); err != nil {
			return err
		}
	}
	return nil
}

// eventPrinter prints events one per line: as JSON, or as
// "SEQ  TIME  TYPE  SUMMARY" with fixed-width columns (a stream cannot wait
// for a table to be complete before aligning it), after the event's session
// id when session is set (a tree's events, of several sessions).
type eventPrinter struct {
	w       io.Writer
	json    bool
	session bool
	// paused holds the sessions whose session.paused was printed and no
	// session.resumed since: a session.pause_requested there is a person
	// making a pause that was its parent's their own, not a pause to come.
	paused map[string]bool
}

func (p *eventPrinter) print(ev lt.Event) error {
	if p.json {
		raw, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode event %d: %w", ev.Seq, err)
		}
		_, err = fmt.Fprintf(p.w, "%s\n", raw)
		return err
	}
	if p.session {
		if _, err := fmt.Fprintf(p.w, "%s  ", oneLine(ev.SessionID)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(p.w, "%6d  %s  %-24s  %s\n", ev.Seq, ev.Time.Local().Format("Jan 02 15:04:05.000"), ev.Type, p.summary(ev))
	return err
}

// summary is eventSummary with what the events printed before say of it.
func (p *eventPrinter) summary(ev lt.Event) string {
	s := eventSummary(ev)
	switch ev.Type {
	case lt.EventSessionPaused, lt.EventSessionResumed:
		if p.paused == nil {
			p.paused = map[string]bool{}
		}
		p.paused[ev.SessionID] = ev.Type == lt.EventSessionPaused
	case lt.EventSessionPauseRequested:
		if p.paused[ev.SessionID] {
			if rest, ok := strings.CutPrefix(s, pauseToComePrefix); ok {
				return "already paused, the pause is now this request's: " + rest
			}
		}
	}
	return s
}

// eventSummary describes an event's data in one short line for people,
// ending with who made the decision it carries, if anyone did.
func eventSummary(ev lt.Event) string {
	s := eventDetail(ev)
	if a := eventActor(ev); a != nil {
		if ev.Type == lt.EventSessionCreated {
			return s + " · created by " + actorLabel(a)
		}
		return s + " · by " + actorLabel(a)
	}
	return s
}

// eventActor is the actor an event's data carries (nil: none, the engine's
// own doing).
func eventActor(ev lt.Event) *lt.Actor {
	var d struct {
		Actor *lt.Actor `json:"actor"`
	}
	if json.Unmarshal(ev.Data, &d) != nil {
		return nil
	}
	return d.Actor
}

// actorLabel is an actor as people read it: "alice (approver)".
func actorLabel(a *lt.Actor) string {
	return fmt.Sprintf("%s (%s)", oneLine(a.Name), a.Role)
}

// eventDetail is what eventSummary says of an event's data.
func eventDetail(ev lt.Event) string {
	var blob lt.BlobData
	if json.Unmarshal(ev.Data, &blob) == nil && blob.Blob.SHA256 != "" {
		return fmt.Sprintf("(large payload, blob %s, %s) %s", shortHash(blob.Blob.SHA256), fmtBytes(blob.Blob.Size), truncate(blob.Preview, 60))
	}
	switch ev.Type {
	case lt.EventSessionCreated:
		var d lt.SessionCreatedData
		if decode(ev, &d) {
			return fmt.Sprintf("%s: %q", agentLabel(d.Agent), truncate(d.Input, 60))
		}
	case lt.EventSessionStatusChanged:
		var d lt.SessionStatusChangedData
		if decode(ev, &d) {
			s := fmt.Sprintf("%s → %s", d.From, d.To)
			if d.StopReason != "" {
				s += " (" + d.StopReason + ")"
			}
			return s
		}
	case lt.EventSessionCancelRequested:
		var d lt.SessionCancelRequestedData
		if decode(ev, &d) {
			return orDash(truncate(d.Reason, 80))
		}
	case lt.EventTurnSteered:
		var d lt.TurnSteeredData
		if decode(ev, &d) {
			s := fmt.Sprintf("%q", truncate(d.Input, 80))
			if d.Interrupt {
				s += " (interrupt)"
			}
			return s
		}
	case lt.EventTurnCreated:
		var d lt.TurnCreatedData
		if decode(ev, &d) {
			return fmt.Sprintf("turn %d: %q", d.Index, truncate(d.Input, 60))
		}
	case lt.EventTurnStarted:
		var d lt.TurnStartedData
		if decode(ev, &d) {
			return d.TurnID
		}
	case lt.EventTurnCompleted:
		var d lt.TurnCompletedData
		if decode(ev, &d) {
			return fmt.Sprintf("%q", truncate(d.Output, 80))
		}
	case lt.EventTurnFailed:
		var d lt.TurnFailedData
		if decode(ev, &d) {
			return d.StopReason + ": " + truncate(d.Error, 80)
		}
	case lt.EventTurnCancelled:
		var d lt.TurnCancelledData
		if decode(ev, &d) {
			return orDash(truncate(d.Reason, 80))
		}
	case lt.EventModelRequested:
		var d lt.ModelRequestedData
		if decode(ev, &d) {
			m := d.Provider
			if d.Model != "" {
				m += "/" + d.Model
			}
			if d.Purpose != "" {
				m += ", " + d.Purpose
			}
			if d.Steers > 0 {
				m += fmt.Sprintf(", %d steering", d.Steers)
			}
			return fmt.Sprintf("step %d: %s (attempt %d)", d.Step, m, d.Attempt)
		}
	case lt.EventModelResponded:
		var d lt.ModelRespondedData
		if decode(ev, &d) {
			return fmt.Sprintf("step %d: %s  · %s tok · %s · %s", d.Step, modelAnswer(d),
				fmtTokens(d.Usage.InputTokens+d.Usage.OutputTokens, d.Usage.Estimated), fmtCost(d.CostUSD), fmtDuration(ms(d.DurationMS)))
		}
	case lt.EventModelFailed:
		var d lt.ModelFailedData
		if decode(ev, &d) {
			kind := d.Kind
			if d.Status != 0 {
				kind += fmt.Sprintf(" (HTTP %d)", d.Status)
			}
			return fmt.Sprintf("step %d, attempt %d: %s: %s", d.Step, d.Attempt, kind, truncate(d.Message, 80))
		}
	case lt.EventToolRequested:
		var d lt.ToolRequestedData
		if decode(ev, &d) {
			return fmt.Sprintf("step %d: %s [%s, %s]", d.Step, toolLabel(d.Tool, d.Arguments), d.Kind, d.Class)
		}
	case lt.EventToolStarted:
		var d lt.ToolStartedData
		if decode(ev, &d) {
			return fmt.Sprintf("step %d: %s [%s] effect %s, attempt %d", d.Step, d.Tool, d.Class, d.EffectID, d.Attempt)
		}
	case lt.EventToolCompleted:
		var d lt.ToolCompletedData
		if decode(ev, &d) {
			s := fmt.Sprintf("step %d: %s → %s (%s)", d.Step, d.Tool, truncate(string(d.Output), 60), fmtDuration(ms(d.DurationMS)))
			if d.Resolution != "" {
				s += ", resolved: " + d.Resolution
			}
			return s
		}
	case lt.EventToolFailed:
		var d lt.ToolFailedData
		if decode(ev, &d) {
			return fmt.Sprintf("step %d: %s: %s", d.Step, d.Tool, truncate(d.Error, 80))
		}
	case lt.EventEffectInDoubt:
		var d lt.EffectInDoubtData
		if decode(ev, &d) {
			return fmt.Sprintf("step %d: %s: %s (action %s)", d.Step, d.Tool, truncate(d.Reason, 60), d.ActionID)
		}
	case lt.EventActionRequired:
		var d lt.ActionRequiredData
		if decode(ev, &d) {
			return fmt.Sprintf("%s %s: %s", d.Action.Type, d.Action.ID, truncate(actionWhat(&d.Action), 80))
		}
	case lt.EventActionResolved:
		var d lt.ActionResolvedData
		if decode(ev, &d) {
			return fmt.Sprintf("%s %s: %s", d.Type, d.ActionID, decisionText(&d.Decision))
		}
	case lt.EventCheckpointCreated:
		var d lt.CheckpointCreatedData
		if decode(ev, &d) {
			return fmt.Sprintf("%s: %s", d.Checkpoint.Name, truncate(d.Checkpoint.Summary, 60))
		}
	case lt.EventArtifactCreated:
		var d lt.ArtifactCreatedData
		if decode(ev, &d) {
			return fmt.Sprintf("%s %s v%d (%s)", d.Artifact.ID, d.Artifact.Name, d.Artifact.Version, fmtBytes(d.Artifact.Size))
		}
	case lt.EventBudgetExceeded:
		var d lt.BudgetExceededData
		if decode(ev, &d) && d.Limit != "" {
			return fmt.Sprintf("%s: used %g of %g", d.Limit, d.Used, d.Max)
		}
	case lt.EventBudgetWarning:
		var d lt.BudgetWarningData
		if decode(ev, &d) && d.Limit.Name != "" {
			return fmt.Sprintf("%s: used %g of %g", d.Limit.Name, d.Limit.Used, d.Limit.Max)
		}
	case lt.EventPolicyDecided:
		var d lt.PolicyDecidedData
		if decode(ev, &d) {
			return fmt.Sprintf("step %d: %s %s by %s: %s", d.Step, d.Decision, d.Tool, d.Rule, truncate(d.Reason, 60))
		}
	case lt.EventModelDelta:
		var d lt.ModelDeltaData
		if decode(ev, &d) {
			return fmt.Sprintf("step %d: %q", d.Step, truncate(d.Text+d.Reasoning, 70))
		}
	case lt.EventContextCompacted:
		var d lt.ContextCompactedData
		if decode(ev, &d) {
			return fmt.Sprintf("step %d: %s → %s tok, %d items summarised: %q", d.Step, fmtInt(int64(d.TokensBefore)), fmtInt(int64(d.TokensAfter)), d.Items, truncate(d.Summary, 50))
		}
	case lt.EventAcceptanceVerified:
		var d lt.AcceptanceVerifiedData
		if decode(ev, &d) {
			met := 0
			for _, c := range d.Verdict.Criteria {
				if c.Met {
					met++
				}
			}
			if d.Verdict.Error != "" {
				return fmt.Sprintf("step %d, attempt %d: %s", d.Step, d.Verdict.Attempt, truncate(d.Verdict.Error, 70))
			}
			return fmt.Sprintf("step %d, attempt %d: %d of %d criteria met", d.Step, d.Verdict.Attempt, met, len(d.Verdict.Criteria))
		}
	case lt.EventSubagentSpawned:
		var d lt.SubagentSpawnedData
		if decode(ev, &d) && d.ChildID != "" {
			return fmt.Sprintf("step %d: %s (%s): %q", d.Step, d.ChildID, agentLabel(d.Agent), truncate(d.Input, 60))
		}
	case lt.EventSubagentCompleted:
		var d lt.SubagentCompletedData
		if decode(ev, &d) && d.ChildID != "" {
			s := fmt.Sprintf("%s %s", d.ChildID, d.Status)
			if d.StopReason != "" {
				s += " (" + d.StopReason + ")"
			}
			out := d.Output
			if out == "" {
				out = d.Error
			}
			return fmt.Sprintf("%s · %s tok · %s: %q", s, fmtTokens(d.Usage.InputTokens+d.Usage.OutputTokens, d.Usage.Estimated), fmtCost(d.Usage.CostUSD), truncate(out, 50))
		}
	case lt.EventConstraintAdded:
		var d lt.ConstraintAddedData
		if decode(ev, &d) {
			return fmt.Sprintf("pinned: %q", truncate(d.Constraint, 80))
		}
	case lt.EventWorkspaceChanged:
		if s, ok := workspaceChangedSummary(ev); ok {
			return s
		}
	case lt.EventWorkspaceChangeNotApplied:
		if s, ok := changeNotAppliedSummary(ev); ok {
			return s
		}
	case lt.EventMonitorFinding:
		var d lt.MonitorFindingData
		if decode(ev, &d) && d.Detector != "" {
			out := fmt.Sprintf("%s (%s, %s): %s; events %s", d.Detector, d.Severity, d.Action, truncate(d.Summary, 80), evidenceSeqs(d.Evidence))
			if len(d.TreeEvidence) > 0 {
				// Found with other sessions of the tree: their events too.
				refs := make([]string, len(d.TreeEvidence))
				for i, e := range d.TreeEvidence {
					refs[i] = fmt.Sprintf("%s#%d", e.SessionID, e.Seq)
				}
				out += "; in the tree " + strings.Join(refs, ", ")
			}
			return out
		}
	case lt.EventMonitorReviewed:
		var d lt.MonitorReviewedData
		if decode(ev, &d) && d.Verdict != "" {
			return reviewSummary(&d)
		}
	case lt.EventMonitorHeld:
		var d lt.MonitorHeldData
		if decode(ev, &d) && d.ActionID != "" {
			return "sub-agents paused with this session until " + d.ActionID + " is decided"
		}
	case lt.EventSessionPauseRequested, lt.EventSessionPaused, lt.EventSessionResumed:
		if s, ok := pauseSummary(ev); ok {
			return s
		}
	}
	return truncate(string(ev.Data), 100)
}

// decode unmarshals an event's data; false means it has another shape (from
// a newer server, say), and the caller falls back to the raw JSON.
func decode(ev lt.Event, v any) bool {
	return json.Unmarshal(ev.Data, v) == nil
}

func modelAnswer(d lt.ModelRespondedData) string {
	if len(d.ToolCalls) == 0 {
		return fmt.Sprintf("%q", truncate(d.Text, 60))
	}
	labels := make([]string, len(d.ToolCalls))
	for i, tc := range d.ToolCalls {
		labels[i] = toolLabel(tc.Name, tc.Arguments)
	}
	return "→ " + strings.Join(labels, ", ")
}

// toolLabel names a tool call with its most telling argument, like
// "shell(wc -w notes.md)" or "write_file(notes.md)".
func toolLabel(name string, args json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil || len(m) == 0 {
		return name
	}
	if arts, ok := m["artifacts"].([]any); ok && len(arts) > 0 {
		parts := make([]string, 0, len(arts))
		for _, a := range arts {
			if s, ok := a.(string); ok {
				parts = append(parts, s)
			}
		}
		return fmt.Sprintf("%s(%s)", name, truncate(strings.Join(parts, ", "), 40))
	}
	for _, k := range []string{"path", "command", "url", "name", "question", "summary", "seconds"} {
		if v, ok := m[k]; ok {
			return fmt.Sprintf("%s(%s)", name, truncate(fmt.Sprint(v), 40))
		}
	}
	// An application tool: its first string argument, by key order.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if s, ok := m[k].(string); ok {
			return fmt.Sprintf("%s(%s)", name, truncate(s, 40))
		}
	}
	return name
}

// actionWhat says what an action asks for.
func actionWhat(a *lt.Action) string {
	switch {
	case a.Summary != "":
		return a.Summary
	case a.Question != "":
		return a.Question
	case a.Tool != "":
		return toolLabel(a.Tool, a.Arguments)
	}
	return string(a.Type)
}

// decisionText describes a decision on an action.
func decisionText(d *lt.Decision) string {
	switch {
	case d.Decision != "" && d.Reason != "":
		return d.Decision + ": " + truncate(d.Reason, 60)
	case d.Decision != "" && d.Scope != "":
		return d.Decision + " (" + d.Scope + ")"
	case d.Decision != "":
		return d.Decision
	case d.Error != "":
		return "error: " + truncate(d.Error, 60)
	case len(d.Output) > 0:
		return "output " + truncate(string(d.Output), 60)
	case d.Answer != "":
		return "answer: " + truncate(d.Answer, 60)
	}
	return "resolved"
}

// reviewSummary is a model monitor's review in one line: the verdict, what
// it reviewed and its reasons.
func reviewSummary(d *lt.MonitorReviewedData) string {
	what := fmt.Sprintf("step %d", d.Step)
	if d.Trigger == lt.ReviewBefore {
		what = "before " + d.Tool + " " + d.CallID
	}
	s := d.Verdict + " (" + what
	if d.Failed {
		s += ", failed closed"
	}
	s += ")"
	if len(d.Reasons) > 0 {
		s += ": " + truncate(strings.Join(d.Reasons, "; "), 120)
	}
	if d.CostUSD > 0 {
		s += fmt.Sprintf("; $%.4f", d.CostUSD)
	}
	return s
}
