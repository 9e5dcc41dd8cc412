package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// budgetFlags are the limit flags of `budget` and of `approve` on a budget
// action. Only the flags given on the command line count (pflag's Changed):
// a limit left out keeps its value on the server.
type budgetFlags struct {
	maxCost, softCost             float64
	maxTokens, softTokens         int64
	maxModelCalls, softModelCalls int64
	maxToolCalls, softToolCalls   int64
	maxWall, softWall             time.Duration
}

// registerBudgetFlags adds the limit flags to cmd. prefix starts each
// flag's help (approve: "budget action: new ").
func registerBudgetFlags(cmd *cobra.Command, prefix string) *budgetFlags {
	f := &budgetFlags{}
	fs := cmd.Flags()
	fs.Float64Var(&f.maxCost, "max-cost", 0, prefix+"hard limit on cost, in USD")
	fs.Float64Var(&f.softCost, "soft-cost", 0, prefix+"soft limit on cost, in USD: the session asks before spending past it")
	fs.Int64Var(&f.maxTokens, "max-tokens", 0, prefix+"hard limit on input+output tokens")
	fs.Int64Var(&f.softTokens, "soft-tokens", 0, prefix+"soft limit on input+output tokens")
	fs.Int64Var(&f.maxModelCalls, "max-model-calls", 0, prefix+"hard limit on model calls")
	fs.Int64Var(&f.softModelCalls, "soft-model-calls", 0, prefix+"soft limit on model calls")
	fs.Int64Var(&f.maxToolCalls, "max-tool-calls", 0, prefix+"hard limit on tool calls")
	fs.Int64Var(&f.softToolCalls, "soft-tool-calls", 0, prefix+"soft limit on tool calls")
	fs.DurationVar(&f.maxWall, "max-wall", 0, prefix+"hard limit on wall-clock time since the session started, e.g. 72h")
	fs.DurationVar(&f.softWall, "soft-wall", 0, prefix+"soft limit on wall-clock time, e.g. 24h")
	return f
}

// budgetPatch is the patch the given flags make, with the flags' names in
// the order they were checked.
type budgetPatch struct {
	p     lt.BudgetPatch
	flags []string
	zeros []string
}

// zeroFlag returns a given flag whose value is 0 (removes the limit), or "".
func (b *budgetPatch) zeroFlag() string {
	if len(b.zeros) == 0 {
		return ""
	}
	return b.zeros[0]
}

// patch returns the patch of the flags given on cmd's command line, or nil
// when none was given. A negative value, or a duration that is not whole
// seconds, is a usage error naming the flag.
func (f *budgetFlags) patch(cmd *cobra.Command) (*budgetPatch, error) {
	out := &budgetPatch{}
	changed := func(name string, zero bool) bool {
		if !cmd.Flags().Changed(name) {
			return false
		}
		out.flags = append(out.flags, "--"+name)
		if zero {
			out.zeros = append(out.zeros, "--"+name)
		}
		return true
	}
	cost := func(name string, v float64, dst **float64) error {
		if !changed(name, v == 0) {
			return nil
		}
		if v < 0 {
			return usagef("--%s %g: must not be negative", name, v)
		}
		*dst = &v
		return nil
	}
	count := func(name string, v int64, dst **int64) error {
		if !changed(name, v == 0) {
			return nil
		}
		if v < 0 {
			return usagef("--%s %d: must not be negative", name, v)
		}
		*dst = &v
		return nil
	}
	wall := func(name string, d time.Duration, dst **int64) error {
		if !changed(name, d == 0) {
			return nil
		}
		if d < 0 {
			return usagef("--%s %s: must not be negative", name, d)
		}
		if d%time.Second != 0 {
			return usagef("--%s %s: give whole seconds (budgets count wall time in seconds)", name, d)
		}
		s := int64(d / time.Second)
		*dst = &s
		return nil
	}
	p := &out.p
	for _, err := range []error{
		cost("max-cost", f.maxCost, &p.MaxCostUSD),
		cost("soft-cost", f.softCost, &p.SoftCostUSD),
		count("max-tokens", f.maxTokens, &p.MaxTokens),
		count("soft-tokens", f.softTokens, &p.SoftTokens),
		count("max-model-calls", f.maxModelCalls, &p.MaxModelCalls),
		count("soft-model-calls", f.softModelCalls, &p.SoftModelCalls),
		count("max-tool-calls", f.maxToolCalls, &p.MaxToolCalls),
		count("soft-tool-calls", f.softToolCalls, &p.SoftToolCalls),
		wall("max-wall", f.maxWall, &p.MaxWallSeconds),
		wall("soft-wall", f.softWall, &p.SoftWallSeconds),
	} {
		if err != nil {
			return nil, err
		}
	}
	if len(out.flags) == 0 {
		return nil, nil
	}
	return out, nil
}

type budgetOpts struct {
	client *clientOpts
	limits *budgetFlags
	json   bool
}

func (c *cli) budgetCmd() *cobra.Command {
	o := &budgetOpts{}
	cmd := &cobra.Command{
		Use:   "budget SESSION_ID [limit flags]",
		Short: "Show or change a session's budget limits",
		Long: `Without limit flags, show the session's budget beside its usage. With them,
change those limits (PATCH /v1/sessions/{id}/budget) and show the result; the
limits not given keep their values, and 0 removes a limit.

Every hard limit (--max-*) stops the turn with stop_reason budget_exceeded
when reached; a soft limit (--soft-*, at most its max) pauses the session with
a budget action instead, which 'longhaul approve' or 'longhaul stop' decides.
Raising the limits also settles a budget action whose soft limit is no longer
reached, and a session stopped by its budget can go on with a new turn.`,
		Example: `  longhaul budget ses_01J9Z
  longhaul budget ses_01J9Z --max-cost 10 --soft-cost 5
  longhaul budget ses_01J9Z --max-tokens 2000000 --max-wall 72h --soft-tool-calls 0`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.budget(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	o.limits = registerBudgetFlags(cmd, "")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the session as JSON (the API object)")
	return cmd
}

func (c *cli) budget(cmd *cobra.Command, o *budgetOpts, id string) error {
	patch, err := o.limits.patch(cmd)
	if err != nil {
		return err
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	var s *lt.Session
	if patch == nil {
		s, err = cl.GetSession(cmd.Context(), id)
	} else {
		s, err = cl.UpdateBudget(cmd.Context(), id, &patch.p)
	}
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, s)
	}
	if patch != nil {
		fmt.Fprintf(c.stdout, "Budget of %s updated (%s).\n\n", s.ID, strings.Join(patch.flags, ", "))
	}
	return printBudget(c.stdout, s, c.now())
}

// printBudget shows each budget dimension's usage beside its limits.
func printBudget(w io.Writer, s *lt.Session, now time.Time) error {
	status := string(s.Status)
	if s.StopReason != nil {
		status += " (" + *s.StopReason + ")"
	}
	fmt.Fprintf(w, "Session %s is %s.\n", s.ID, status)
	b, u := s.Budget, s.Usage
	wall := now.Sub(s.CreatedAt).Seconds()
	t := newTable(w, "LIMIT", "USED", "SOFT", "MAX")
	row := func(label, name string, used, soft, hard float64) {
		limit := func(v float64) string {
			if v <= 0 {
				return "-"
			}
			return dimText(name, v)
		}
		t.row(label, dimText(name, used), limit(soft), limit(hard))
	}
	row("cost", "cost_usd", u.CostUSD, b.SoftCostUSD, b.MaxCostUSD)
	row("tokens", "tokens", float64(u.InputTokens+u.OutputTokens), float64(b.SoftTokens), float64(b.MaxTokens))
	row("model calls", "model_calls", float64(u.ModelCalls), float64(b.SoftModelCalls), float64(b.MaxModelCalls))
	row("tool calls", "tool_calls", float64(u.ToolCalls), float64(b.SoftToolCalls), float64(b.MaxToolCalls))
	row("wall time", "wall_seconds", max(wall, 0), float64(b.SoftWallSeconds), float64(b.MaxWallSeconds))
	return t.flush()
}
