package main

import (
	"fmt"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func (c *cli) agentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List and define agents (named, versioned agent specs)",
		Example: `  longhaul agents ls
  longhaul agents put researcher.yaml`,
		Args: usageArgs(noSubcommand),
		RunE: showHelp,
	}
	co := clientFlags(cmd)
	cmd.AddCommand(c.agentsLsCmd(co), c.agentsPutCmd(co))
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
				by := "-"
				if a.CreatedBy != nil {
					by = actorLabel(a.CreatedBy)
				}
				t.row(a.Project, a.Name, fmt.Sprint(a.Version), modelCell(a.Spec.Model), toolsCell(a.Spec.Tools), fmtTime(a.CreatedAt), by)
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
