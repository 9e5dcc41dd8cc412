package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func (c *cli) agentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List and define agents (named, versioned agent specs)",
		Example: `  longhaul agents ls
  longhaul agents put researcher.yaml
  longhaul agents show researcher
  longhaul agents versions researcher`,
		Args: usageArgs(noSubcommand),
		RunE: showHelp,
	}
	co := clientFlags(cmd)
	cmd.AddCommand(c.agentsLsCmd(co), c.agentsPutCmd(co), c.agentsShowCmd(co), c.agentsVersionsCmd(co))
	return cmd
}

func (c *cli) agentsLsCmd(co *clientOpts) *cobra.Command {
	var (
		asJSON  bool
		project string
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List agents, each at its latest version",
		Example: `  longhaul agents ls
  longhaul agents ls --project support
  longhaul agents ls --json | jq '.[].name'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.newClient(cmd, co)
			if err != nil {
				return err
			}
			l, err := cl.ListAgents(cmd.Context(), project)
			if err != nil {
				return err
			}
			agents := l.Data
			if agents == nil {
				agents = []lt.Agent{}
			}
			if asJSON {
				return writeJSON(c.stdout, agents)
			}
			if len(agents) == 0 {
				_, err := fmt.Fprintln(c.stdout, "No agents. Define one with 'longhaul agents put FILE'.")
				return err
			}
			t := newTable(c.stdout, "PROJECT", "NAME", "VERSION", "MODEL", "TOOLS", "CREATED", "BY")
			for _, a := range agents {
				t.row(a.Project, a.Name, fmt.Sprint(a.Version), modelCell(a.Spec.Model), toolsCell(a.Spec.Tools), fmtTime(a.CreatedAt), creatorCell(&a))
			}
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of agents (API objects)")
	cmd.Flags().StringVar(&project, "project", "", "list only this project's agents (an admin key lists every project's without it)")
	return cmd
}

func (c *cli) agentsPutCmd(co *clientOpts) *cobra.Command {
	var (
		force, asJSON bool
		project       string
	)
	cmd := &cobra.Command{
		Use:   "put FILE",
		Short: "Create an agent, or a new version of it, from a JSON or YAML file",
		Long: `Create an agent, or add a version of it, from a file holding its name and
spec (the body of POST /v1/agents):

  name: researcher
  spec:
    model: {provider: scripted, script: [{text: "Hello"}]}
    instructions: Be brief.
    tools: [{name: shell}]

When the latest version already has this spec, nothing changes (unless
--force). Sessions keep the version they started with.

The agent belongs to the key's project; an admin key puts it in the
file's "project" or --project (default: the default project).`,
		Example: `  longhaul agents put researcher.yaml
  longhaul agents put researcher.json --force`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req lt.PutAgentRequest
			doc, err := decodeFile(args[0], &req)
			if err != nil {
				return err
			}
			if req.Name == "" {
				return doc.errorAt("name", "required")
			}
			switch {
			case project == "":
			case req.Project == "":
				req.Project = project
			case req.Project != project:
				return usagef("agents put: the file names project %q and --project %q", req.Project, project)
			}
			cl, err := c.newClient(cmd, co)
			if err != nil {
				return err
			}
			var a *lt.Agent
			created := true
			if force {
				a, err = cl.PutAgent(cmd.Context(), &req)
			} else {
				a, created, err = cl.EnsureAgent(cmd.Context(), &req)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(c.stdout, a)
			}
			if !created {
				_, err = fmt.Fprintf(c.stdout, "Agent %s is unchanged at version %d.\n", a.Name, a.Version)
				return err
			}
			_, err = fmt.Fprintf(c.stdout, "Agent %s version %d created.\n", a.Name, a.Version)
			return err
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "create a new version even when the spec is unchanged")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the agent as JSON")
	cmd.Flags().StringVar(&project, "project", "", "the project of the agent (when the file names none)")
	return cmd
}

// creatorCell names who defined the agent's version, or "-" when unknown.
func creatorCell(a *lt.Agent) string {
	if a.CreatedBy == nil {
		return "-"
	}
	return actorLabel(a.CreatedBy)
}

func modelCell(m lt.ModelSpec) string {
	if m.Name == "" {
		return m.Provider
	}
	return m.Provider + "/" + m.Name
}

func toolsCell(tools []lt.ToolSpec) string {
	if len(tools) == 0 {
		return "-"
	}
	names := ""
	for i, t := range tools {
		if i > 0 {
			names += ", "
		}
		names += t.Name
	}
	return truncate(names, 60)
}

func (c *cli) agentsShowCmd(co *clientOpts) *cobra.Command {
	var (
		asJSON  bool
		project string
		version int
	)
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show an agent's definition, at its latest version or another",
		Long: `Show an agent: its version, who defined it and when, and its whole spec (as
JSON, which 'longhaul agents put' reads back inside {"name": …, "spec": …}).`,
		Example: `  longhaul agents show researcher
  longhaul agents show researcher --version 2
  longhaul agents show researcher --json | jq .spec.tools`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("version") && version < 1 {
				return usagef("--version %d: versions are numbered from 1", version)
			}
			cl, err := c.newClient(cmd, co)
			if err != nil {
				return err
			}
			a, err := cl.GetAgent(cmd.Context(), project, args[0], version)
			if err != nil {
				return suggestAgent(cmd.Context(), cl, project, args[0], err)
			}
			if asJSON {
				return writeJSON(c.stdout, a)
			}
			fmt.Fprintf(c.stdout, "Agent:    %s\nProject:  %s\nVersion:  %d\nCreated:  %s by %s\nModel:    %s\nTools:    %s\nSpec:\n",
				a.Name, a.Project, a.Version, fmtTime(a.CreatedAt), creatorCell(a), modelCell(a.Spec.Model), toolsCell(a.Spec.Tools))
			return writeJSON(c.stdout, a.Spec)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the agent as JSON (the API object)")
	cmd.Flags().StringVar(&project, "project", "", "the agent's project (an admin key; default: the key's project, or default)")
	cmd.Flags().IntVar(&version, "version", 0, "the version to show (default: the latest)")
	return cmd
}

func (c *cli) agentsVersionsCmd(co *clientOpts) *cobra.Command {
	var (
		asJSON  bool
		project string
	)
	cmd := &cobra.Command{
		Use:   "versions NAME",
		Short: "List every version of an agent, the latest first",
		Long: `List the versions of an agent (GET /v1/agents/{name}/versions): each 'agents
put' that changed the spec added one; a session keeps the version it started
with. 'longhaul agents show NAME --version N' shows one whole.`,
		Example: `  longhaul agents versions researcher
  longhaul agents versions researcher --json | jq '.[0].spec'`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.newClient(cmd, co)
			if err != nil {
				return err
			}
			l, err := cl.ListAgentVersions(cmd.Context(), project, args[0])
			if err != nil {
				return suggestAgent(cmd.Context(), cl, project, args[0], err)
			}
			if asJSON {
				return writeJSON(c.stdout, l.Data)
			}
			t := newTable(c.stdout, "VERSION", "CREATED", "BY", "MODEL", "TOOLS", "INSTRUCTIONS")
			for _, a := range l.Data {
				t.row(fmt.Sprint(a.Version), fmtTime(a.CreatedAt), creatorCell(&a), modelCell(a.Spec.Model), toolsCell(a.Spec.Tools), orDash(truncate(a.Spec.Instructions, 50)))
			}
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of the versions (API objects)")
	cmd.Flags().StringVar(&project, "project", "", "the agent's project (an admin key; default: the key's project, or default)")
	return cmd
}

// suggestAgent adds to err, when it says that no agent is called name, the
// names of the project's agents close to it ("did you mean researcher?"),
// or how to list them. Any other error, or a failure to list, leaves err
// as it is.
func suggestAgent(ctx context.Context, cl *client.Client, project, name string, err error) error {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		return err
	}
	// GET /v1/agents/{name} answers 404; a session naming an unknown
	// agent is a 400 on the field "agent".
	if ae.Status != http.StatusNotFound && !(ae.Status == http.StatusBadRequest && ae.Field == "agent") {
		return err
	}
	l, lerr := cl.ListAgents(ctx, project)
	if lerr != nil {
		return err
	}
	var names []string
	for _, a := range l.Data {
		names = append(names, a.Name)
	}
	close := closeNames(name, names)
	switch {
	case len(close) > 0:
		return &hintedError{err: err, hint: fmt.Sprintf("did you mean %s?", quotedList(close))}
	case len(names) == 0:
		return &hintedError{err: err, hint: "there are no agents yet: define one with 'longhaul agents put FILE'."}
	default:
		return &hintedError{err: err, hint: "'longhaul agents ls' lists the agents."}
	}
}

// closeNames returns the names at most two edits away from typed, or that
// start with it, ignoring case (as cobra suggests commands), in the order
// given. The distance is config.go's, the one of the config file's
// did-you-mean.
func closeNames(typed string, names []string) []string {
	var out []string
	t := strings.ToLower(typed)
	for _, n := range names {
		l := strings.ToLower(n)
		if l != t && (strings.HasPrefix(l, t) || editDistance(t, l) <= 2) {
			out = append(out, n)
		}
	}
	return out
}

// quotedList writes names for a sentence: "a", "a" or "b", "a", "b" or "c".
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
