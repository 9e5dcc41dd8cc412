package main

import (
	"strings"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// allow and deny decide a browser_permission action: the agent's browser
// asks to visit a site (an origin) for the first time in the session. The
// decision names the action's request_id; --request-id pins the one the
// person saw ('longhaul action' shows it), so a decision never lands on
// another request.

type siteOpts struct {
	client    *clientOpts
	scope     string
	reason    string
	requestID string
	json      bool
}

func (c *cli) allowCmd() *cobra.Command {
	o := &siteOpts{}
	cmd := &cobra.Command{
		Use:   "allow ACTION_ID --scope once|session [--request-id brq_…]",
		Short: "Let the agent's browser visit the site a browser_permission action asks about",
		Long: `Allow a pending browser_permission action: the agent's browser asks to visit
a site (scheme, host and port) for the first time in the session, saying why
('longhaul action' shows the site, the purpose and the request id).

--scope once allows this one browser call (its redirects within the site
included); the next call to the site asks again. --scope session allows the
site for the rest of the session.

The decision carries the action's request_id. With --request-id, the one you
saw: if the action asks about another request, the server refuses (409).`,
		Example: `  longhaul allow act_4f2a --scope once
  longhaul allow act_4f2a --scope session --request-id brq_k3m9q2x7v1p8r4t6w0y5z2a8c3`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.decideSite(cmd, o, "allow", args[0]) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.scope, "scope", "", "once (this call only) or session (the rest of the session); required")
	fs.StringVar(&o.requestID, "request-id", "", "the request id you saw (default: the action's, read now)")
	fs.BoolVar(&o.json, "json", false, "print the resolved action as JSON")
	return cmd
}

func (c *cli) denyCmd() *cobra.Command {
	o := &siteOpts{}
	cmd := &cobra.Command{
		Use:   "deny ACTION_ID --reason TEXT [--request-id brq_…]",
		Short: "Refuse the agent's browser the site a browser_permission action asks about",
		Long: `Deny a pending browser_permission action: the browser does not visit the
site, and the agent gets "a person denied the browser access to <site>:
<reason>" as the call's result. The turn goes on.

With --request-id, the request you saw: if the action asks about another
request, the server refuses (409).`,
		Example: `  longhaul deny act_4f2a --reason "no third-party sites"`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE:    func(cmd *cobra.Command, args []string) error { return c.decideSite(cmd, o, "deny", args[0]) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.reason, "reason", "", "why, told to the agent (required)")
	fs.StringVar(&o.requestID, "request-id", "", "the request id you saw (default: the action's, read now)")
	fs.BoolVar(&o.json, "json", false, "print the resolved action as JSON")
	return cmd
}

func (c *cli) decideSite(cmd *cobra.Command, o *siteOpts, command, id string) error {
	d := &lt.Decision{Decision: lt.DecisionAllow, Scope: o.scope}
	if command == "deny" {
		if strings.TrimSpace(o.reason) == "" {
			return usagef("deny: --reason is required: it tells the agent why")
		}
		d = &lt.Decision{Decision: lt.DecisionDeny, Reason: o.reason}
	} else if o.scope != lt.ScopeOnce && o.scope != lt.ScopeSession {
		return usagef("allow: --scope must be once (this call only) or session (the rest of the session), got %q", o.scope)
	}
	cl, a, err := c.fetchAction(cmd, o.client, id)
	if err != nil {
		return err
	}
	if a.Type != lt.ActionBrowserPermission {
		return wrongType(command, a)
	}
	d.RequestID = a.RequestID
	if o.requestID != "" {
		d.RequestID = o.requestID
	}
	return c.sendDecision(cmd, cl, a, d, o.json)
}
