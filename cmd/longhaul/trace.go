package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type traceOpts struct {
	client    *clientOpts
	subagents bool
	json      bool
}

func (c *cli) traceCmd() *cobra.Command {
	o := &traceOpts{}
	cmd := &cobra.Command{
		Use:   "trace SESSION_ID",
		Short: "Print a session's trace: turns, steps, model and tool calls, with time, tokens and cost",
		Long: `Print the trace of a session as a tree: each turn, its steps, and in each step
the model calls and the tool calls it asked for (with approvals, waits and
retries below them), plus the compaction and acceptance-check calls of the
turn. Each line shows how long the span took, its input and output tokens,
its cost in USD, and its status.

A step's tokens and cost are its model calls'; a turn's are its steps', its
compaction and check calls' and what its sub-agents reported during it. The
trace is derived from the session's journal, so it is the same on every
server and after any restart. With --subagents, each sub-agent's own trace is
nested under the call that spawned it.`,
		Example: `  longhaul trace ses_01J9Z
  longhaul trace ses_01J9Z --subagents
  longhaul trace ses_01J9Z --json | jq '.spans[].usage.cost_usd'`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.trace(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&o.subagents, "subagents", false, "nest each sub-agent's own trace under its span")
	fs.BoolVar(&o.json, "json", false, "print the trace as JSON (the API's form)")
	return cmd
}

func (c *cli) trace(cmd *cobra.Command, o *traceOpts, id string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	tr, err := cl.SessionTrace(cmd.Context(), id, o.subagents)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, tr)
	}
	return printTrace(c.stdout, tr)
}

// printTrace writes the trace as a tree with box-drawing indentation, one
// span per line, its numbers in aligned columns.
func printTrace(w io.Writer, tr *lt.Trace) error {
	turns := len(tr.Spans)
	plural := "s"
	if turns == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "Session %s (agent %s v%d): %d turn%s, %s in, %s out, %s\n",
		tr.SessionID, tr.Agent.Name, tr.Agent.Version, turns, plural,
		fmtTokens(tr.Usage.InputTokens, tr.Usage.Estimated), fmtTokens(tr.Usage.OutputTokens, tr.Usage.Estimated), fmtCost(tr.Usage.CostUSD))
	if turns == 0 {
		fmt.Fprintln(w, "No turns yet.")
		return nil
	}
	fmt.Fprintln(w)
	rows := [][]string{{"SPAN", "DURATION", "IN", "OUT", "COST", "STATUS"}}
	var walk func(spans []lt.Span, prefix string, root bool)
	walk = func(spans []lt.Span, prefix string, root bool) {
		for i, s := range spans {
			branch, next := "├─ ", "│  "
			if i == len(spans)-1 {
				branch, next = "└─ ", "   "
			}
			if root {
				branch, next = "", ""
			}
			in, out, cost := "", "", ""
			if u := s.Usage; u != nil && (u.ModelCalls > 0 || u.InputTokens > 0 || u.OutputTokens > 0 || u.CostUSD > 0) {
				in, out, cost = fmtTokens(u.InputTokens, u.Estimated), fmtTokens(u.OutputTokens, u.Estimated), fmtCost(u.CostUSD)
			}
			rows = append(rows, []string{prefix + branch + oneLine(s.Name), spanDuration(s), in, out, cost, spanNotes(s)})
			walk(s.Children, prefix+next, false)
		}
	}
	walk(tr.Spans, "", true)
	return writeColumns(w, rows, []bool{false, true, true, true, true, false})
}

// writeColumns prints rows in columns two spaces apart, each cell padded
// to its column's width (counted in runes: the tree's box-drawing
// characters are one column wide), on the right where right is set.
func writeColumns(w io.Writer, rows [][]string, right []bool) error {
	widths := make([]int, len(right))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			if i > 0 {
				line.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if right[i] {
				line.WriteString(pad + c)
			} else if i < len(r)-1 {
				line.WriteString(c + pad)
			} else {
				line.WriteString(c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}

// spanDuration is the span's duration, marked when it is still running.
func spanDuration(s lt.Span) string {
	d := fmtDuration(ms(s.DurationMS))
	if s.End == nil {
		return d + "+"
	}
	return d
}

// spanNotes is the status column: the status, then what explains it.
func spanNotes(s lt.Span) string {
	a := s.Attributes
	var notes []string
	switch s.Status {
	case lt.SpanError:
		msg := "error"
		if s.Error != "" {
			msg += ": " + truncate(s.Error, 60)
		}
		notes = append(notes, msg)
	default:
		notes = append(notes, string(s.Status))
	}
	if a.StopReason != "" && s.Kind == lt.SpanTurn {
		notes = append(notes, "stop_reason "+a.StopReason)
	}
	if a.Retried {
		notes = append(notes, "retried")
	}
	if a.Refused != "" {
		notes = append(notes, "refused ("+a.Refused+")")
	}
	if a.Attempts > 1 {
		notes = append(notes, fmt.Sprintf("%d attempts", a.Attempts))
	}
	if a.EffectStatus == lt.EffectInDoubt {
		notes = append(notes, "in doubt")
	}
	for _, f := range a.Findings {
		notes = append(notes, "monitor: "+f)
	}
	if a.Resolution != "" {
		notes = append(notes, "resolved: "+a.Resolution)
	}
	if a.Decision != "" {
		notes = append(notes, "decision "+a.Decision)
	}
	if a.ChildSessionID != "" {
		notes = append(notes, a.ChildSessionID)
	}
	return strings.Join(notes, ", ")
}
