package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

var updateCLIReference = flag.Bool("update-cli-reference", false, "rewrite docs/cli.md from the command tree")

// cliReferencePath is docs/cli.md, from this package's directory.
var cliReferencePath = filepath.Join("..", "..", "docs", "cli.md")

// referenceRoot is the command tree as a person's shell sees it: no
// environment, so no default comes from the machine the reference is
// written on.
func referenceRoot() *cobra.Command {
	c := &cli{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	root := c.rootCmd()
	root.InitDefaultHelpCmd()
	return root
}

// TestCLIReferenceIsCurrent holds docs/cli.md to the commands: a flag or a
// command added, renamed or explained anew fails here until `go generate
// ./cmd/longhaul` writes the file again.
func TestCLIReferenceIsCurrent(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, writeCLIReference(&buf, referenceRoot()))
	if *updateCLIReference {
		require.NoError(t, os.WriteFile(cliReferencePath, buf.Bytes(), 0o644))
		return
	}
	got, err := os.ReadFile(cliReferencePath)
	require.NoError(t, err, "run: go generate ./cmd/longhaul")
	if !bytes.Equal(got, buf.Bytes()) {
		t.Fatalf("docs/cli.md is stale: run go generate ./cmd/longhaul (or go test ./cmd/longhaul -run TestCLIReferenceIsCurrent -args -update-cli-reference)")
	}
	text := buf.String()
	for _, want := range []string{"## longhaul serve\n", "--sandbox string", "--vault-key-file string", "--otlp-endpoint string",
		"--webhook-allow-port", "| `LONGHAUL_CONFIG` | `--config` of `longhaul serve` |", "## longhaul agents versions\n"} {
		require.Contains(t, text, want)
	}
}

// TestFlagUsagesNameNoArgument: pflag takes a back-quoted word in a flag's
// help as the name of its value (--no-migrate `longhaul migrate`), which
// --help and docs/cli.md would then show as if the flag took it.
func TestFlagUsagesNameNoArgument(t *testing.T) {
	t.Parallel()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			require.NotContains(t, f.Usage, "`", "%s --%s: quote with '…' instead", c.CommandPath(), f.Name)
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(referenceRoot())
	require.True(t, strings.Contains(cliOK(t, "serve", "--help"), "--no-migrate  "), "--no-migrate shows no argument")
}
