package main

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command-line reference, docs/cli.md, is written from the command
// tree itself, so it cannot drift from what the commands accept:
// TestCLIReferenceIsCurrent fails while the file differs from what
// writeCLIReference makes, and `go generate ./cmd/longhaul` rewrites it.

//go:generate go test -run ^TestCLIReferenceIsCurrent$ . -args -update-cli-reference

// envVarRE finds the environment variables a flag's help names, as
// "(env LONGHAUL_ADDR)" or "env LONGHAUL_CONFIG;".
var envVarRE = regexp.MustCompile(`\benv ((?:LONGHAUL|OTEL)_[A-Z0-9_]+)`)

// writeCLIReference writes the reference of root's commands: for each, its
// summary, description, usage, examples and flags, as --help shows them,
// then every environment variable a flag names.
func writeCLIReference(w io.Writer, root *cobra.Command) error {
	var cmds []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		cmds = append(cmds, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	var b strings.Builder
	b.WriteString("# Command-line reference\n\n")
	b.WriteString("<!-- Written by `go generate ./cmd/longhaul` from the commands themselves; do not edit:\n")
	b.WriteString("     TestCLIReferenceIsCurrent fails when this file differs from what the commands say. -->\n\n")
	b.WriteString("Every command of `longhaul`, with every flag, as `longhaul COMMAND --help` prints it. ")
	b.WriteString("A flag that names an environment variable falls back to it when the flag is not given; ")
	b.WriteString("[Environment variables](#environment-variables) lists them all.\n\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "- [`%s`](#%s) — %s\n", c.CommandPath(), anchor(c.CommandPath()), c.Short)
	}
	// env maps each variable to the flag it stands for, and the commands
	// that have that flag.
	env := map[string]map[string][]string{}
	for _, c := range cmds {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", c.CommandPath(), c.Short)
		fmt.Fprintf(&b, "```text\n")
		if long := strings.TrimSpace(c.Long); long != "" {
			b.WriteString(long + "\n\n")
		}
		b.WriteString(strings.TrimRight(c.UsageString(), "\n") + "\n```\n")
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			for _, m := range envVarRE.FindAllStringSubmatch(f.Usage, -1) {
				if env[m[1]] == nil {
					env[m[1]] = map[string][]string{}
				}
				env[m[1]]["--"+f.Name] = append(env[m[1]]["--"+f.Name], c.CommandPath())
			}
		})
	}
	b.WriteString("\n## Environment variables\n\n| variable | the flag it stands for |\n| --- | --- |\n")
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var cells []string
		for _, f := range slices.Sorted(maps.Keys(env[name])) {
			cmds := env[name][f]
			if len(cmds) > 4 {
				// --server and --api-key: every command that calls the API.
				cells = append(cells, fmt.Sprintf("`%s` of every command that has it", f))
				continue
			}
			cells = append(cells, fmt.Sprintf("`%s` of `%s`", f, strings.Join(cmds, "`, `")))
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", name, strings.Join(cells, "; "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// anchor is the fragment GitHub gives a heading: lower case, spaces as
// hyphens, other punctuation dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
