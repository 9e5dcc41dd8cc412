package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type actionsOpts struct {
	client *clientOpts
	status string
	json   bool
}

func (c *cli) actionsCmd() *cobra.Command {
	o := &actionsOpts{}
	cmd := &cobra.Command{
		Use:   "actions SESSION_ID",
		Short: "List a session's required actions",
		Long: `List what the session needs from the application or a person: function calls
to answer ('longhaul respond'), effects in doubt to decide ('longhaul decide'),
tool calls awaiting approval ('longhaul approve', 'reject', 'stop'), questions
('longhaul answer') and soft budget limits reached ('longhaul approve',
'longhaul budget'). 'longhaul inbox' lists the pending ones of every session
in full; 'longhaul action ACTION_ID' shows one.`,
		Example: `  longhaul actions ses_01J9Z
  longhaul actions ses_01J9Z --status pending --json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.actions(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.status, "status", "", "only actions with this status: pending, resolved or cancelled")
	cmd.Flags().BoolVar(&o.json, "json", false, "print a JSON array of actions (API objects)")
	return cmd
}

func (c *cli) actions(cmd *cobra.Command, o *actionsOpts, id string) error {
	switch lt.ActionStatus(o.status) {
	case "", lt.ActionPending, lt.ActionResolved, lt.ActionCancelled:
	default:
		return usagef("--status %q: want pending, resolved or cancelled", o.status)
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	l, err := cl.ListActions(cmd.Context(), id, lt.ActionStatus(o.status))
	if err != nil {
		return err
	}
	actions := l.Data
	if actions == nil {
		actions = []lt.Action{}
	}
	if o.json {
		return writeJSON(c.stdout, actions)
	}
	if len(actions) == 0 {
		_, err := fmt.Fprintln(c.stdout, "No actions.")
		return err
	}
	if err := printActionTable(c.stdout, "", actions); err != nil {
		return err
	}
	for _, a := range actions {
		if a.Status != lt.ActionPending {
			continue
		}
		switch a.Type {
		case lt.ActionFunctionCall:
			fmt.Fprintf(c.stdout, "\n%s: %s%s\n  answer: longhaul respond %s --output 'JSON'   (or --error MSG)\n",
				a.ID, a.Tool, argsSuffix(a.Arguments), a.ID)
		case lt.ActionInDoubt:
			fmt.Fprintf(c.stdout, "\n%s: did %s%s run?\n  decide: longhaul decide %s happened|did_not_happen|skip\n",
				a.ID, a.Tool, argsSuffix(a.Arguments), a.ID)
		default:
			fmt.Fprintf(c.stdout, "\n%s: %s\n  see:    longhaul action %s   (arguments, evidence and how to decide)\n",
				a.ID, truncate(actionWhat(&a), 70), a.ID)
		}
	}
	return nil
}

func printActionTable(w io.Writer, indent string, actions []lt.Action) error {
	t := newTable(w, indent+"ID", "TYPE", "STATUS", "BY", "TOOL", "CREATED", "SUMMARY")
	for _, a := range actions {
		by := "-"
		if a.ResolvedBy != nil {
			by = actorLabel(a.ResolvedBy)
		}
		t.row(indent+a.ID, string(a.Type), string(a.Status), by, orDash(a.Tool), fmtTime(a.CreatedAt), truncate(actionWhat(&a), 70))
	}
	return t.flush()
}

type respondOpts struct {
	client *clientOpts
	output string
	errMsg string
	json   bool
}

func (c *cli) respondCmd() *cobra.Command {
	o := &respondOpts{}
	cmd := &cobra.Command{
		Use:   "respond ACTION_ID (--output JSON | --error MSG)",
		Short: "Answer an application function call with its output or an error",
		Long: `Answer a function_call action: the output of the application's function (any
JSON value), or an error message. The model sees it as the tool's result and
the session goes on. Repeating the same answer is harmless; a different
answer to an answered call is refused.

The action id names its session. The older form 'respond SESSION_ID
ACTION_ID' still works, with a note that it is deprecated.

Other action types have their own commands: 'longhaul approve', 'reject' and
'stop' for approvals, 'longhaul answer' for questions ('longhaul inbox' lists
them all).`,
		Example: `  longhaul respond act_7Q2 --output '{"name": "ACME Corp", "plan": "enterprise"}'
  longhaul respond act_7Q2 --error "customer not found"`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.respond(cmd, o, c.actionArgs("respond", args, 1))
		},
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.output, "output", "", "the function's output, as JSON")
	cmd.Flags().StringVar(&o.errMsg, "error", "", "the function's error message")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the resolved action as JSON")
	return cmd
}

// actionRef names an action on the command line: by its id, or (the
// deprecated form) by its session's id and its own.
type actionRef struct {
	sessionID string // "": look the action up
	actionID  string
	rest      []string // the arguments after the action id
}

// actionArgs reads the ids at the head of args: the action id alone, or
// the session's id before it when args has more than rest arguments after
// it (the form respond and decide had first, noted as deprecated).
func (c *cli) actionArgs(command string, args []string, ids int) actionRef {
	if len(args) > ids {
		fmt.Fprintf(c.stderr, "Note: 'longhaul %s SESSION_ID ACTION_ID' is deprecated: the action id names its session, so give only it ('longhaul %s ACTION_ID').\n", command, command)
		return actionRef{sessionID: args[0], actionID: args[1], rest: args[2:]}
	}
	return actionRef{actionID: args[0], rest: args[1:]}
}

func (c *cli) respond(cmd *cobra.Command, o *respondOpts, ref actionRef) error {
	hasOutput, hasError := cmd.Flags().Changed("output"), cmd.Flags().Changed("error")
	if hasOutput == hasError {
		return usagef("give exactly one of --output JSON and --error MSG")
	}
	d := &lt.Decision{}
	if hasOutput {
		raw, err := jsonFlag("output", o.output)
		if err != nil {
			return err
		}
		d.Output = raw
	} else {
		if o.errMsg == "" {
			return usagef("--error: the message is empty")
		}
		d.Error = o.errMsg
	}
	return c.decideAction(cmd, o.client, o.json, "respond", lt.ActionFunctionCall, ref, d)
}

type decideOpts struct {
	client *clientOpts
	output string
	reason string
	json   bool
}

var inDoubtDecisions = []string{lt.DecisionHappened, lt.DecisionDidNotHappen, lt.DecisionSkip}

func (c *cli) decideCmd() *cobra.Command {
	o := &decideOpts{}
	cmd := &cobra.Command{
		Use:   "decide ACTION_ID happened|did_not_happen|skip",
		Short: "Decide an in-doubt effect: did the call happen?",
		Long: `Settle an in_doubt action: an irreversible tool call whose outcome is unknown
because its worker stopped while it ran. Longhaul never re-runs it blindly.

  happened        it ran; --output gives its result to the model
  did_not_happen  it did not run; it runs again
  skip            unknown, and it must not run again; the model is told

The action id names its session. The older form 'decide SESSION_ID
ACTION_ID DECISION' still works, with a note that it is deprecated.

Approvals, questions and budget actions are decided with 'longhaul approve',
'reject', 'stop' and 'answer' ('longhaul inbox' lists what is pending).`,
		Example: `  longhaul decide act_9K1 happened --output '{"message_id": "m-42"}'
  longhaul decide act_9K1 did_not_happen
  longhaul decide act_9K1 skip --reason "checked the outbox: unclear"`,
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 1 {
				return inDoubtDecisions, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		Args: usageArgs(cobra.RangeArgs(2, 3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.decide(cmd, o, c.actionArgs("decide", args, 2))
		},
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.output, "output", "", "with happened: the call's result, as JSON")
	cmd.Flags().StringVar(&o.reason, "reason", "", "with skip: why, told to the model")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the resolved action as JSON")
	return cmd
}

func (c *cli) decide(cmd *cobra.Command, o *decideOpts, ref actionRef) error {
	decision := ref.rest[0]
	if !slices.Contains(inDoubtDecisions, decision) {
		return usagef("decision %q: want happened, did_not_happen or skip", decision)
	}
	d := &lt.Decision{Decision: decision}
	if cmd.Flags().Changed("output") {
		if decision != lt.DecisionHappened {
			return usagef("--output goes only with happened")
		}
		raw, err := jsonFlag("output", o.output)
		if err != nil {
			return err
		}
		d.Output = raw
	}
	if o.reason != "" {
		if decision != lt.DecisionSkip {
			return usagef("--reason goes only with skip")
		}
		d.Reason = o.reason
	}
	return c.decideAction(cmd, o.client, o.json, "decide", lt.ActionInDoubt, ref, d)
}

// decideAction posts d to the action ref names. Given the action id alone,
// it reads the action first (GET /v1/actions/{id}) to learn its session,
// and refuses an action of another type than want with the command that
// settles it.
func (c *cli) decideAction(cmd *cobra.Command, co *clientOpts, asJSON bool, command string, want lt.ActionType, ref actionRef, d *lt.Decision) error {
	cl, err := c.newClient(cmd, co)
	if err != nil {
		return err
	}
	sessionID := ref.sessionID
	if sessionID == "" {
		a, err := cl.GetAction(cmd.Context(), ref.actionID)
		if err != nil {
			return err
		}
		if a.Type != want {
			return wrongType(command, a)
		}
		sessionID = a.SessionID
	}
	a, err := cl.DecideAction(cmd.Context(), sessionID, ref.actionID, d)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(c.stdout, a)
	}
	_, err = fmt.Fprintf(c.stdout, "Action %s (%s %s) is %s: %s.\n", a.ID, a.Type, orDash(a.Tool), a.Status, decisionText(d))
	return err
}

// jsonFlag checks that a flag holds one JSON value and returns it compact.
func jsonFlag(name, value string) (json.RawMessage, error) {
	if !json.Valid([]byte(value)) {
		var v any
		err := json.Unmarshal([]byte(value), &v)
		return nil, usagef("--%s is not valid JSON: %v (quote strings: '\"text\"')", name, err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(value)); err != nil {
		return nil, usagef("--%s: %v", name, err)
	}
	return json.RawMessage(b.Bytes()), nil
}
