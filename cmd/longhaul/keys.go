package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func (c *cli) keysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "keys",
		Aliases: []string{"key"},
		Short:   "Manage the server's API keys (create, ls, revoke), and say who a key is (whoami)",
		Long: `Manage the API keys of the server (an admin key is needed). A key has a name
(who holds it: a person or a program), a role and a project:

  admin     everything, in every project: keys, secrets, the audit log
  operator  sessions, agents, webhooks, signals in its project
  approver  reads, decides actions, reviews and cancels in its project
  reader    reads its project
  runner    connects a self-managed environment

The key itself (lh_...) is shown once, when it is created: the server keeps
only its SHA-256, so a lost key cannot be shown again (create another and
revoke the lost one). A revoked key is refused at once on every node, and
stays listed, revoked. The keys given to 'longhaul serve --api-key' (or
LONGHAUL_API_KEYS) are admin keys that are not listed here.`,
		Example: `  longhaul keys create alice --role approver
  TOKEN=$(longhaul keys create ci --role operator --expires-in 720h --quiet)
  longhaul keys ls
  longhaul keys revoke key_01jd8x2k3m4n5p6q7r8s9t0v1w
  longhaul keys whoami`,
		Args: usageArgs(noSubcommand),
		RunE: showHelp,
	}
	cmd.AddCommand(c.keysCreateCmd(), c.keysLsCmd(), c.keysRevokeCmd(), c.keysWhoamiCmd())
	return cmd
}

type keysCreateOpts struct {
	client    *clientOpts
	role      string
	project   string
	expiresIn time.Duration
	expiresAt string
	quiet     bool
	json      bool
}

func (c *cli) keysCreateCmd() *cobra.Command {
	o := &keysCreateOpts{}
	cmd := &cobra.Command{
		Use:   "create NAME --role ROLE [--project P] [--expires-in D | --expires-at T]",
		Short: "Create an API key and print it (shown only this once)",
		Long: `Create an API key named NAME (who will hold it) with a role, in a project
(default "default"), and print it. The key is shown only now: the server
stores its hash, never the key. --quiet prints the key alone, for a script.

A key may expire: --expires-in takes a duration (720h), --expires-at a time
(RFC 3339: 2027-01-31T00:00:00Z). An expired key is refused like a revoked
one.`,
		Example: `  longhaul keys create alice --role approver
  longhaul keys create nightly-ci --role operator --expires-in 720h --quiet > ci.key
  longhaul keys create auditor --role reader --expires-at 2027-01-31T00:00:00Z --json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.keysCreate(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.role, "role", "", "the key's role: "+roleList()+" (required)")
	fs.StringVar(&o.project, "project", "", "the key's project (default \"default\")")
	fs.DurationVar(&o.expiresIn, "expires-in", 0, "the key expires after this duration (e.g. 720h)")
	fs.StringVar(&o.expiresAt, "expires-at", "", "the key expires at this time (RFC 3339)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print only the key")
	fs.BoolVar(&o.json, "json", false, "print the API object, the key included")
	return cmd
}

func roleList() string {
	names := make([]string, 0, len(lt.Roles()))
	for _, r := range lt.Roles() {
		names = append(names, string(r))
	}
	return strings.Join(names, ", ")
}

func (c *cli) keysCreate(cmd *cobra.Command, o *keysCreateOpts, name string) error {
	if o.role == "" {
		return usagef("keys create: give the key's --role (%s)", roleList())
	}
	if o.quiet && o.json {
		return usagef("keys create: give one of --quiet and --json")
	}
	req := &lt.CreateKeyRequest{Name: name, Role: lt.Role(o.role), Project: o.project}
	switch {
	case o.expiresAt != "" && cmd.Flags().Changed("expires-in"):
		return usagef("keys create: give one of --expires-in and --expires-at")
	case o.expiresAt != "":
		t, err := time.Parse(time.RFC3339, o.expiresAt)
		if err != nil {
			return usagef("keys create: --expires-at %q is not an RFC 3339 time (2027-01-31T00:00:00Z)", o.expiresAt)
		}
		req.ExpiresAt = &t
	case cmd.Flags().Changed("expires-in"):
		if o.expiresIn <= 0 {
			return usagef("keys create: --expires-in must be positive, got %s", o.expiresIn)
		}
		t := c.now().Add(o.expiresIn).UTC()
		req.ExpiresAt = &t
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	k, err := cl.CreateKey(cmd.Context(), req)
	if err != nil {
		return err
	}
	switch {
	case o.json:
		return writeJSON(c.stdout, k)
	case o.quiet:
		_, err = fmt.Fprintln(c.stdout, k.Key)
		return err
	}
	expires := ""
	if k.ExpiresAt != nil {
		expires = ", expires " + fmtTime(*k.ExpiresAt)
	}
	_, err = fmt.Fprintf(c.stdout, "Key %s created for %s (%s, project %s%s).\n"+
		"Keep it now: it is shown only this once (the server stores only its hash).\n\n%s\n",
		k.ID, k.Name, k.Role, k.Project, expires, k.Key)
	return err
}

type keysLsOpts struct {
	client *clientOpts
	json   bool
}

func (c *cli) keysLsCmd() *cobra.Command {
	o := &keysLsOpts{}
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the API keys: names, roles, projects, prefixes, never keys",
		Long: `List every API key, oldest first, revoked and expired ones included: its id,
name, role, project, the first characters of the key (to tell which one a
holder has), when it was created and last used, and its state (active,
expired or revoked).`,
		Example: `  longhaul keys ls
  longhaul keys ls --json | jq -r '.[] | select(.revoked_at == null) | .id'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.keysLs(cmd, o) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print a JSON array of keys (API objects, without the keys themselves)")
	return cmd
}

func (c *cli) keysLs(cmd *cobra.Command, o *keysLsOpts) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	l, err := cl.ListKeys(cmd.Context())
	if err != nil {
		return err
	}
	keys := l.Data
	if keys == nil {
		keys = []lt.APIKey{}
	}
	if o.json {
		return writeJSON(c.stdout, keys)
	}
	if len(keys) == 0 {
		_, err := fmt.Fprintln(c.stdout, "No API keys. Create one with 'longhaul keys create NAME --role ROLE'.")
		return err
	}
	now := c.now()
	t := newTable(c.stdout, "ID", "NAME", "ROLE", "PROJECT", "PREFIX", "CREATED", "LAST USED", "STATE")
	for _, k := range keys {
		lastUsed := "never"
		if k.LastUsedAt != nil {
			lastUsed = fmtTime(*k.LastUsedAt)
		}
		t.row(k.ID, k.Name, string(k.Role), k.Project, k.Prefix, fmtTime(k.CreatedAt), lastUsed, keyState(k, now))
	}
	return t.flush()
}

// keyState says whether a key is usable at now, and if not since when.
func keyState(k lt.APIKey, now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked " + fmtTime(*k.RevokedAt)
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return "expired " + fmtTime(*k.ExpiresAt)
	case k.ExpiresAt != nil:
		return "active until " + fmtTime(*k.ExpiresAt)
	default:
		return "active"
	}
}

type keysRevokeOpts struct {
	client *clientOpts
}

func (c *cli) keysRevokeCmd() *cobra.Command {
	o := &keysRevokeOpts{}
	cmd := &cobra.Command{
		Use:     "revoke ID",
		Aliases: []string{"rm"},
		Short:   "Revoke an API key, at once and on every node",
		Long: `Revoke the API key ID (key_..., as 'longhaul keys ls' shows it). Every node
refuses it from the next request on; it stays listed, revoked. Revoking a
revoked key changes nothing.`,
		Example: `  longhaul keys revoke key_01jd8x2k3m4n5p6q7r8s9t0v1w`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE:    func(cmd *cobra.Command, args []string) error { return c.keysRevoke(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	return cmd
}

func (c *cli) keysRevoke(cmd *cobra.Command, o *keysRevokeOpts, id string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	if err := cl.RevokeKey(cmd.Context(), id); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "Key %s revoked.\n", id)
	return err
}

type keysWhoamiOpts struct {
	client *clientOpts
	json   bool
}

func (c *cli) keysWhoamiCmd() *cobra.Command {
	o := &keysWhoamiOpts{}
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Say who the API key is, and what its role may do",
		Long: `Print who the server takes the API key (--api-key, LONGHAUL_API_KEY) for:
its name, role, project and id, and the operations its role may call (GET
/v1/me). Any key may ask but a runner's, which opens its connection and
nothing else. Without a key, a server without
keys answers a local request as the admin "local".`,
		Example: `  longhaul keys whoami
  LONGHAUL_API_KEY=$(cat ci.key) longhaul keys whoami --json | jq -r .role`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.keysWhoami(cmd, o) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the API object")
	return cmd
}

func (c *cli) keysWhoami(cmd *cobra.Command, o *keysWhoamiOpts) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	me, err := cl.Me(cmd.Context())
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, me)
	}
	project := "every project"
	if me.Project != "" {
		project = "project " + me.Project
	}
	id := "no stored key"
	if me.KeyID != "" {
		id = "key " + me.KeyID
	}
	_, err = fmt.Fprintf(c.stdout, "%s (%s), %s, %s\nMay call: %s\n", me.Name, me.Role, project, id, strings.Join(me.Permissions, ", "))
	return err
}
