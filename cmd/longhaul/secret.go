package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// maxSecretValue is the vault's limit on a value (8 KiB); reading stops
// just past it.
const maxSecretValue = 8 << 10

func (c *cli) secretCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "secret",
		Aliases: []string{"secrets"},
		Short:   "Manage the server's vault of secrets (set, ls, rm)",
		Long: `Manage the secrets in the server's vault. A secret is a value (an API key, a
token, a password) bound to the hosts it may be sent to and to how it is put
into a request: a header with a format, a bearer token, or HTTP basic
authentication. Agents name the secrets they may use (environment.secrets),
and the http_request tool injects each one only into requests to its hosts,
from outside the sandbox: the agent, its sandbox and its journal never see a
value, and the API never returns one.

A secret belongs to a project (--project, default "default"), and only the
sessions of that project can use it; the same name in another project is
another secret.

Values are encrypted at rest (AES-256-GCM) with the vault key: the
LONGHAUL_VAULT_KEY environment variable of 'longhaul serve' (base64 of 32
bytes, e.g. from 'openssl rand -base64 32'), or else the key file, by default
DATA/vault.key, created with a random key at first use. Back the key up, and
keep it apart from the database and its backups: whoever has both has the
secrets, and without the key the secrets must all be set again.`,
		Example: `  pass show github/token | longhaul secret set GITHUB_TOKEN --host api.github.com --bearer
  longhaul secret ls
  longhaul secret rm GITHUB_TOKEN
  longhaul secret set GITHUB_TOKEN --project support --host api.github.com --bearer < support.token`,
		Args: usageArgs(noSubcommand),
		RunE: showHelp,
	}
	cmd.AddCommand(c.secretSetCmd(), c.secretLsCmd(), c.secretRmCmd())
	return cmd
}

type secretSetOpts struct {
	client    *clientOpts
	hosts     []string
	header    string
	format    string
	bearer    bool
	basicUser string
	loginUser string
	fromEnv   string
	project   string
	json      bool
}

func (c *cli) secretSetCmd() *cobra.Command {
	o := &secretSetOpts{}
	cmd := &cobra.Command{
		Use:   "set NAME --host HOST (--bearer | --basic-user USER | --header NAME [--format F] | --login-user USER)",
		Short: "Create or replace a secret, reading its value from standard input",
		Long: `Create the secret NAME in the server's vault, or replace its value, hosts and
injection. NAME is upper case, like an environment variable (GITHUB_TOKEN).

The value is read from standard input (one trailing line break is dropped),
or from the environment variable that --from-env names; never from a flag or
an argument, where it would stay in the shell's history and show in the
process list. Standard input must not be a terminal: pipe the value in, or
redirect a file. Values are 8 bytes to 8 KiB, on one line.

--host (repeatable) names a host the secret may be sent to: an exact name
(api.github.com), "*.example.com" for every subdomain of example.com, or an
IP address, each optionally with a port (127.0.0.1:8443, [::1]:8443), which
then binds the secret to that port only. How the value goes into a request:

  --bearer                       Authorization: Bearer VALUE
  --basic-user USER              Authorization: Basic base64(USER:VALUE)
  --header NAME [--format F]     NAME: F, with {value} in F replaced by the
                                 value (default "{value}")
  --login-user USER              never into a request: a web site's login,
                                 the value being the password, which the
                                 browser tool's login action types into the
                                 site's form (the model never sees it)

With --bearer or --basic-user, --header names another header than
Authorization (e.g. Proxy-Authorization).`,
		Example: `  pass show github/token | longhaul secret set GITHUB_TOKEN --host api.github.com --bearer
  longhaul secret set DOCS_KEY --host docs.example.com --header X-Api-Key < docs.key
  longhaul secret set LEGACY_TOKEN --host '*.legacy.example.com' --header Authorization --format 'token {value}' --from-env LEGACY_TOKEN
  longhaul secret set REGISTRY_PASSWORD --host registry.example.com --basic-user ci --from-env REGISTRY_PASSWORD
  longhaul secret set SHOP_LOGIN --host shop.example.com --login-user buyer@example.com < shop.password`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.secretSet(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringArrayVar(&o.hosts, "host", nil, "host the secret may be sent to (repeatable): api.example.com, *.example.com or an IP address, optionally :PORT (that port only)")
	fs.BoolVar(&o.bearer, "bearer", false, "inject as \"Authorization: Bearer VALUE\"")
	fs.StringVar(&o.basicUser, "basic-user", "", "inject as HTTP basic authentication with this user name and the value as password")
	fs.StringVar(&o.loginUser, "login-user", "", "a web site's login for the browser tool with this user name, the value being the password (never put into a request)")
	fs.StringVar(&o.header, "header", "", "header to inject the value into (with --bearer or --basic-user: instead of Authorization)")
	fs.StringVar(&o.format, "format", "", "with --header: the header value, {value} standing for the secret (default \"{value}\")")
	fs.StringVar(&o.fromEnv, "from-env", "", "read the value from this environment variable instead of standard input")
	fs.StringVar(&o.project, "project", "", "the project whose sessions may use the secret (default: the default project)")
	fs.BoolVar(&o.json, "json", false, "print the secret's metadata as JSON (the API object)")
	return cmd
}

func (c *cli) secretSet(cmd *cobra.Command, o *secretSetOpts, name string) error {
	inject, err := o.injection(cmd)
	if err != nil {
		return err
	}
	if len(o.hosts) == 0 {
		return usagef("secret set: give at least one --host the secret may be sent to")
	}
	value, err := c.secretValue(cmd, o.fromEnv)
	if err != nil {
		return err
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	s, created, err := cl.PutSecret(cmd.Context(), name, &lt.PutSecretRequest{Value: value, Hosts: o.hosts, Inject: inject, Project: o.project})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, s)
	}
	verb := "replaced"
	if created {
		verb = "created"
	}
	_, err = fmt.Fprintf(c.stdout, "Secret %s %s in project %s: sent as %s to %s.\n", s.Name, verb, s.Project, injectionText(s.Inject), strings.Join(s.Hosts, ", "))
	return err
}

// injection builds the injection the flags describe, refusing combinations
// that mean nothing.
func (o *secretSetOpts) injection(cmd *cobra.Command) (*lt.SecretInjection, error) {
	basic := cmd.Flags().Changed("basic-user")
	if cmd.Flags().Changed("login-user") {
		if o.bearer || basic || o.header != "" || o.format != "" {
			return nil, usagef("secret set: --login-user goes alone (a login is typed into a site's form, never put into a header)")
		}
		return &lt.SecretInjection{Login: &lt.SecretLogin{Username: o.loginUser}}, nil
	}
	switch {
	case o.bearer && basic:
		return nil, usagef("secret set: give one of --bearer and --basic-user")
	case (o.bearer || basic) && o.format != "":
		return nil, usagef("secret set: --format goes with --header alone (--bearer and --basic-user have their own)")
	case !o.bearer && !basic && o.header == "":
		return nil, usagef("secret set: say how to inject the secret: --bearer, --basic-user USER, --header NAME [--format F] or --login-user USER")
	}
	inj := &lt.SecretInjection{Header: o.header, Format: o.format, Bearer: o.bearer}
	if basic {
		inj.Basic = &lt.SecretBasicAuth{Username: o.basicUser}
	}
	return inj, nil
}

// secretValue reads the value from the environment variable env, or from
// standard input, which must not be a terminal (the value would be echoed on
// the screen).
func (c *cli) secretValue(cmd *cobra.Command, env string) (string, error) {
	if env != "" {
		v := c.getenv(env)
		if v == "" {
			return "", usagef("secret set: --from-env %s: the variable is not set or empty", env)
		}
		return v, nil
	}
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return "", usagef("secret set: the value is read from standard input, which is a terminal: pipe it in (pass show x | longhaul secret set ...), redirect a file (< token.txt) or use --from-env VAR")
		}
	}
	data, err := io.ReadAll(io.LimitReader(in, maxSecretValue+3))
	if err != nil {
		return "", fmt.Errorf("read the value from standard input: %w", err)
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	switch {
	case len(data) == 0:
		return "", usagef("secret set: standard input is empty: pipe the value in, or use --from-env VAR")
	case len(data) > maxSecretValue:
		return "", usagef("secret set: the value on standard input is longer than %d bytes", maxSecretValue)
	}
	return string(data), nil
}

// injectionText shows how a secret goes into requests, with VALUE for the
// value.
func injectionText(inj lt.SecretInjection) string {
	header := inj.Header
	if header == "" {
		header = "Authorization"
	}
	switch {
	case inj.Login != nil:
		return "a login form (user " + inj.Login.Username + ")"
	case inj.Bearer:
		return header + ": Bearer VALUE"
	case inj.Basic != nil:
		return header + ": Basic base64(" + inj.Basic.Username + ":VALUE)"
	default:
		format := inj.Format
		if format == "" {
			format = "{value}"
		}
		return header + ": " + strings.ReplaceAll(format, "{value}", "VALUE")
	}
}

type secretLsOpts struct {
	client  *clientOpts
	project string
	json    bool
}

func (c *cli) secretLsCmd() *cobra.Command {
	o := &secretLsOpts{}
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the vault's secrets: names, hosts and injection, never values",
		Example: `  longhaul secret ls
  longhaul secret ls --project support
  longhaul secret ls --json | jq -r '.[].name'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.secretLs(cmd, o) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print a JSON array of secrets (API objects, without values)")
	cmd.Flags().StringVar(&o.project, "project", "", "list only this project's secrets (default: every project's)")
	return cmd
}

func (c *cli) secretLs(cmd *cobra.Command, o *secretLsOpts) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	l, err := cl.ListSecrets(cmd.Context(), o.project)
	if err != nil {
		return err
	}
	secrets := l.Data
	if secrets == nil {
		secrets = []lt.Secret{}
	}
	if o.json {
		return writeJSON(c.stdout, secrets)
	}
	if len(secrets) == 0 {
		_, err := fmt.Fprintln(c.stdout, "No secrets. Add one with 'longhaul secret set NAME --host HOST --bearer < file'.")
		return err
	}
	t := newTable(c.stdout, "PROJECT", "NAME", "HOSTS", "INJECTED AS", "UPDATED")
	for _, s := range secrets {
		t.row(s.Project, s.Name, strings.Join(s.Hosts, ", "), injectionText(s.Inject), fmtTime(s.UpdatedAt))
	}
	return t.flush()
}

type secretRmOpts struct {
	client  *clientOpts
	project string
}

func (c *cli) secretRmCmd() *cobra.Command {
	o := &secretRmOpts{}
	cmd := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Delete a secret from the vault",
		Long: `Delete a secret from the vault. From then on no request carries it, and
agents that name it in environment.secrets cannot use it until it is set again.`,
		Example: `  longhaul secret rm GITHUB_TOKEN
  longhaul secret rm GITHUB_TOKEN --project support`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.secretRm(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.project, "project", "", "the project of the secret (default: the default project)")
	return cmd
}

func (c *cli) secretRm(cmd *cobra.Command, o *secretRmOpts, name string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	if err := cl.DeleteSecret(cmd.Context(), o.project, name); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "Secret %s deleted from project %s.\n", name, cmp.Or(o.project, lt.DefaultProject))
	return err
}
