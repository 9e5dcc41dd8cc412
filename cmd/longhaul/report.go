package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type reportOpts struct {
	client    *clientOpts
	since     string
	until     string
	agent     string
	project   string
	subagents bool
	bucket    string
	json      bool
	csv       bool
}

func (c *cli) reportCmd() *cobra.Command {
	o := &reportOpts{}
	cmd := &cobra.Command{
		Use:   "report [--since 7d] [--agent NAME] [--json | --csv]",
		Short: "Report tasks: asks, retries, checkpoints, reviews and cost per accepted task",
		Long: `Report the tasks (sessions) created in a window: for each, its status and stop
reason, whether its input was complete (it never asked a person for
information), how many times a person was asked (approvals, questions,
in-doubt effects, budgets; not application function calls), its retries,
the last checkpoint it reached, its review and its cost. Then the totals:
acceptance rate (accepted / reviewed), human asks per task, and cost per
accepted task: the cost of every task in the window, failed and rejected
ones included, divided by the accepted ones.

Only root sessions are tasks, each with its sub-agents' cost rolled in;
--subagents lists sub-agents as tasks of their own (totals then count each
session's own cost once).

--since and --until take an RFC 3339 time or a duration back from now (7d,
36h, 90m). --json prints the API's report (every task, the totals and the
series by hour or day); --csv prints one row per task, for a spreadsheet.`,
		Example: `  longhaul report
  longhaul report --since 30d --agent researcher
  longhaul report --since 24h --json | jq .totals.cost_per_accepted_task_usd
  longhaul report --since 2025-03-01T00:00:00Z --until 2025-04-01T00:00:00Z --csv > march.csv`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.report(cmd, o) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.since, "since", "7d", "start of the window: an RFC 3339 time or a duration before --until (7d, 36h)")
	fs.StringVar(&o.until, "until", "", "end of the window: an RFC 3339 time or a duration before now (default now)")
	fs.StringVar(&o.agent, "agent", "", "only the tasks of this agent")
	fs.StringVar(&o.project, "project", "", "only the tasks of this project (an admin key may name any; another key sees only its own)")
	fs.BoolVar(&o.subagents, "subagents", false, "list sub-agents as tasks of their own")
	fs.StringVar(&o.bucket, "bucket", "", "step of the series: hour or day (default: hour for a window up to 48h, else day)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON (the API's form, every task)")
	fs.BoolVar(&o.csv, "csv", false, "print one CSV row per task (with a header)")
	return cmd
}

// reportPage is how many tasks one request asks for (a variable so that
// a test can make the command follow several pages).
var reportPage = client.MaxListLimit

func (c *cli) report(cmd *cobra.Command, o *reportOpts) error {
	if o.json && o.csv {
		return usagef("--json and --csv: choose one")
	}
	if o.bucket != "" && o.bucket != lt.BucketHour && o.bucket != lt.BucketDay {
		return usagef("--bucket %q: want hour or day", o.bucket)
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	p := lt.TaskReportParams{Since: o.since, Until: o.until, Agent: o.agent, Project: o.project, IncludeSubagents: o.subagents,
		Bucket: o.bucket, Limit: reportPage}
	rep, err := cl.TaskReport(cmd.Context(), p)
	if err != nil {
		return err
	}
	// The next pages keep the first page's window, so tasks created
	// meanwhile neither shift the pages nor change the totals.
	p.Since, p.Until = rep.Since.Format(time.RFC3339Nano), rep.Until.Format(time.RFC3339Nano)
	for next := rep.NextCursor; next != nil; {
		p.Cursor = *next
		page, err := cl.TaskReport(cmd.Context(), p)
		if err != nil {
			return err
		}
		rep.Data = append(rep.Data, page.Data...)
		next = page.NextCursor
	}
	rep.NextCursor = nil
	switch {
	case o.json:
		return writeJSON(c.stdout, rep)
	case o.csv:
		return writeReportCSV(c.stdout, rep)
	default:
		return printReport(c.stdout, rep)
	}
}

// reportCSVHeader names the columns of --csv, one row per task.
var reportCSVHeader = []string{
	"id", "agent", "agent_version", "parent_id", "goal", "status", "stop_reason",
	"created_at", "ended_at", "duration_seconds", "input_complete", "asks",
	"approvals", "inputs", "in_doubt", "budgets", "retries",
	"last_checkpoint_id", "last_checkpoint_name", "last_checkpoint_kind", "last_checkpoint_step",
	"accepted", "review_note", "reviewed_at", "turns", "subagents", "model_calls", "tool_calls",
	"input_tokens", "output_tokens", "model_cost_usd", "subagent_cost_usd", "cost_usd",
	"tokens_estimated", "monitor_cost_usd",
}

// writeReportCSV writes one row per task: times in RFC 3339, an empty
// cell for what a task has not (no end, no checkpoint, no review), true or
// false for flags.
func writeReportCSV(w io.Writer, rep *lt.TaskReport) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(reportCSVHeader); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	for _, r := range rep.Data {
		parent, stop, ended := "", "", ""
		if r.ParentID != nil {
			parent = *r.ParentID
		}
		if r.StopReason != nil {
			stop = *r.StopReason
		}
		if r.EndedAt != nil {
			ended = r.EndedAt.Format(time.RFC3339Nano)
		}
		var ckID, ckName, ckKind, ckStep string
		if ck := r.LastCheckpoint; ck != nil {
			ckID, ckName, ckKind = ck.ID, ck.Name, ck.Kind
			if ck.Step > 0 {
				ckStep = strconv.Itoa(ck.Step)
			}
		}
		var accepted, note, reviewedAt string
		if rv := r.Review; rv != nil {
			accepted, note, reviewedAt = strconv.FormatBool(rv.Accepted), rv.Note, rv.At.Format(time.RFC3339Nano)
		}
		row := []string{
			r.ID, r.Agent.Name, strconv.Itoa(r.Agent.Version), parent, r.Goal, string(r.Status), stop,
			r.CreatedAt.Format(time.RFC3339Nano), ended, num(r.DurationSeconds), strconv.FormatBool(r.InputComplete),
			strconv.Itoa(r.Asks), strconv.Itoa(r.AsksByType[lt.ActionApproval]), strconv.Itoa(r.AsksByType[lt.ActionInput]),
			strconv.Itoa(r.AsksByType[lt.ActionInDoubt]), strconv.Itoa(r.AsksByType[lt.ActionBudget]), strconv.Itoa(r.Retries),
			ckID, ckName, ckKind, ckStep,
			accepted, note, reviewedAt, strconv.Itoa(r.Turns), strconv.Itoa(r.Subagents),
			strconv.FormatInt(r.Usage.ModelCalls, 10), strconv.FormatInt(r.Usage.ToolCalls, 10),
			strconv.FormatInt(r.Usage.InputTokens, 10), strconv.FormatInt(r.Usage.OutputTokens, 10),
			num(r.ModelCostUSD), num(r.SubagentCostUSD), num(r.CostUSD),
			strconv.FormatBool(r.Usage.Estimated), num(r.MonitorCostUSD),
		}
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// printReport writes the tasks as a table, then the totals and the
// buckets of the series that had tasks.
func printReport(w io.Writer, rep *lt.TaskReport) error {
	scope := "tasks"
	if rep.Agent != "" {
		scope = "tasks of agent " + rep.Agent
	}
	fmt.Fprintf(w, "Report of %s created from %s to %s (UTC)\n\n", scope,
		rep.Since.UTC().Format("2006-01-02 15:04"), rep.Until.UTC().Format("2006-01-02 15:04"))
	if len(rep.Data) == 0 {
		fmt.Fprintln(w, "No tasks in this window.")
		return nil
	}
	t := newTable(w, "TASK", "AGENT", "STATUS", "DURATION", "EXTRA INPUT", "ASKS", "RETRIES", "LAST CHECKPOINT", "REVIEW", "COST")
	for _, r := range rep.Data {
		status := string(r.Status)
		if r.StopReason != nil {
			status += " (" + *r.StopReason + ")"
		}
		input := "none"
		if !r.InputComplete {
			input = "asked"
		}
		ck := "-"
		if c := r.LastCheckpoint; c != nil {
			ck = orDash(c.Name)
			if c.Kind == lt.CheckpointNamed {
				ck = fmt.Sprintf("%q", c.Name)
			}
		}
		review := "-"
		if r.Accepted != nil {
			review = "rejected"
			if *r.Accepted {
				review = "accepted"
			}
		}
		t.row(r.ID, fmt.Sprintf("%s v%d", r.Agent.Name, r.Agent.Version), status,
			fmtDuration(time.Duration(r.DurationSeconds*float64(time.Second))), input,
			strconv.Itoa(r.Asks), strconv.Itoa(r.Retries), truncate(ck, 32), review, fmtCost(r.CostUSD))
	}
	if err := t.flush(); err != nil {
		return err
	}

	tot := rep.Totals
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Tasks:           %d (%s)\n", tot.Tasks, byStatus(tot.ByStatus))
	fmt.Fprintf(w, "Reviewed:        %d: %d accepted, %d rejected; acceptance rate %s\n",
		tot.Reviewed, tot.Accepted, tot.Rejected, percent(tot.AcceptanceRate))
	fmt.Fprintf(w, "No extra input:  %d of %d (tasks that never had to ask a person for information)\n", tot.InputComplete, tot.Tasks)
	perTask := "-"
	if tot.AsksPerTask != nil {
		perTask = strconv.FormatFloat(*tot.AsksPerTask, 'f', 2, 64)
	}
	fmt.Fprintf(w, "Human asks:      %d (%s per task)\n", tot.Asks, perTask)
	fmt.Fprintf(w, "Retries:         %d\n", tot.Retries)
	perAccepted := "- (nothing accepted)"
	if tot.CostPerAcceptedTaskUSD != nil {
		perAccepted = fmtCost(*tot.CostPerAcceptedTaskUSD)
	}
	fmt.Fprintf(w, "Cost:            %s in all; %s per accepted task\n", fmtCost(tot.CostUSD), perAccepted)
	if tot.MonitorCostUSD > 0 {
		fmt.Fprintf(w, "Model monitor:   %s of it\n", fmtCost(tot.MonitorCostUSD))
	}
	if len(tot.DecisionsByActor) > 0 {
		by := make([]string, len(tot.DecisionsByActor))
		for i, c := range tot.DecisionsByActor {
			by[i] = fmt.Sprintf("%d by %s", c.Count, actorLabel(&c.Actor))
		}
		fmt.Fprintf(w, "Decisions:       %s\n", strings.Join(by, ", "))
	}

	var busy []lt.TaskBucket
	for _, b := range rep.Series {
		if b.Tasks > 0 {
			busy = append(busy, b)
		}
	}
	if len(busy) == 0 {
		return nil
	}
	layout, label := "2006-01-02", "DAY"
	if rep.Bucket == lt.BucketHour {
		layout, label = "2006-01-02 15:00", "HOUR"
	}
	fmt.Fprintln(w)
	st := newTable(w, label, "TASKS", "REVIEWED", "ACCEPTED", "COST")
	for _, b := range busy {
		st.row(b.Start.UTC().Format(layout), strconv.Itoa(b.Tasks), strconv.Itoa(b.Reviewed), strconv.Itoa(b.Accepted), fmtCost(b.CostUSD))
	}
	return st.flush()
}

// byStatus lists status counts, most first: "3 idle, 1 failed".
func byStatus(m map[lt.SessionStatus]int) string {
	type kv struct {
		s lt.SessionStatus
		n int
	}
	var all []kv
	for s, n := range m {
		all = append(all, kv{s, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].s < all[j].s
	})
	parts := make([]string, len(all))
	for i, e := range all {
		parts[i] = fmt.Sprintf("%d %s", e.n, e.s)
	}
	return strings.Join(parts, ", ")
}

// percent prints a ratio as a percentage, or "-" when there is none.
func percent(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r*100, 'f', 1, 64) + "%"
}
