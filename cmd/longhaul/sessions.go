package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// defaultListLimit is how many sessions `ls` shows without --limit.
const defaultListLimit = 50

// maxListTotal bounds `ls --limit`: beyond that, page with the API.
const maxListTotal = 10000

var sessionStatuses = []lt.SessionStatus{
	lt.SessionQueued, lt.SessionRunning, lt.SessionRequiresAction, lt.SessionWaiting,
	lt.SessionIdle, lt.SessionFailed, lt.SessionCancelled, lt.SessionPaused,
}

type lsOpts struct {
	client  *clientOpts
	status  string
	agent   string
	project string
	limit   int
	json    bool
}

func (c *cli) lsCmd() *cobra.Command {
	o := &lsOpts{}
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sessions, newest first",
		Example: `  longhaul ls
  longhaul ls --status requires_action
  longhaul ls --agent researcher --limit 200 --json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.ls(cmd, o) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.status, "status", "", "only sessions with this status: "+joinStatuses())
	fs.StringVar(&o.agent, "agent", "", "only sessions of this agent")
	fs.StringVar(&o.project, "project", "", "only sessions of this project (an admin key may name any; another key sees only its own)")
	fs.IntVar(&o.limit, "limit", defaultListLimit, fmt.Sprintf("at most this many sessions (1-%d)", maxListTotal))
	fs.BoolVar(&o.json, "json", false, "print a JSON array of sessions (API objects)")
	return cmd
}

func joinStatuses() string {
	s := make([]string, len(sessionStatuses))
	for i, st := range sessionStatuses {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

func (c *cli) ls(cmd *cobra.Command, o *lsOpts) error {
	if o.status != "" && !validStatus(o.status) {
		return usagef("--status %q: want one of %s", o.status, joinStatuses())
	}
	if o.limit < 1 || o.limit > maxListTotal {
		return usagef("--limit %d: want 1 to %d", o.limit, maxListTotal)
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	sessions := []lt.Session{}
	p := client.ListSessionsParams{Project: o.project, Status: lt.SessionStatus(o.status), Agent: o.agent}
	for len(sessions) < o.limit {
		p.Limit = min(o.limit-len(sessions), client.MaxListLimit)
		page, err := cl.ListSessions(ctx, p)
		if err != nil {
			return err
		}
		sessions = append(sessions, page.Data...)
		if page.NextCursor == nil || len(page.Data) == 0 {
			break
		}
		p.Cursor = *page.NextCursor
	}
	if o.json {
		return writeJSON(c.stdout, sessions)
	}
	if len(sessions) == 0 {
		_, err := fmt.Fprintln(c.stdout, "No sessions.")
		return err
	}
	t := newTable(c.stdout, "ID", "STATUS", "AGENT", "TOKENS", "COST", "ACTIONS", "CREATED", "INPUT")
	for _, s := range sessions {
		status := string(s.Status)
		if s.StopReason != nil {
			status += " (" + *s.StopReason + ")"
		}
		t.row(s.ID, status, agentCell(s.Agent), fmtTokens(s.Usage.InputTokens+s.Usage.OutputTokens, s.Usage.Estimated),
			fmtCost(s.Usage.CostUSD), fmt.Sprint(pendingCount(s.RequiredActions)), fmtTime(s.CreatedAt), truncate(s.Input, 50))
	}
	return t.flush()
}

func validStatus(s string) bool {
	for _, st := range sessionStatuses {
		if string(st) == s {
			return true
		}
	}
	return false
}

func agentCell(a lt.AgentRef) string {
	return fmt.Sprintf("%s v%d", a.Name, a.Version)
}

func pendingCount(actions []lt.Action) int {
	n := 0
	for _, a := range actions {
		if a.Status == lt.ActionPending {
			n++
		}
	}
	return n
}

type showOpts struct {
	client    *clientOpts
	json      bool
	subagents bool
}

func (c *cli) showCmd() *cobra.Command {
	o := &showOpts{}
	cmd := &cobra.Command{
		Use:   "show SESSION_ID",
		Short: "Show a session: status, intent, budget, usage, turns and pending actions",
		Long: `Show a session: its status, intent, budget, usage, turns and pending actions.

With --subagents, show the session's tree instead: the session and every
sub-agent it spawned, each under its parent, with its status, agent, usage
and pending actions, then the pending actions of the whole tree with the
session each belongs to (decide an action on its own session).`,
		Example: `  longhaul show ses_01J9Z
  longhaul show ses_01J9Z --subagents
  longhaul show ses_01J9Z --json | jq .usage
  longhaul show ses_01J9Z --subagents --json | jq '.subagents[].status'`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.show(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the session as JSON (the API object)")
	cmd.Flags().BoolVar(&o.subagents, "subagents", false, "show the session's tree of sub-agents, recursively")
	return cmd
}

func (c *cli) show(cmd *cobra.Command, o *showOpts, id string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if o.subagents {
		tree, err := cl.GetSessionTree(ctx, id)
		if err != nil {
			return err
		}
		if o.json {
			return writeJSON(c.stdout, tree)
		}
		return printSessionTree(c.stdout, tree)
	}
	s, err := cl.GetSession(ctx, id)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, s)
	}
	turns, err := cl.ListTurns(ctx, id)
	if err != nil {
		return err
	}
	return printSession(c.stdout, s, turns.Data)
}

func printSession(w io.Writer, s *lt.Session, turns []lt.Turn) error {
	kv := newTable(w, "Session:", s.ID)
	status := string(s.Status)
	if s.StopReason != nil {
		status += " (" + *s.StopReason + ")"
	}
	if s.CancelRequested {
		status += " (cancel requested)" // until the cancel has taken effect
	}
	if s.PauseRequested {
		status += " (pause requested)" // until the call in flight has finished
	}
	if s.PauseParentID != "" {
		status += " (with its parent " + s.PauseParentID + ")" // resumed with it
	}
	kv.row("Status:", status)
	kv.row("Agent:", agentCell(s.Agent))
	if s.ParentID != nil {
		kv.row("Parent:", *s.ParentID)
	}
	kv.row("Input:", truncate(s.Input, 200))
	if s.Goal != "" {
		kv.row("Goal:", s.Goal)
	}
	for i, x := range s.Constraints {
		kv.row(labelIf(i == 0, "Constraints:"), "- "+x)
	}
	for i, x := range s.AcceptanceCriteria {
		kv.row(labelIf(i == 0, "Acceptance:"), "- "+x)
	}
	kv.row("Usage:", usageLine(s.Usage))
	if b := budgetText(s.Budget); b != "" {
		kv.row("Budget:", b)
	}
	if s.LastCheckpoint != nil {
		kv.row("Checkpoint:", *s.LastCheckpoint)
	}
	if s.Review != nil {
		verdict := "rejected"
		if s.Review.Accepted {
			verdict = "accepted"
		}
		if s.Review.Note != "" {
			verdict += ": " + s.Review.Note
		}
		kv.row("Review:", verdict)
	}
	kv.row("Events:", fmt.Sprint(s.LastEventSeq))
	created := fmtTime(s.CreatedAt)
	if s.CreatedBy != nil {
		created += " by " + actorLabel(s.CreatedBy)
	}
	kv.row("Created:", created)
	kv.row("Updated:", fmtTime(s.UpdatedAt))
	if err := kv.flush(); err != nil {
		return err
	}

	if len(turns) > 0 {
		fmt.Fprintln(w, "\nTurns:")
		t := newTable(w, "  #", "ID", "STATUS", "STEPS", "TOKENS", "COST", "OUTPUT")
		for _, tr := range turns {
			status := string(tr.Status)
			if tr.StopReason != nil {
				status += " (" + *tr.StopReason + ")"
			}
			out := tr.Output
			if out == "" {
				out = tr.Error
			}
			t.row(fmt.Sprintf("  %d", tr.Index), tr.ID, status, fmt.Sprint(tr.Steps),
				fmtTokens(tr.Usage.InputTokens+tr.Usage.OutputTokens, tr.Usage.Estimated), fmtCost(tr.Usage.CostUSD), orDash(truncate(out, 60)))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	if pendingCount(s.RequiredActions) > 0 {
		fmt.Fprintln(w, "\nRequired actions:")
		if err := printActionTable(w, "  ", s.RequiredActions); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nSee how to settle each with 'longhaul action ACTION_ID' (or 'longhaul inbox --session %s').\n", s.ID)
	}
	return nil
}

// printSessionTree prints a session and its sub-agents as an indented tree,
// one line per session, then the pending actions of the whole tree.
func printSessionTree(w io.Writer, root *lt.Session) error {
	t := newTable(w, "SESSION", "STATUS", "AGENT", "TOKENS", "COST", "ACTIONS", "INPUT")
	var pending []lt.Action
	var walk func(s *lt.Session, lead, branch string)
	walk = func(s *lt.Session, lead, branch string) {
		status := string(s.Status)
		if s.StopReason != nil {
			status += " (" + *s.StopReason + ")"
		}
		n := pendingCount(s.RequiredActions)
		t.row(lead+branch+s.ID, status, agentCell(s.Agent), fmtTokens(s.Usage.InputTokens+s.Usage.OutputTokens, s.Usage.Estimated),
			fmtCost(s.Usage.CostUSD), fmt.Sprint(n), truncate(s.Input, 40))
		for _, a := range s.RequiredActions {
			if a.Status == lt.ActionPending {
				pending = append(pending, a)
			}
		}
		// The children's lines hang under this one's: a continuing
		// line while this session has later siblings.
		switch branch {
		case "├─ ":
			lead += "│  "
		case "└─ ":
			lead += "   "
		}
		for i := range s.Subagents {
			b := "├─ "
			if i == len(s.Subagents)-1 {
				b = "└─ "
			}
			walk(&s.Subagents[i], lead, b)
		}
	}
	walk(root, "", "")
	if err := t.flush(); err != nil {
		return err
	}
	if len(pending) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nPending actions:")
	at := newTable(w, "  ID", "SESSION", "TYPE", "TOOL", "CREATED", "SUMMARY")
	for _, a := range pending {
		at.row("  "+a.ID, a.SessionID, string(a.Type), orDash(a.Tool), fmtTime(a.CreatedAt), truncate(actionWhat(&a), 60))
	}
	if err := at.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\nSee how to settle each with 'longhaul action ACTION_ID'.")
	return err
}

func labelIf(first bool, label string) string {
	if first {
		return label
	}
	return ""
}

// budgetText lists the limits that are set, as "max (soft)" pairs.
func budgetText(b lt.Budget) string {
	var parts []string
	add := func(name string, max, soft float64, format func(float64) string) {
		switch {
		case max > 0 && soft > 0:
			parts = append(parts, fmt.Sprintf("%s %s (soft %s)", name, format(max), format(soft)))
		case max > 0:
			parts = append(parts, fmt.Sprintf("%s %s", name, format(max)))
		case soft > 0:
			parts = append(parts, fmt.Sprintf("%s soft %s", name, format(soft)))
		}
	}
	count := func(f float64) string { return fmtInt(int64(f)) }
	add("cost", b.MaxCostUSD, b.SoftCostUSD, fmtCost)
	add("tokens", float64(b.MaxTokens), float64(b.SoftTokens), count)
	add("model calls", float64(b.MaxModelCalls), float64(b.SoftModelCalls), count)
	add("tool calls", float64(b.MaxToolCalls), float64(b.SoftToolCalls), count)
	add("wall seconds", float64(b.MaxWallSeconds), float64(b.SoftWallSeconds), count)
	return strings.Join(parts, ", ")
}

type cancelOpts struct {
	client *clientOpts
	reason string
	json   bool
}

func (c *cli) cancelCmd() *cobra.Command {
	o := &cancelOpts{}
	cmd := &cobra.Command{
		Use:   "cancel SESSION_ID",
		Short: "Cancel a session's running turn at its next safe point",
		Long: `Ask the server to stop the session's running turn at the next safe point.
Effects already started stay in the ledger as such; nothing is rolled back.`,
		Example: `  longhaul cancel ses_01J9Z
  longhaul cancel ses_01J9Z --reason "wrong customer"`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.cancel(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.reason, "reason", "", "why, recorded in the journal")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the session as JSON")
	return cmd
}

func (c *cli) cancel(cmd *cobra.Command, o *cancelOpts, id string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	s, err := cl.Cancel(cmd.Context(), id, &lt.CancelRequest{Reason: o.reason})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, s)
	}
	_, err = fmt.Fprintf(c.stdout, "Cancel requested for %s (status: %s).\n", s.ID, s.Status)
	return err
}

func (c *cli) constrainCmd() *cobra.Command {
	o := &cancelOpts{}
	cmd := &cobra.Command{
		Use:   "constrain SESSION_ID TEXT",
		Short: "Pin a constraint on a running session",
		Long: `Add a constraint to a session while it works. It is pinned like the
constraints given at the start: every later model call carries it verbatim,
and context compaction never summarises it away.`,
		Example: `  longhaul constrain ses_01J9Z "Do not contact the customer before Monday"`,
		Args:    usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.newClient(cmd, o.client)
			if err != nil {
				return err
			}
			s, err := cl.AddConstraint(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(c.stdout, s)
			}
			_, err = fmt.Fprintf(c.stdout, "Pinned on %s; its constraints now:\n  - %s\n", s.ID, strings.Join(s.Constraints, "\n  - "))
			return err
		},
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the session as JSON")
	return cmd
}

type reviewOpts struct {
	client         *clientOpts
	accept, reject bool
	note           string
	cont, json     bool
}

func (c *cli) reviewCmd() *cobra.Command {
	o := &reviewOpts{}
	cmd := &cobra.Command{
		Use:   "review SESSION_ID (--accept | --reject) [--note TEXT] [--continue]",
		Short: "Accept or reject a session's final result",
		Long: `Record your verdict on the session's final artifact: reviews feed cost per
accepted task. With --reject --continue the note becomes a new turn's input,
so the agent works on what you asked.`,
		Example: `  longhaul review ses_01J9Z --accept
  longhaul review ses_01J9Z --reject --note "cite the sources" --continue`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.accept == o.reject {
				return usagef("give exactly one of --accept and --reject")
			}
			cl, err := c.newClient(cmd, o.client)
			if err != nil {
				return err
			}
			accepted := o.accept
			s, err := cl.Review(cmd.Context(), args[0], &lt.ReviewRequest{Accepted: &accepted, Note: o.note, Continue: o.cont})
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(c.stdout, s)
			}
			verdict := "Accepted"
			if !accepted {
				verdict = "Rejected"
			}
			msg := fmt.Sprintf("%s %s", verdict, s.ID)
			if s.Review != nil && s.Review.ArtifactID != "" {
				msg += " (artifact " + s.Review.ArtifactID + ")"
			}
			if o.cont {
				msg += "; a new turn works on your note"
			}
			_, err = fmt.Fprintln(c.stdout, msg+".")
			return err
		},
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&o.accept, "accept", false, "accept the result")
	fs.BoolVar(&o.reject, "reject", false, "reject the result")
	fs.StringVar(&o.note, "note", "", "why (with --continue: the new turn's input)")
	fs.BoolVar(&o.cont, "continue", false, "with --reject: start a new turn with the note as its input")
	fs.BoolVar(&o.json, "json", false, "print the session as JSON")
	return cmd
}

type effectsOpts struct {
	client *clientOpts
	json   bool
	full   bool
}

func (c *cli) effectsCmd() *cobra.Command {
	o := &effectsOpts{}
	cmd := &cobra.Command{
		Use:   "effects SESSION_ID [EFFECT_ID]",
		Short: "List a session's side-effect ledger, or show one effect whole",
		Long: `List every tool call of the session that ran (or may have run) against the
world: what it did and what came of it, its effect class and status (started,
succeeded, failed, in_doubt, resolved).

With an EFFECT_ID, or --full for every row, show each effect whole: its
arguments and its output as the journal holds them, its attempts and its
idempotency key.`,
		Example: `  longhaul effects ses_01J9Z
  longhaul effects ses_01J9Z eff_01J9Z...
  longhaul effects ses_01J9Z --full
  longhaul effects ses_01J9Z --json | jq '.[] | select(.status == "in_doubt")'`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				return c.effect(cmd, o, args[0], args[1])
			}
			return c.effects(cmd, o, args[0])
		},
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON (an array of effects; with --full or EFFECT_ID, with their arguments and outputs)")
	cmd.Flags().BoolVar(&o.full, "full", false, "show every effect whole, with its arguments and output")
	return cmd
}

func (c *cli) effects(cmd *cobra.Command, o *effectsOpts, id string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	l, err := cl.ListEffects(cmd.Context(), id)
	if err != nil {
		return err
	}
	effects := l.Data
	if effects == nil {
		effects = []lt.Effect{}
	}
	if o.full {
		for i := range effects {
			whole, err := cl.GetEffect(cmd.Context(), id, effects[i].ID)
			if err != nil {
				return err
			}
			effects[i] = *whole
		}
	}
	if o.json {
		return writeJSON(c.stdout, effects)
	}
	if len(effects) == 0 {
		_, err := fmt.Fprintln(c.stdout, "No effects.")
		return err
	}
	if o.full {
		for i := range effects {
			if i > 0 {
				if _, err := fmt.Fprintln(c.stdout); err != nil {
					return err
				}
			}
			if err := printEffect(c.stdout, &effects[i]); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTable(c.stdout, "ID", "STEP", "TOOL", "CLASS", "STATUS", "WHAT", "RESULT", "STARTED")
	for _, e := range effects {
		t.row(e.ID, strconv.Itoa(e.Step), e.Tool, string(e.Class), string(e.Status),
			orDash(truncate(e.Summary, 60)), orDash(truncate(effectResult(&e), 50)), fmtTime(e.StartedAt))
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "\nWhole arguments and output: longhaul effects %s EFFECT_ID (or --full)\n", id)
	return err
}

// effect shows one effect whole.
func (c *cli) effect(cmd *cobra.Command, o *effectsOpts, id, effectID string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	e, err := cl.GetEffect(cmd.Context(), id, effectID)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, e)
	}
	return printEffect(c.stdout, e)
}

// effectResult is what a ledger row says came of the call: its result, or
// for a row recorded before the ledger kept one, its error or resolution.
func effectResult(e *lt.Effect) string {
	switch {
	case e.Result != "":
		return e.Result
	case e.Resolution != "":
		return "resolved: " + e.Resolution
	}
	return e.Error
}

// printEffect writes one effect whole, as the inbox writes an action.
func printEffect(w io.Writer, e *lt.Effect) error {
	b := &block{w: w}
	b.text("%s  %s  %s", e.ID, e.Tool, e.Status)
	if e.Summary != "" {
		b.text("  %s", e.Summary)
	}
	b.line("Step:", fmt.Sprintf("%d (call %d of turn %s)", e.Step, e.CallIndex+1, e.TurnID))
	b.line("Class:", string(e.Class))
	b.line("Attempts:", strconv.Itoa(e.Attempts))
	b.line("Idem. key:", e.IdempotencyKey)
	b.line("Started:", fmtTime(e.StartedAt))
	if e.FinishedAt != nil {
		b.line("Finished:", fmtTime(*e.FinishedAt))
	}
	if r := effectResult(e); r != "" {
		b.line("Result:", r)
	}
	if e.Error != "" {
		b.line("Error:", e.Error)
	}
	if len(e.Arguments) > 0 {
		b.line("Arguments:", prettyJSON(e.Arguments))
	}
	if len(e.Output) > 0 && string(e.Output) != "null" {
		b.line("Output:", prettyJSON(e.Output))
	}
	return b.err
}
