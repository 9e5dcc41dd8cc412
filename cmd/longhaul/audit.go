package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type auditOpts struct {
	client *clientOpts
	since  string
	actor  string
	cursor string
	limit  int
	json   bool
}

func (c *cli) auditCmd() *cobra.Command {
	o := &auditOpts{}
	cmd := &cobra.Command{
		Use:   "audit [--since T|D] [--actor WHO] [--limit N] [--cursor C]",
		Short: "Show the audit log: who changed what, and who was refused",
		Long: `Show the server's audit log, oldest first (an admin key is needed): every
request that changed state (POST, PUT, PATCH, DELETE, whatever its outcome)
and every refused one (401, 403, 429, whatever its method), with its time,
who sent it (a key's name and role, or the first characters of a key that
was refused, never the key), its route, the ids it named, its status and its
request id (the X-Request-Id of its response). Reads that succeed are not in
it. The server deletes entries older than its --audit-retention.

--since keeps the entries from a time (RFC 3339) or a duration ago (7d, 36h,
90m); --actor those of one key: its id, its name, or a refused key's prefix.
A page holds --limit entries (default 50, at most 500); when there are more,
the command says how to get the next page.`,
		Example: `  longhaul audit --since 24h
  longhaul audit --actor alice --limit 200
  longhaul audit --since 2026-03-01T00:00:00Z --json | jq '.data[] | select(.status == 403)'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.audit(cmd, o) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.since, "since", "", "entries from this time (RFC 3339) or this long ago (7d, 36h, 90m)")
	fs.StringVar(&o.actor, "actor", "", "entries of one key: its id, its name, or a refused key's prefix")
	fs.IntVar(&o.limit, "limit", 0, "entries per page, 1 to 500 (default 50)")
	fs.StringVar(&o.cursor, "cursor", "", "the page after this cursor (as the previous page's output gives it)")
	fs.BoolVar(&o.json, "json", false, "print the page as the API's JSON (data and next_cursor)")
	return cmd
}

func (c *cli) audit(cmd *cobra.Command, o *auditOpts) error {
	if cmd.Flags().Changed("limit") && (o.limit < 1 || o.limit > 500) {
		return usagef("audit: --limit %d: want 1 to 500", o.limit)
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	page, err := cl.ListAudit(cmd.Context(), lt.ListAuditParams{Since: o.since, Actor: o.actor, Cursor: o.cursor, Limit: o.limit})
	if err != nil {
		return err
	}
	if page.Data == nil {
		page.Data = []lt.AuditEntry{}
	}
	if o.json {
		return writeJSON(c.stdout, page)
	}
	if len(page.Data) == 0 {
		_, err := fmt.Fprintln(c.stdout, "No audit entries.")
		return err
	}
	t := newTable(c.stdout, "SEQ", "TIME", "WHO", "METHOD", "ROUTE", "TARGETS", "STATUS", "REQUEST")
	for _, e := range page.Data {
		t.row(strconv.FormatInt(e.Seq, 10), fmtTime(e.Time), auditWho(e), e.Method, cmp.Or(e.Route, "-"),
			auditTargets(e.Targets), strconv.Itoa(e.Status), e.RequestID)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if page.NextCursor != nil {
		args := []string{"longhaul audit", "--cursor", *page.NextCursor}
		if o.since != "" {
			args = append(args, "--since", o.since)
		}
		if o.actor != "" {
			args = append(args, "--actor", o.actor)
		}
		if o.limit != 0 {
			args = append(args, "--limit", strconv.Itoa(o.limit))
		}
		_, err := fmt.Fprintf(c.stdout, "\nMore entries: %s\n", strings.Join(args, " "))
		return err
	}
	return nil
}

// auditWho says who sent an audited request: a key's name and role, a
// refused key's prefix, or nobody.
func auditWho(e lt.AuditEntry) string {
	switch {
	case e.Actor != nil:
		return e.Actor.Name + " (" + string(e.Actor.Role) + ")"
	case e.KeyPrefix != "":
		return "key " + e.KeyPrefix + "…"
	default:
		return "(no key)"
	}
}

// auditTargets lists an entry's targets as name=id, in name order.
func auditTargets(t map[string]string) string {
	if len(t) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(t))
	for _, k := range slices.Sorted(maps.Keys(t)) {
		parts = append(parts, k+"="+t[k])
	}
	return strings.Join(parts, " ")
}
