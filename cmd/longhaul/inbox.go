package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var actionTypes = []lt.ActionType{lt.ActionApproval, lt.ActionFunctionCall, lt.ActionInput, lt.ActionInDoubt, lt.ActionBudget, lt.ActionEnvironmentConnection, lt.ActionBrowserPermission, lt.ActionMonitor}

func joinActionTypes() string {
	s := make([]string, len(actionTypes))
	for i, t := range actionTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

type inboxOpts struct {
	client  *clientOpts
	typ     string
	session string
	project string
	json    bool
}

func (c *cli) inboxCmd() *cobra.Command {
	o := &inboxOpts{}
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "List every pending action across sessions, with what a person needs to decide",
		Long: `List the required actions that wait for a decision, across all sessions, oldest
first. Each one is shown in full: what it is in plain language, its session and
turn, the tool and the exact arguments it would run with (and their SHA-256,
which an approval is bound to), who or what it affects, the evidence, the
consequence, the policy that asked, when it expires, and the commands that
decide it:

  approval       longhaul approve ACTION [--edit JSON] | reject ACTION --reason TEXT | stop ACTION
  input          longhaul answer ACTION TEXT
  budget         longhaul approve ACTION [--max-cost N ...] | stop ACTION
  function_call  longhaul respond ACTION --output JSON | --error MSG
  in_doubt       longhaul decide ACTION happened|did_not_happen|skip`,
		Example: `  longhaul inbox
  longhaul inbox --type approval
  longhaul inbox --session ses_01J9Z --json | jq -r '.[].id'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.inbox(cmd, o) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.typ, "type", "", "only actions of this type: "+joinActionTypes())
	fs.StringVar(&o.session, "session", "", "only actions of this session")
	fs.StringVar(&o.project, "project", "", "only actions of this project's sessions (an admin key may name any; another key sees only its own)")
	fs.BoolVar(&o.json, "json", false, "print a JSON array of actions (API objects)")
	return cmd
}

func (c *cli) inbox(cmd *cobra.Command, o *inboxOpts) error {
	if o.typ != "" && !slices.Contains(actionTypes, lt.ActionType(o.typ)) {
		return usagef("--type %q: want one of %s", o.typ, joinActionTypes())
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	actions := []lt.Action{}
	p := lt.ListActionsParams{Status: string(lt.ActionPending), Type: o.typ, SessionID: o.session, Project: o.project}
	for a, err := range cl.AllActions(cmd.Context(), p) {
		if err != nil {
			return err
		}
		actions = append(actions, a)
	}
	if o.json {
		return writeJSON(c.stdout, actions)
	}
	if len(actions) == 0 {
		_, err := fmt.Fprintln(c.stdout, "No pending actions.")
		return err
	}
	noun := "actions"
	if len(actions) == 1 {
		noun = "action"
	}
	fmt.Fprintf(c.stdout, "%d pending %s.\n", len(actions), noun)
	now := c.now()
	for i := range actions {
		fmt.Fprintln(c.stdout)
		if err := printAction(c.stdout, &actions[i], now); err != nil {
			return err
		}
	}
	return nil
}

type actionOpts struct {
	client *clientOpts
	json   bool
}

func (c *cli) actionCmd() *cobra.Command {
	o := &actionOpts{}
	cmd := &cobra.Command{
		Use:   "action ACTION_ID",
		Short: "Show one required action in full, and how to decide it",
		Long: `Show a required action by its id, in any status, the way 'longhaul inbox' shows
it: what it is, the exact arguments and their SHA-256, who or what it affects,
the evidence, the consequence and the commands that decide it. A resolved
action shows its resolution.`,
		Example: `  longhaul action act_4f2a
  longhaul action act_4f2a --json | jq .arguments`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.action(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the action as JSON (the API object)")
	return cmd
}

func (c *cli) action(cmd *cobra.Command, o *actionOpts, id string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	a, err := cl.GetAction(cmd.Context(), id)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, a)
	}
	return printAction(c.stdout, a, c.now())
}

// labelWidth aligns the values of an action block.
const labelWidth = 14

// block writes "label: value" lines whose values line up; the lines of a
// multi-line value are indented under its first.
type block struct {
	w   io.Writer
	err error
}

func (b *block) line(label, value string) {
	if b.err != nil {
		return
	}
	pad := strings.Repeat(" ", labelWidth+2)
	value = strings.ReplaceAll(strings.TrimRight(value, "\n"), "\n", "\n"+pad)
	_, b.err = fmt.Fprintf(b.w, "  %-*s%s\n", labelWidth, label, value)
}

func (b *block) text(format string, args ...any) {
	if b.err != nil {
		return
	}
	_, b.err = fmt.Fprintf(b.w, format+"\n", args...)
}

// printAction writes everything a person needs to decide a (see the inbox
// command's help), then the commands that decide it while it is pending.
func printAction(w io.Writer, a *lt.Action, now time.Time) error {
	b := &block{w: w}
	b.text("%s  %s  %s", a.ID, a.Type, a.Status)
	b.text("  %s", actionWhat(a))
	b.line("Session:", a.SessionID)
	turn := orDash(a.TurnID)
	if a.Step > 0 {
		turn += fmt.Sprintf(" (step %d)", a.Step)
	}
	b.line("Turn:", turn)
	if a.Tool != "" {
		b.line("Tool:", a.Tool)
	}
	if a.Call != "" {
		b.line("Call:", a.Call)
	}
	if len(a.Arguments) > 0 {
		b.line("Arguments:", prettyJSON(a.Arguments))
	}
	if a.ArgumentsSHA256 != "" {
		b.line("SHA-256:", a.ArgumentsSHA256)
	}
	if a.IdempotencyKey != "" && a.Type == lt.ActionFunctionCall {
		b.line("Idem. key:", a.IdempotencyKey)
	}
	if len(a.Affects) > 0 {
		b.line("Affects:", strings.Join(a.Affects, ", "))
	}
	for i, e := range a.Evidence {
		b.line(labelIf(i == 0, "Evidence:"), "- "+e)
	}
	if a.Consequence != "" {
		b.line("Consequence:", a.Consequence)
	}
	if a.Policy != "" {
		b.line("Asked by:", "policy "+a.Policy)
	}
	if a.Approvers != nil {
		b.line("Approvers:", approversText(a.Approvers))
	}
	if a.Origin != "" {
		b.line("Site:", a.Origin)
	}
	if a.Purpose != "" {
		b.line("Purpose:", a.Purpose)
	}
	if a.RequestID != "" {
		b.line("Request:", a.RequestID)
	}
	if a.Question != "" {
		b.line("Question:", a.Question)
	}
	for i, ch := range a.Choices {
		b.line(labelIf(i == 0, "Choices:"), fmt.Sprintf("%d. %s", i+1, ch))
	}
	if a.Limit != nil {
		b.line("Limit:", limitText(a.Limit))
	}
	if a.Usage != nil {
		b.line("Usage:", usageLine(*a.Usage))
	}
	if r := a.Review; r != nil {
		b.line("Review:", reviewSummary(r))
	}
	if f := a.Finding; f != nil {
		b.line("Finding:", f.Detector+" ("+f.Severity+"): "+f.Summary)
		b.line("Events:", evidenceSeqs(f.Evidence)+"   (longhaul events "+a.SessionID+")")
	}
	b.line("Created:", fmtTime(a.CreatedAt))
	b.line("Expires:", expiryText(a.ExpiresAt, now))
	if a.Status != lt.ActionPending {
		resolved := "-"
		if a.ResolvedAt != nil {
			resolved = fmtTime(*a.ResolvedAt)
		}
		b.line("Resolved:", resolved)
		if a.ResolvedBy != nil {
			b.line("Decided by:", actorLabel(a.ResolvedBy))
		}
		if len(a.Resolution) > 0 {
			b.line("Resolution:", resolutionText(a.Resolution))
		}
		return b.err
	}
	b.line("Decide:", strings.Join(decideCommands(a), "\n"))
	return b.err
}

// decideCommands are the command lines that settle a pending action.
func decideCommands(a *lt.Action) []string {
	switch a.Type {
	case lt.ActionApproval:
		return []string{
			"longhaul approve " + a.ID,
			"longhaul approve " + a.ID + " --edit '" + editTemplate(a.Arguments) + "'",
			"longhaul reject " + a.ID + " --reason TEXT",
			"longhaul stop " + a.ID + " [--reason TEXT]",
		}
	case lt.ActionInput:
		if len(a.Choices) > 0 {
			return []string{"longhaul answer " + a.ID + " " + shellQuote(a.Choices[0]) + "   (one of the choices)"}
		}
		return []string{"longhaul answer " + a.ID + " TEXT"}
	case lt.ActionBudget:
		return []string{
			"longhaul approve " + a.ID + " [--soft-cost N --max-cost N ...]   (see 'longhaul budget --help')",
			"longhaul stop " + a.ID + " [--reason TEXT]",
		}
	case lt.ActionFunctionCall:
		return []string{"longhaul respond " + a.ID + " --output JSON   (or --error MSG)"}
	case lt.ActionInDoubt:
		return []string{"longhaul decide " + a.ID + " happened|did_not_happen|skip"}
	case lt.ActionEnvironmentConnection:
		return []string{
			"longhaul stop " + a.ID + " [--reason TEXT]   (or wait: it goes on by itself when a matching runner connects; see 'longhaul runners')",
			"longhaul unpin " + a.ID + " [--reason TEXT]   (a pinned session: let any matching runner take it, e.g. its runner's key was replaced)",
		}
	case lt.ActionMonitor:
		return []string{"longhaul continue " + a.ID, "longhaul stop " + a.ID + " [--reason TEXT]"}
	case lt.ActionBrowserPermission:
		return []string{
			"longhaul allow " + a.ID + " --scope once|session --request-id " + a.RequestID,
			"longhaul deny " + a.ID + " --reason TEXT --request-id " + a.RequestID,
		}
	}
	return []string{"longhaul actions " + a.SessionID}
}

// evidenceSeqs lists a finding's evidence seqs.
func evidenceSeqs(seqs []int64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ", ")
}

// editTemplate is the action's arguments on one line, ready to be edited
// in an --edit flag (single quotes inside would end the shell word, so
// such arguments get a placeholder).
func editTemplate(args json.RawMessage) string {
	var b bytes.Buffer
	if len(args) == 0 || json.Compact(&b, args) != nil || strings.Contains(b.String(), "'") || b.Len() > 200 {
		return "{...}"
	}
	return unescapeHTML(b.String())
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// prettyJSON indents a JSON value for reading, keeping its key order and
// number literals; anything else is shown as is.
func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return unescapeHTML(b.String())
}

// unescapeHTML undoes the \u003c, \u003e and \u0026 escapes that Go's JSON
// encoder (the server's) writes for <, > and &: a person reading the
// arguments of a call should see the characters. Outside strings JSON has
// no backslash, and inside one every backslash starts a two-character
// escape, so reading escapes pairwise never splits one.
func unescapeHTML(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			switch s[i+2 : i+6] {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		b.WriteString(s[i : i+2])
		i++
	}
	return b.String()
}

// limitText says which budget limit a budget action is about and where the
// usage stands against it.
func limitText(l *lt.BudgetLimit) string {
	s := fmt.Sprintf("%s: used %s", l.Name, dimText(l.Name, l.Used))
	if l.Soft > 0 {
		s += ", soft " + dimText(l.Name, l.Soft)
	}
	if l.Max > 0 {
		s += ", max " + dimText(l.Name, l.Max)
	} else {
		s += ", no max"
	}
	return s
}

// dimText formats a value of a budget dimension.
func dimText(name string, v float64) string {
	switch name {
	case "cost_usd":
		return fmtCost(v)
	case "wall_seconds":
		return fmtDuration(time.Duration(v * float64(time.Second)))
	}
	return fmtInt(int64(v))
}

func expiryText(at *time.Time, now time.Time) string {
	if at == nil {
		return "never"
	}
	if d := at.Sub(now); d > 0 {
		return fmt.Sprintf("%s (in %s)", fmtTime(*at), fmtDuration(d))
	}
	return fmt.Sprintf("%s (expired %s ago)", fmtTime(*at), fmtDuration(now.Sub(*at)))
}

// resolutionText shows a stored decision: its short form, then the
// decision itself when it carries more (edited arguments, an output).
func resolutionText(raw json.RawMessage) string {
	var d lt.Decision
	if err := json.Unmarshal(raw, &d); err != nil {
		return prettyJSON(raw)
	}
	s := decisionText(&d)
	if len(d.Arguments) > 0 || len(d.Output) > 0 || d.Budget != nil {
		s += "\n" + prettyJSON(raw)
	}
	return s
}

// approversText says who may decide an approval: "role admin, not the
// session's creator".
func approversText(ap *lt.Approvers) string {
	var parts []string
	if len(ap.Roles) > 0 {
		roles := make([]string, len(ap.Roles))
		for i, r := range ap.Roles {
			roles[i] = string(r)
		}
		parts = append(parts, "role "+strings.Join(roles, " or "))
	}
	if len(ap.Names) > 0 {
		parts = append(parts, "named "+strings.Join(ap.Names, " or "))
	}
	if ap.NotCreator {
		parts = append(parts, "not the session's creator")
	}
	return strings.Join(parts, ", ")
}
