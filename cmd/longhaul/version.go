package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/internal/buildinfo"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// versionText is one build on one line: "v1.4.0 (revision 6d047d8e1f, 2026-12-01T10:00:00Z, modified; go1.26.0)".
func versionText(v *lt.BuildInfo) string {
	var details []string
	if v.Revision != "" {
		details = append(details, "revision "+v.Revision)
	}
	if v.RevisionTime != "" {
		details = append(details, v.RevisionTime)
	}
	if v.Modified {
		details = append(details, "modified")
	}
	built := v.GoVersion
	if len(details) > 0 {
		built = strings.Join(details, ", ") + "; " + built
	}
	return fmt.Sprintf("%s (%s)", v.Version, built)
}

// versionReport is `longhaul version --json`.
type versionReport struct {
	Client lt.BuildInfo  `json:"client"`
	Server *lt.BuildInfo `json:"server,omitempty"`
}

func (c *cli) versionCmd() *cobra.Command {
	var (
		asJSON     bool
		clientOnly bool
		co         *clientOpts
	)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this program and of the server it talks to",
		Long: `Print the module version and VCS revision this program was built from (as
'longhaul --version' does), then the server's (GET /v1/version), which
may be another build. With --client, or when no server answers, only this
program's: a server that cannot be reached is noted, not an error.`,
		Example: `  longhaul version
  longhaul version --client
  longhaul version --server https://longhaul.example.com --json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep := versionReport{Client: buildinfo.Read()}
			var serverErr error
			if !clientOnly {
				cl, err := c.newClient(cmd, co)
				if err != nil {
					return err
				}
				rep.Server, serverErr = cl.Version(cmd.Context())
			}
			if asJSON {
				return writeJSON(c.stdout, rep)
			}
			fmt.Fprintf(c.stdout, "client: longhaul %s\n", versionText(&rep.Client))
			switch {
			case rep.Server != nil:
				fmt.Fprintf(c.stdout, "server: longhaul %s\n", versionText(rep.Server))
			case serverErr != nil:
				fmt.Fprintf(c.stderr, "server: not reached (%v)\n", serverErr)
			}
			return nil
		},
	}
	co = clientFlags(cmd)
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only this program's version; ask no server")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"client": …, "server": …} (build objects as GET /v1/version's)`)
	return cmd
}

func (c *cli) completionCmd() *cobra.Command {
	shells := []string{"bash", "zsh", "fish", "powershell"}
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script for longhaul",
		Long: `Print the script that makes SHELL complete longhaul's commands, flags and
their values. Load it in the current shell, or install it once:

  bash        source <(longhaul completion bash)
              longhaul completion bash > /etc/bash_completion.d/longhaul
  zsh         longhaul completion zsh > "${fpath[1]}/_longhaul"
              (compinit must be enabled: autoload -U compinit; compinit)
  fish        longhaul completion fish > ~/.config/fish/completions/longhaul.fish
  powershell  longhaul completion powershell | Out-String | Invoke-Expression`,
		Example: `  source <(longhaul completion bash)
  longhaul completion zsh > "${fpath[1]}/_longhaul"`,
		ValidArgs: shells,
		Args:      usageArgs(cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs)),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(c.stdout, true)
			case "zsh":
				return root.GenZshCompletion(c.stdout)
			case "fish":
				return root.GenFishCompletion(c.stdout, true)
			default: // powershell: OnlyValidArgs refused anything else
				return root.GenPowerShellCompletionWithDesc(c.stdout)
			}
		},
	}
}
