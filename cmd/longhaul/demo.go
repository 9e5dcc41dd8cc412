package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type demoOpts struct {
	server  string
	apiKey  string
	dataDir string
	pace    time.Duration
	ask     bool
}

func (c *cli) demoCmd() *cobra.Command {
	o := &demoOpts{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run an offline demo session with the scripted model",
		Long: `Run a demo session that needs no model provider and no network: a scripted
agent writes notes and a small script in its workspace, runs shell commands,
calls an application function (lookup_customer, answered by this command
through the API, as an application would), asks for approval before running
a script it wrote (a policy says so; the demo approves it, or with --ask
leaves the decision to you: 'longhaul inbox', then 'longhaul approve' or
'longhaul reject'), and finishes by delivering report.md as its artifact.
One line per step shows the tools, tokens, cost and elapsed time.

Without --server (or LONGHAUL_SERVER) the demo starts its own server in this
process, with its data in --data or in a new temporary directory that is kept
so you can inspect the session afterwards.`,
		Example: `  longhaul demo
  longhaul demo --server http://127.0.0.1:8080
  longhaul demo --data ./demo-data --pace 0
  longhaul demo --server http://127.0.0.1:8080 --ask`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.demo(cmd, o) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.server, "server", "", "URL of a running server (env LONGHAUL_SERVER; default: start one in this process)")
	fs.StringVar(&o.apiKey, "api-key", "", "API key for --server (env LONGHAUL_API_KEY)")
	fs.StringVar(&o.dataDir, "data", "", "data directory of the embedded server (default: a new temporary directory)")
	fs.DurationVar(&o.pace, "pace", 400*time.Millisecond, "how long the scripted model thinks per step (0: no pause)")
	fs.BoolVar(&o.ask, "ask", false, "leave the approval to you (the demo waits for 'longhaul approve' or 'longhaul reject')")
	return cmd
}

func (c *cli) demo(cmd *cobra.Command, o *demoOpts) (err error) {
	ctx := cmd.Context()
	if o.pace < 0 || o.pace > time.Minute {
		return usagef("--pace %s: want 0 to 1m", o.pace)
	}
	serverURL := c.flagOrEnv(cmd, "server", o.server, "LONGHAUL_SERVER")
	apiKey := c.flagOrEnv(cmd, "api-key", o.apiKey, "LONGHAUL_API_KEY")
	out := c.stdout

	var embedded *node
	if serverURL == "" {
		if apiKey != "" && cmd.Flags().Changed("api-key") {
			return usagef("--api-key goes with --server; the embedded server needs none")
		}
		dir := o.dataDir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "longhaul-demo-"); err != nil {
				return fmt.Errorf("create demo data directory: %w", err)
			}
		}
		log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		embedded, err = startNode(ctx, nodeConfig{addr: "127.0.0.1:0", dataDir: dir, logger: log})
		if err != nil {
			return err
		}
		defer func() {
			if stopErr := embedded.stop(ctx); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}()
		serverURL = embedded.url
		fmt.Fprintf(out, "Started an embedded server on %s with its data in %s\n", serverURL, embedded.dataDir)
	} else if cmd.Flags().Changed("data") {
		return usagef("--data is for the embedded server; it cannot go with --server")
	}

	cl, err := client.New(serverURL, &client.Config{APIKey: apiKey})
	if err != nil {
		return usagef("--server %q: %v", serverURL, err)
	}
	req, err := demoRequest(o.pace)
	if err != nil {
		return err
	}
	s, err := cl.CreateSession(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Session %s: %q\n\n", s.ID, req.Input)

	steps := &stepTracker{w: out}
	end, err := followTurn(ctx, cl, s.ID, s.CurrentTurnID, 0, func(ev lt.Event) error {
		if err := steps.observe(ev); err != nil {
			return err
		}
		if ev.Type != lt.EventActionRequired {
			return nil
		}
		var d lt.ActionRequiredData
		if !decode(ev, &d) {
			return fmt.Errorf("event %d: action.required data is not an action", ev.Seq)
		}
		if o.ask && d.Action.Type == lt.ActionApproval {
			// Everything a person needs to decide, as the inbox shows it:
			// the script the command runs, what it can reach, the policy.
			fmt.Fprintln(out)
			if err := printAction(out, &d.Action, time.Now()); err != nil {
				return err
			}
			fmt.Fprint(out, "\nWaiting for your decision: run one of the commands above in another terminal (longhaul inbox lists what waits).\n\n")
			steps.annotate(d.Action.Step, d.Action.Tool, "decided by you")
			return nil
		}
		note, err := answerDemoAction(ctx, cl, s.ID, &d.Action)
		if err != nil {
			return err
		}
		steps.annotate(d.Action.Step, d.Action.Tool, note)
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(c.stderr, "demo interrupted; session %s is left resumable\n", s.ID)
			return &exitError{code: exitInterrupted}
		}
		return err
	}
	if err := steps.flush(); err != nil {
		return err
	}
	return c.demoSummary(ctx, cl, s.ID, end, embedded)
}

// demoSummary prints the outcome and how to inspect the session.
func (c *cli) demoSummary(ctx context.Context, cl *client.Client, id string, end *turnEnd, embedded *node) error {
	out := c.stdout
	s, err := cl.GetSession(ctx, id)
	if err != nil {
		return err
	}
	arts, err := cl.ListArtifacts(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	t := newTable(out, "Session:", s.ID)
	status := string(s.Status)
	if s.StopReason != nil {
		status += " (" + *s.StopReason + ")"
	}
	t.row("Status:", status)
	var artifactID string
	for _, a := range arts.Data {
		if a.Final {
			artifactID = a.ID
			t.row("Artifact:", fmt.Sprintf("%s %s v%d (%s)", a.ID, a.Name, a.Version, fmtBytes(a.Size)))
		}
	}
	t.row("Usage:", usageLine(s.Usage))
	if err := t.flush(); err != nil {
		return err
	}
	if end.status == lt.TurnCompleted {
		fmt.Fprintf(out, "\nSummary: %s\n", end.output)
	}

	fmt.Fprintln(out, "\nInspect it:")
	if embedded != nil {
		fmt.Fprintf(out, "  longhaul serve --data %s     (the demo's server stops with it)\n", embedded.dataDir)
		fmt.Fprintln(out, "  then, in another terminal:")
	}
	fmt.Fprintf(out, "  longhaul show %s\n", s.ID)
	fmt.Fprintf(out, "  longhaul events %s\n", s.ID)
	fmt.Fprintf(out, "  longhaul effects %s\n", s.ID)
	if artifactID != "" {
		fmt.Fprintf(out, "  longhaul artifact get %s\n", artifactID)
	}
	if s.Status != lt.SessionIdle {
		return &exitError{code: exitFailure, msg: fmt.Sprintf("the demo session ended %s, not idle", s.Status)}
	}
	return nil
}

// demoCustomers is the application data behind the lookup_customer function.
var demoCustomers = map[string]map[string]any{
	"cus_1042": {
		"id": "cus_1042", "name": "ACME Corp", "plan": "enterprise", "seats": 240,
		"renewal": "2026-03-31", "open_tickets": 3, "health": "at risk: seat usage fell 18% this quarter",
	},
}

// answerDemoAction plays the application and the person supervising it: it
// answers lookup_customer calls and approves the script the agent asks to
// run (a person would use 'longhaul inbox' and 'longhaul approve'), through
// the API, and returns a note for the step's line.
func answerDemoAction(ctx context.Context, cl *client.Client, sessionID string, a *lt.Action) (string, error) {
	if a.Type == lt.ActionApproval && a.Tool == "shell" {
		// Approve exactly the arguments shown: the hash binds the approval.
		d := &lt.Decision{Decision: lt.DecisionApprove, ArgumentsSHA256: a.ArgumentsSHA256}
		if _, err := cl.DecideAction(ctx, sessionID, a.ID, d); err != nil {
			return "", err
		}
		return fmt.Sprintf("approved (policy %s)", a.Policy), nil
	}
	if a.Type != lt.ActionFunctionCall || a.Tool != "lookup_customer" {
		return "", fmt.Errorf("the demo cannot settle action %s (%s %s); see 'longhaul actions %s'", a.ID, a.Type, a.Tool, sessionID)
	}
	var args struct {
		CustomerID string `json:"customer_id"`
	}
	d := &lt.Decision{}
	note := ""
	if err := json.Unmarshal(a.Arguments, &args); err != nil {
		d.Error = "arguments must be an object with customer_id"
		note = "refused: bad arguments"
	} else if cust, ok := demoCustomers[args.CustomerID]; ok {
		raw, err := json.Marshal(cust)
		if err != nil {
			return "", fmt.Errorf("encode customer: %w", err)
		}
		d.Output = raw
		note = fmt.Sprintf("answered by the demo app: %s", cust["name"])
	} else {
		d.Error = fmt.Sprintf("no customer with id %q", args.CustomerID)
		note = "answered: not found"
	}
	if _, err := cl.DecideAction(ctx, sessionID, a.ID, d); err != nil {
		return "", err
	}
	return note, nil
}

// stepTracker prints one line per step of a turn: number, tokens, cost,
// elapsed time since the session started, and the tools the step called.
// A step's line is printed when the step is over (the next step starts or
// the turn ends), so it can say how its tools went.
type stepTracker struct {
	w     io.Writer
	start time.Time
	cur   *stepLine
	lines int
}

type stepLine struct {
	n      int
	tools  []stepTool
	text   string
	tokens int64
	cost   float64
	end    time.Time
}

type stepTool struct {
	name, label, note string
	failed            bool
}

func (t *stepTracker) observe(ev lt.Event) error {
	if t.start.IsZero() {
		t.start = ev.Time
	}
	switch ev.Type {
	case lt.EventModelRequested:
		var d lt.ModelRequestedData
		if decode(ev, &d) && t.cur != nil && t.cur.n != d.Step {
			return t.flush()
		}
	case lt.EventModelResponded:
		var d lt.ModelRespondedData
		if !decode(ev, &d) {
			return nil
		}
		if t.cur != nil && t.cur.n != d.Step {
			if err := t.flush(); err != nil {
				return err
			}
		}
		line := &stepLine{n: d.Step, text: d.Text, tokens: d.Usage.InputTokens + d.Usage.OutputTokens, cost: d.CostUSD, end: ev.Time}
		for _, tc := range d.ToolCalls {
			line.tools = append(line.tools, stepTool{name: tc.Name, label: toolLabel(tc.Name, tc.Arguments)})
		}
		t.cur = line
	case lt.EventToolCompleted, lt.EventActionResolved, lt.EventArtifactCreated:
		if t.cur != nil && ev.Step == t.cur.n {
			t.cur.end = ev.Time
		}
	case lt.EventToolFailed:
		var d lt.ToolFailedData
		if decode(ev, &d) && t.cur != nil && d.Step == t.cur.n {
			t.cur.end = ev.Time
			for i := range t.cur.tools {
				if t.cur.tools[i].name == d.Tool {
					t.cur.tools[i].failed = true
				}
			}
		}
	case lt.EventAcceptanceVerified:
		var d lt.AcceptanceVerifiedData
		if !decode(ev, &d) {
			return nil
		}
		if err := t.flush(); err != nil {
			return err
		}
		met := 0
		for _, c := range d.Verdict.Criteria {
			if c.Met {
				met++
			}
		}
		what := fmt.Sprintf("acceptance check: %d of %d criteria met", met, len(d.Verdict.Criteria))
		if d.Verdict.Error != "" {
			what = "acceptance check: " + d.Verdict.Error
		}
		_, err := fmt.Fprintf(t.w, "check    %7s tok  %8s  %6s  %s\n", fmtInt(d.Usage.InputTokens+d.Usage.OutputTokens), fmtCost(d.CostUSD), fmtDuration(ev.Time.Sub(t.start)), what)
		return err
	case lt.EventTurnCompleted, lt.EventTurnFailed, lt.EventTurnCancelled:
		if t.cur != nil {
			t.cur.end = ev.Time
		}
		return t.flush()
	}
	return nil
}

// annotate adds a note to the current step's call of tool.
func (t *stepTracker) annotate(step int, tool, note string) {
	if t.cur == nil || t.cur.n != step {
		return
	}
	for i := range t.cur.tools {
		if t.cur.tools[i].name == tool && t.cur.tools[i].note == "" {
			t.cur.tools[i].note = note
			return
		}
	}
}

func (t *stepTracker) flush() error {
	if t.cur == nil {
		return nil
	}
	l := t.cur
	t.cur = nil
	var what string
	if len(l.tools) == 0 {
		what = fmt.Sprintf("answer %q", truncate(l.text, 50))
	} else {
		parts := make([]string, len(l.tools))
		for i, tool := range l.tools {
			parts[i] = tool.label
			if tool.failed {
				parts[i] += " (failed)"
			}
			if tool.note != "" {
				parts[i] += " → " + tool.note
			}
		}
		what = strings.Join(parts, ", ")
	}
	t.lines++
	_, err := fmt.Fprintf(t.w, "step %2d  %7s tok  %8s  %6s  %s\n", l.n, fmtInt(l.tokens), fmtCost(l.cost), fmtDuration(l.end.Sub(t.start)), what)
	return err
}

// demoRequest is the demo's session: an inline agent spec with a scripted
// model, so the demo runs offline and the same way every time.
func demoRequest(pace time.Duration) (*lt.CreateSessionRequest, error) {
	type call struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	type usage struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	}
	type step struct {
		ToolCalls []call `json:"tool_calls,omitempty"`
		Text      string `json:"text,omitempty"`
		Usage     usage  `json:"usage"`
		DelayMS   int64  `json:"delay_ms,omitempty"`
	}
	delay := pace.Milliseconds()
	script := []step{
		{ToolCalls: []call{
			{Name: "write_file", Arguments: map[string]any{"path": "notes.md", "content": demoNotes}},
			{Name: "write_file", Arguments: map[string]any{"path": "stats.sh", "content": demoStatsScript}},
		}, Usage: usage{1840, 312}},
		{ToolCalls: []call{
			{Name: "shell", Arguments: map[string]any{"command": "wc -w notes.md"}},
			{Name: "shell", Arguments: map[string]any{"command": "ls"}},
		}, Usage: usage{2410, 64}},
		{ToolCalls: []call{
			{Name: "lookup_customer", Arguments: map[string]any{"customer_id": "cus_1042"}},
		}, Usage: usage{2655, 41}},
		{ToolCalls: []call{
			{Name: "shell", Arguments: map[string]any{"command": "sh stats.sh"}},
		}, Usage: usage{2980, 38}},
		{ToolCalls: []call{
			{Name: "write_file", Arguments: map[string]any{"path": "report.md", "content": demoReport}},
		}, Usage: usage{3125, 486}},
		{ToolCalls: []call{
			{Name: "finish", Arguments: map[string]any{
				"summary":   "Account brief for ACME Corp written to report.md: renewal on 2026-03-31 is at risk; three actions proposed.",
				"artifacts": []string{"report.md"},
			}},
		}, Usage: usage{3790, 72}},
		// The acceptance check of the final answer: a model call of its own.
		{Text: demoVerdict, Usage: usage{1210, 96}},
	}
	for i := range script {
		script[i].DelayMS = delay
	}
	rawScript, err := json.Marshal(script)
	if err != nil {
		return nil, fmt.Errorf("encode demo script: %w", err)
	}
	spec := &lt.AgentSpec{
		Model: lt.ModelSpec{
			Provider: "scripted",
			Name:     "demo",
			Script:   rawScript,
			// Prices of a mid-size hosted model, so the costs look real.
			Pricing: json.RawMessage(`{"input_per_mtok": 3, "output_per_mtok": 15}`),
		},
		Instructions: "You are an account analyst. Gather what the workspace and the CRM know about the customer, " +
			"check your notes, and deliver a short account brief as report.md.",
		Tools: []lt.ToolSpec{
			{Name: "write_file"},
			{Name: "read_file"},
			{Name: "shell", TimeoutSeconds: 30},
			{
				Name: "lookup_customer", Type: "function", Effect: lt.EffectRead,
				Description: "Look a customer up in the CRM by id.",
				Parameters:  json.RawMessage(`{"type":"object","properties":{"customer_id":{"type":"string"}},"required":["customer_id"],"additionalProperties":false}`),
			},
			{Name: "finish"},
		},
		// The agent runs what it likes, except scripts it wrote itself:
		// those wait for a person's approval.
		Policies: []lt.Policy{{
			Name: "scripts-need-approval", Tool: "shell", When: `args.command.startsWith("sh ")`,
			Decision: lt.PolicyAsk, Reason: "the agent wrote this script itself",
		}},
		MaxSteps: 20,
	}
	return &lt.CreateSessionRequest{
		AgentSpec:          spec,
		Input:              "Prepare an account brief for customer cus_1042 before Thursday's renewal call.",
		Goal:               "A one-page account brief the account manager can read in two minutes",
		Constraints:        []string{"Use only the CRM record and the notes in the workspace"},
		AcceptanceCriteria: []string{"report.md exists", "under 300 words", "names the renewal date"},
		Budget:             &lt.Budget{MaxCostUSD: 1, MaxModelCalls: 20},
		Metadata:           json.RawMessage(`{"source":"longhaul demo"}`),
	}, nil
}

// demoVerdict is the scripted verifier's reply: every acceptance criterion
// of the demo request, met.
const demoVerdict = `{"criteria": [
 {"criterion": "report.md exists", "met": true, "reason": "report.md was delivered as the final artifact."},
 {"criterion": "under 300 words", "met": true, "reason": "The brief is about 90 words."},
 {"criterion": "names the renewal date", "met": true, "reason": "It gives the renewal date, 2026-03-31."}]}`

const demoNotes = `# ACME Corp — call notes

- 2025-11-04: ops lead asked about SSO for contractors; promised a follow-up.
- 2025-12-12: seat usage down after their reorg; finance reviewing tools.
- 2026-01-20: three support tickets open (export timeouts).
`

const demoStatsScript = `#!/bin/sh
set -e
echo "notes: $(wc -w < notes.md) words, $(grep -c '^- ' notes.md) entries"
ls -1
`

const demoReport = `# Account brief: ACME Corp (cus_1042)

**Plan:** enterprise, 240 seats · **Renewal:** 2026-03-31 · **Health:** at risk

## What changed
Seat usage fell 18% this quarter after a reorg, and finance is reviewing tools.
Three support tickets are open, all about export timeouts.

## Before the renewal call
1. Close the export-timeout tickets, or bring a fix date.
2. Follow up on SSO for contractors (promised in November).
3. Offer a right-sized seat count rather than defend all 240.
`
