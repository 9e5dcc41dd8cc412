package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type runOpts struct {
	client      *clientOpts
	agent       string
	agentSpec   string
	goal        string
	project     string
	constraints []string
	acceptance  []string
	budgetUSD   float64
	budget      *budgetFlags
	detach      bool
	json        bool
}

func (c *cli) runCmd() *cobra.Command {
	o := &runOpts{}
	cmd := &cobra.Command{
		Use:   "run (--agent NAME | --agent-spec FILE) [flags] INPUT",
		Short: "Start a session and follow its first turn to the end",
		Long: `Start a session with a configured agent (--agent) or an agent spec from a JSON
or YAML file (--agent-spec, the "agent_spec" of API.md), then print its
events as they happen until the turn ends, and the turn's output.

A required action (an application function to answer, an effect in doubt) is
printed with the command that settles it; run keeps following meanwhile.
Interrupting run stops following only: the session goes on in the server.

The exit code is 0 when the turn completed, 1 when it failed or was cancelled.`,
		Example: `  longhaul run --agent researcher "Write a competitor brief for ACME"
  longhaul run --agent-spec spec.json --goal "A one-page brief" \
      --constraint "Do not contact anyone" --acceptance "under 600 words" \
      --max-cost 5 --soft-cost 2 --max-tokens 2000000 --max-wall 72h \
      "Write a competitor brief for ACME"
  id=$(longhaul run --agent researcher --detach "Summarise the logs")`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.run(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.agent, "agent", "", "name of a configured agent")
	fs.StringVar(&o.agentSpec, "agent-spec", "", "file (JSON or YAML) holding an inline agent spec")
	fs.StringVar(&o.goal, "goal", "", "the goal, pinned in every model context")
	fs.StringVar(&o.project, "project", "", "the session's project (an admin key only; default: the key's project, or default)")
	fs.StringArrayVar(&o.constraints, "constraint", nil, "a constraint the agent must respect (repeatable)")
	fs.StringArrayVar(&o.acceptance, "acceptance", nil, "an acceptance criterion for the result (repeatable)")
	fs.Float64Var(&o.budgetUSD, "budget-usd", 0, "hard limit on the session's model cost, in USD (the same as --max-cost)")
	o.budget = registerBudgetFlags(cmd, "")
	fs.BoolVar(&o.detach, "detach", false, "print the session id and return without following")
	fs.BoolVar(&o.json, "json", false, "print events as JSON lines (with --detach: the session as JSON)")
	return cmd
}

// sessionBudget is the session's budget from the limit flags (nil: none
// given, the agent's own). A limit of 0 would be no limit at all, so it
// is refused: leave the flag out instead.
func (o *runOpts) sessionBudget(cmd *cobra.Command) (*lt.Budget, error) {
	patch, err := o.budget.patch(cmd)
	if err != nil {
		return nil, err
	}
	if cmd.Flags().Changed("budget-usd") {
		if !(o.budgetUSD > 0) {
			return nil, usagef("--budget-usd %g: must be above 0", o.budgetUSD)
		}
		if cmd.Flags().Changed("max-cost") {
			return nil, usagef("--budget-usd and --max-cost are the same limit: give one")
		}
		if patch == nil {
			patch = &budgetPatch{}
		}
		patch.p.MaxCostUSD = &o.budgetUSD
	}
	if patch == nil {
		return nil, nil
	}
	if f := patch.zeroFlag(); f != "" {
		return nil, usagef("%s 0: must be above 0 (leave the flag out for no limit)", f)
	}
	b := patch.p.Apply(lt.Budget{})
	return &b, nil
}

func (c *cli) run(cmd *cobra.Command, o *runOpts, input string) error {
	if (o.agent == "") == (o.agentSpec == "") {
		return usagef("give exactly one of --agent NAME and --agent-spec FILE")
	}
	if strings.TrimSpace(input) == "" {
		return usagef("INPUT is empty: say what the agent should do")
	}
	req := &lt.CreateSessionRequest{
		Agent:              o.agent,
		Input:              input,
		Goal:               o.goal,
		Project:            o.project,
		Constraints:        o.constraints,
		AcceptanceCriteria: o.acceptance,
	}
	budget, err := o.sessionBudget(cmd)
	if err != nil {
		return err
	}
	req.Budget = budget
	if o.agentSpec != "" {
		var spec lt.AgentSpec
		if _, err := decodeFile(o.agentSpec, &spec); err != nil {
			return err
		}
		req.AgentSpec = &spec
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	s, err := cl.CreateSession(ctx, req)
	if err != nil {
		if o.agent != "" {
			return suggestAgent(ctx, cl, o.project, o.agent, err)
		}
		return err
	}
	if o.detach {
		return c.printCreated(s, s.ID, o.json)
	}

	return c.followAndReport(ctx, cl, s.ID, s.CurrentTurnID, o.json, func(notes io.Writer) {
		fmt.Fprintf(notes, "session %s started (%s); following turn %s\n", s.ID, agentLabel(s.Agent), s.CurrentTurnID)
	})
}

// printCreated is what a --detach command prints of what it created: its
// id, or with asJSON the whole object.
func (c *cli) printCreated(obj any, id string, asJSON bool) error {
	if asJSON {
		return writeJSON(c.stdout, obj)
	}
	_, err := fmt.Fprintln(c.stdout, id)
	return err
}

// followAndReport prints the events of turnID of the session as they
// happen (only that turn's: the stream starts at the session's first
// event), with the command that settles each required action, then the
// turn's output and the session's state; started writes the first note.
// With asJSON, stdout carries only the events, as JSON lines, and the
// notes go to stderr. A turn that did not complete exits 1.
func (c *cli) followAndReport(ctx context.Context, cl *client.Client, sessionID, turnID string, asJSON bool, started func(notes io.Writer)) error {
	notes := c.stdout
	if asJSON {
		notes = c.stderr
	}
	started(notes)
	p := &eventPrinter{w: c.stdout, json: asJSON}
	end, err := followTurn(ctx, cl, sessionID, turnID, 0, func(ev lt.Event) error {
		if ev.TurnID != "" && ev.TurnID != turnID {
			return nil // an earlier turn's
		}
		if asJSON {
			return p.print(ev)
		}
		if !interesting(ev.Type) {
			return nil
		}
		if err := p.print(ev); err != nil {
			return err
		}
		printActionHint(c.stdout, sessionID, ev)
		printPauseHint(c.stdout, sessionID, ev)
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(c.stderr, "stopped following; session %s goes on in the server: longhaul events %s --follow\n", sessionID, sessionID)
			return &exitError{code: exitInterrupted}
		}
		return err
	}
	return c.reportTurn(ctx, cl, notes, sessionID, end, !asJSON)
}

// reportTurn prints how a followed turn ended and the session's totals, and
// returns an error (exit code 1) unless the turn completed.
func (c *cli) reportTurn(ctx context.Context, cl *client.Client, w io.Writer, sessionID string, end *turnEnd, printOutput bool) error {
	if end.status == lt.TurnCompleted && printOutput {
		fmt.Fprintf(w, "\nOutput:\n%s\n\n", strings.TrimRight(end.output, "\n"))
	}
	if s, err := cl.GetSession(ctx, sessionID); err == nil {
		fmt.Fprintf(w, "session %s is %s · %s\n", s.ID, s.Status, usageLine(s.Usage))
	}
	switch end.status {
	case lt.TurnCompleted:
		return nil
	case lt.TurnFailed:
		return &exitError{code: exitFailure, msg: fmt.Sprintf("turn %s failed (%s): %s", end.turnID, end.stopReason, end.err)}
	default:
		msg := fmt.Sprintf("turn %s was cancelled", end.turnID)
		if end.err != "" {
			msg += ": " + end.err
		}
		return &exitError{code: exitFailure, msg: msg}
	}
}

// turnEnd is how a turn ended.
type turnEnd struct {
	turnID     string
	status     lt.TurnStatus
	output     string
	stopReason string
	err        string // the failure, or the cancel reason
}

// followTurn streams the session's events after seq after, handing each to
// onEvent, until turn turnID ends. The stream resumes by itself across
// disconnects and server restarts.
func followTurn(ctx context.Context, cl *client.Client, sessionID, turnID string, after int64, onEvent func(lt.Event) error) (*turnEnd, error) {
	for ev, err := range cl.StreamEvents(ctx, sessionID, after) {
		if err != nil {
			return nil, err
		}
		if err := onEvent(ev); err != nil {
			return nil, err
		}
		if end := turnEnded(ev); end != nil && end.turnID == turnID {
			return end, nil
		}
	}
	// StreamEvents ends only after yielding an error, or when the loop
	// breaks; neither reaches here.
	return nil, errors.New("event stream ended unexpectedly")
}

// turnEnded returns the end of a turn that ev reports, or nil.
func turnEnded(ev lt.Event) *turnEnd {
	switch ev.Type {
	case lt.EventTurnCompleted:
		var d lt.TurnCompletedData
		if decode(ev, &d) {
			return &turnEnd{turnID: firstNonEmpty(d.TurnID, ev.TurnID), status: lt.TurnCompleted, output: d.Output}
		}
	case lt.EventTurnFailed:
		var d lt.TurnFailedData
		if decode(ev, &d) {
			return &turnEnd{turnID: firstNonEmpty(d.TurnID, ev.TurnID), status: lt.TurnFailed, stopReason: d.StopReason, err: d.Error}
		}
	case lt.EventTurnCancelled:
		var d lt.TurnCancelledData
		if decode(ev, &d) {
			return &turnEnd{turnID: firstNonEmpty(d.TurnID, ev.TurnID), status: lt.TurnCancelled, err: d.Reason}
		}
	}
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// interesting reports whether `run` prints events of type t: everything but
// the bookkeeping that the following event says better.
func interesting(t string) bool {
	switch t {
	case lt.EventSessionCreated, lt.EventTurnCreated, lt.EventTurnStarted, lt.EventModelRequested,
		lt.EventModelDelta, lt.EventToolRequested, lt.EventToolStarted:
		return false
	}
	return true
}

// printActionHint follows an action.required line with the command that
// settles the action.
func printActionHint(w io.Writer, sessionID string, ev lt.Event) {
	if ev.Type != lt.EventActionRequired {
		return
	}
	var d lt.ActionRequiredData
	if !decode(ev, &d) {
		return
	}
	a := d.Action
	switch a.Type {
	case lt.ActionFunctionCall:
		fmt.Fprintf(w, "        ↳ %s%s is for the application to answer:\n", a.Tool, argsSuffix(a.Arguments))
		fmt.Fprintf(w, "          longhaul respond %s --output 'JSON'   (or --error MSG)\n", a.ID)
	case lt.ActionInDoubt:
		fmt.Fprintf(w, "        ↳ did %s run? decide with:\n", a.Tool)
		fmt.Fprintf(w, "          longhaul decide %s happened|did_not_happen|skip\n", a.ID)
	case lt.ActionApproval:
		fmt.Fprintf(w, "        ↳ %s%s needs approval; see it with 'longhaul action %s', then:\n", a.Tool, argsSuffix(a.Arguments), a.ID)
		fmt.Fprintf(w, "          longhaul approve %s   (or reject %s --reason TEXT, or stop %s)\n", a.ID, a.ID, a.ID)
	case lt.ActionInput:
		fmt.Fprintf(w, "        ↳ the agent asks: %s\n", truncate(a.Question, 100))
		fmt.Fprintf(w, "          longhaul answer %s TEXT\n", a.ID)
	case lt.ActionBrowserPermission:
		fmt.Fprintf(w, "        ↳ the browser asks to visit %s: %s\n", a.Origin, truncate(a.Purpose, 100))
		fmt.Fprintf(w, "          longhaul allow %s --scope once|session   (or deny %s --reason TEXT)\n", a.ID, a.ID)
	default:
		fmt.Fprintf(w, "        ↳ see: longhaul action %s\n", a.ID)
	}
}

func argsSuffix(args []byte) string {
	if len(args) == 0 {
		return ""
	}
	return " " + truncate(string(args), 80)
}

func agentLabel(a lt.AgentRef) string {
	return fmt.Sprintf("agent %s v%d", a.Name, a.Version)
}

func usageLine(u lt.Usage) string {
	return fmt.Sprintf("%s tokens · %s · %d model calls · %d tool calls",
		fmtTokens(u.InputTokens+u.OutputTokens, u.Estimated), fmtCost(u.CostUSD), u.ModelCalls, u.ToolCalls)
}
