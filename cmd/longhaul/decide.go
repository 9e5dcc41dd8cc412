package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The commands here decide an action by its id alone: they read it with
// GET /v1/actions/{id} (which names its session and type), check locally
// what can be checked, and post the decision to the session's action.

// fetchAction builds the client and reads the action.
func (c *cli) fetchAction(cmd *cobra.Command, co *clientOpts, id string) (*client.Client, *lt.Action, error) {
	cl, err := c.newClient(cmd, co)
	if err != nil {
		return nil, nil, err
	}
	a, err := cl.GetAction(cmd.Context(), id)
	if err != nil {
		return nil, nil, err
	}
	return cl, a, nil
}

// wrongType explains which command settles an action of another type.
func wrongType(command string, a *lt.Action) error {
	return usagef("%s: action %s is of type %s; decide it with: %s", command, a.ID, a.Type, decideCommands(a)[0])
}

// sendDecision posts d and reports the resolved action.
func (c *cli) sendDecision(cmd *cobra.Command, cl *client.Client, a *lt.Action, d *lt.Decision, asJSON bool) error {
	got, err := cl.DecideAction(cmd.Context(), a.SessionID, a.ID, d)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(c.stdout, got)
	}
	what := decisionText(d)
	if len(d.Arguments) > 0 {
		what += " with edited arguments " + truncate(string(d.Arguments), 80)
	}
	if d.Budget != nil {
		what += " with budget " + orDash(budgetText(*d.Budget))
	}
	_, err = fmt.Fprintf(c.stdout, "Action %s (%s %s) of session %s is %s: %s.\n",
		got.ID, got.Type, orDash(got.Tool), got.SessionID, got.Status, what)
	return err
}

type approveOpts struct {
	client *clientOpts
	edit   string
	budget *budgetFlags
	json   bool
}

func (c *cli) approveCmd() *cobra.Command {
	o := &approveOpts{}
	cmd := &cobra.Command{
		Use:   "approve ACTION_ID [--edit JSON] [budget flags]",
		Short: "Approve a tool call (possibly with edited arguments) or spending past a soft budget limit",
		Long: `Approve a pending action ('longhaul inbox' lists them).

An approval action: the tool call runs with the arguments 'longhaul action'
shows. The approval is bound to them: it carries the arguments_sha256 this
command read, so if what waits for approval is not what was shown, the server
refuses (409) instead of approving something else. With --edit, the call runs
with the arguments given instead (a JSON object, validated against the tool's
schema); the approval is then bound to the edited arguments.

A budget action: the session goes on past the soft limit it reached. The limit
flags (the same as 'longhaul budget') set new limits at the same time; the
others keep their current values.`,
		Example: `  longhaul approve act_4f2a
  longhaul approve act_4f2a --edit '{"to": "lead@example.com", "subject": "ACME brief"}'
  longhaul approve act_9c1e --soft-cost 8 --max-cost 15`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.approve(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.edit, "edit", "", "approval: run the call with these arguments instead (a JSON object)")
	o.budget = registerBudgetFlags(cmd, "budget action: new ")
	fs.BoolVar(&o.json, "json", false, "print the resolved action as JSON")
	return cmd
}

func (c *cli) approve(cmd *cobra.Command, o *approveOpts, id string) error {
	patch, err := o.budget.patch(cmd)
	if err != nil {
		return err
	}
	var edited json.RawMessage
	if cmd.Flags().Changed("edit") {
		if edited, err = editFlag(o.edit); err != nil {
			return err
		}
	}
	cl, a, err := c.fetchAction(cmd, o.client, id)
	if err != nil {
		return err
	}
	d := &lt.Decision{Decision: lt.DecisionApprove}
	switch a.Type {
	case lt.ActionApproval:
		if patch != nil {
			return usagef("approve: %s goes only with budget actions; action %s is an approval", patch.flags[0], a.ID)
		}
		d.ArgumentsSHA256 = a.ArgumentsSHA256
		d.Arguments = edited
	case lt.ActionBudget:
		if edited != nil {
			return usagef("approve: --edit goes only with approval actions; action %s is a budget action", a.ID)
		}
		if patch != nil {
			// A decision's budget replaces only its non-zero limits, so a
			// limit cannot be removed here.
			if f := patch.zeroFlag(); f != "" {
				return usagef("approve: %s 0 would remove a limit, which a budget approval cannot do; remove it with 'longhaul budget %s %s 0'", f, a.SessionID, f)
			}
			s, err := cl.GetSession(cmd.Context(), a.SessionID)
			if err != nil {
				return err
			}
			merged := patch.p.Apply(s.Budget)
			d.Budget = &merged
		}
	default:
		return wrongType("approve", a)
	}
	return c.sendDecision(cmd, cl, a, d, o.json)
}

// editFlag parses --edit: edited arguments must be one JSON object.
func editFlag(value string) (json.RawMessage, error) {
	v := strings.TrimSpace(value)
	switch {
	case v == "":
		return nil, usagef("--edit is empty: give the tool's arguments as a JSON object, like '{\"to\": \"a@example.com\"}'")
	case !json.Valid([]byte(v)):
		var x any
		err := json.Unmarshal([]byte(v), &x)
		return nil, usagef("--edit is not valid JSON (%v): give the tool's arguments as a JSON object", err)
	case v[0] != '{':
		return nil, usagef("--edit must be a JSON object of the tool's arguments, got %s", jsonKindOf(v))
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(v)); err != nil {
		return nil, usagef("--edit: %v", err)
	}
	return json.RawMessage(b.Bytes()), nil
}

// jsonKindOf names the kind of the valid JSON value v.
func jsonKindOf(v string) string {
	switch v[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

type rejectOpts struct {
	client *clientOpts
	reason string
	json   bool
}

func (c *cli) rejectCmd() *cobra.Command {
	o := &rejectOpts{}
	cmd := &cobra.Command{
		Use:   "reject ACTION_ID --reason TEXT",
		Short: "Reject a tool call awaiting approval; the reason goes back to the agent",
		Long: `Reject a pending approval: the tool call does not run, and the model gets
"rejected by a person: <reason>" as the call's result, so it can try another
way. The turn goes on. To end the turn instead, use 'longhaul stop'.`,
		Example: `  longhaul reject act_4f2a --reason "do not email the CEO; send it to the sales lead"`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE:    func(cmd *cobra.Command, args []string) error { return c.reject(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.reason, "reason", "", "why, told to the agent (required)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the resolved action as JSON")
	return cmd
}

func (c *cli) reject(cmd *cobra.Command, o *rejectOpts, id string) error {
	if strings.TrimSpace(o.reason) == "" {
		return usagef("reject: --reason is required: it tells the agent why, so it can try another way")
	}
	cl, a, err := c.fetchAction(cmd, o.client, id)
	if err != nil {
		return err
	}
	if a.Type != lt.ActionApproval {
		return wrongType("reject", a)
	}
	return c.sendDecision(cmd, cl, a, &lt.Decision{Decision: lt.DecisionReject, Reason: o.reason}, o.json)
}

type stopOpts struct {
	client *clientOpts
	reason string
	json   bool
}

func (c *cli) stopCmd() *cobra.Command {
	o := &stopOpts{}
	cmd := &cobra.Command{
		Use:   "stop ACTION_ID [--reason TEXT]",
		Short: "Decide an approval, budget, environment_connection or monitor action by ending the turn",
		Long: `Stop at a pending approval, budget, environment_connection or monitor action:
the tool call does not run (or no more is spent, or the session stops waiting
for a runner, or for a person's look at what the trajectory monitor found),
and the turn ends (stop_reason "stopped" for an approval, an
environment_connection or a monitor action, "budget_exceeded" for a budget).
The sub-agents the turn spawned are asked to stop (those a monitor action held
stay paused until they are). The session can take a new turn afterwards.
To stop a session without an action, use 'longhaul cancel SESSION'.`,
		Example: `  longhaul stop act_4f2a --reason "wrong customer"
  longhaul stop act_9c1e`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.stop(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.reason, "reason", "", "why, recorded in the journal")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the resolved action as JSON")
	return cmd
}

func (c *cli) stop(cmd *cobra.Command, o *stopOpts, id string) error {
	cl, a, err := c.fetchAction(cmd, o.client, id)
	if err != nil {
		return err
	}
	if a.Type != lt.ActionApproval && a.Type != lt.ActionBudget && a.Type != lt.ActionEnvironmentConnection && a.Type != lt.ActionMonitor {
		return usagef("stop: action %s is of type %s, which stop does not decide; decide it with: %s (or end the turn with 'longhaul cancel %s')",
			a.ID, a.Type, decideCommands(a)[0], a.SessionID)
	}
	return c.sendDecision(cmd, cl, a, &lt.Decision{Decision: lt.DecisionStop, Reason: o.reason}, o.json)
}

type continueOpts struct {
	client *clientOpts
	json   bool
}

func (c *cli) continueCmd() *cobra.Command {
	o := &continueOpts{}
	cmd := &cobra.Command{
		Use:   "continue ACTION_ID",
		Short: "Let a session go on after a finding of the trajectory monitor (a monitor action)",
		Long: `Decide a monitor action: a detector of the trajectory monitor whose action is
ask found something, or the model monitor answered pause (the finding, with
the journal events that show it, or the review's reasons, are in 'longhaul
action ACTION_ID'), and the session waits before its next call; its running
sub-agents are paused with it meanwhile.
continue lets it go on, with them; 'longhaul stop ACTION_ID' ends the turn
instead, and the sub-agents it spawned are asked to stop.`,
		Example: `  longhaul continue act_5e0c`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE:    func(cmd *cobra.Command, args []string) error { return c.continueAction(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the resolved action as JSON")
	return cmd
}

func (c *cli) continueAction(cmd *cobra.Command, o *continueOpts, id string) error {
	cl, a, err := c.fetchAction(cmd, o.client, id)
	if err != nil {
		return err
	}
	if a.Type != lt.ActionMonitor {
		return wrongType("continue", a)
	}
	return c.sendDecision(cmd, cl, a, &lt.Decision{Decision: lt.DecisionContinue}, o.json)
}

func (c *cli) unpinCmd() *cobra.Command {
	o := &stopOpts{}
	cmd := &cobra.Command{
		Use:   "unpin ACTION_ID [--reason TEXT]",
		Short: "Let a session waiting for its runner go on on any matching runner (an environment_connection action)",
		Long: `Decide an environment_connection action of a session pinned to a runner: its
environment lives on that runner, by the runner's name and the key it connected
with, and the session waits for it. When the name is now held by another key
(the action's reason says so: the runner's key was revoked and replaced, or
another key took the name), only a person can say the new holder is the same
runner: unpin drops the pin, and the session opens its environment on any
runner that matches its agent's environment.runner, in the workspace that
runner holds, or restored from the last checkpoint if it lacks it.`,
		Example: `  longhaul unpin act_7d21 --reason "box1's key was replaced"`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE:    func(cmd *cobra.Command, args []string) error { return c.unpin(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.reason, "reason", "", "why, recorded in the journal")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the resolved action as JSON")
	return cmd
}

func (c *cli) unpin(cmd *cobra.Command, o *stopOpts, id string) error {
	cl, a, err := c.fetchAction(cmd, o.client, id)
	if err != nil {
		return err
	}
	if a.Type != lt.ActionEnvironmentConnection {
		return wrongType("unpin", a)
	}
	return c.sendDecision(cmd, cl, a, &lt.Decision{Decision: lt.DecisionUnpin, Reason: o.reason}, o.json)
}

type answerOpts struct {
	client *clientOpts
	json   bool
}

func (c *cli) answerCmd() *cobra.Command {
	o := &answerOpts{}
	cmd := &cobra.Command{
		Use:   "answer ACTION_ID TEXT",
		Short: "Answer the agent's question (an input action)",
		Long: `Answer an input action: the agent asked a question (the ask_human tool), and
the answer is the tool's result. When the question offers choices, the answer
must be one of them, exactly as 'longhaul action' lists them.`,
		Example: `  longhaul answer act_7d3b "Use the Q3 numbers"
  longhaul answer act_7d3b yes`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.answer(cmd, o, args[0], args[1]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the resolved action as JSON")
	return cmd
}

func (c *cli) answer(cmd *cobra.Command, o *answerOpts, id, text string) error {
	if strings.TrimSpace(text) == "" {
		return usagef("answer: the answer is empty")
	}
	cl, a, err := c.fetchAction(cmd, o.client, id)
	if err != nil {
		return err
	}
	if a.Type != lt.ActionInput {
		return wrongType("answer", a)
	}
	if len(a.Choices) > 0 && !slices.Contains(a.Choices, text) {
		quoted := make([]string, len(a.Choices))
		for i, ch := range a.Choices {
			quoted[i] = fmt.Sprintf("%q", ch)
		}
		return usagef("answer: %q is not one of the choices the agent offered: %s", text, strings.Join(quoted, ", "))
	}
	return c.sendDecision(cmd, cl, a, &lt.Decision{Answer: text}, o.json)
}
