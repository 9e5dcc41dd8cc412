package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func (c *cli) artifactsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "artifacts SESSION_ID",
		Short: "List a session's artifacts (versioned, content-addressed outputs)",
		Example: `  longhaul artifacts ses_01J9Z
  longhaul artifacts ses_01J9Z --json | jq -r '.[] | select(.final) | .id'`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}
	co := clientFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of artifacts (API objects)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := c.newClient(cmd, co)
		if err != nil {
			return err
		}
		l, err := cl.ListArtifacts(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		arts := l.Data
		if arts == nil {
			arts = []lt.Artifact{}
		}
		if asJSON {
			return writeJSON(c.stdout, arts)
		}
		if len(arts) == 0 {
			_, err := fmt.Fprintln(c.stdout, "No artifacts.")
			return err
		}
		t := newTable(c.stdout, "ID", "NAME", "VERSION", "SIZE", "TYPE", "FINAL", "SHA256", "CREATED")
		for _, a := range arts {
			final := "no"
			if a.Final {
				final = "yes"
			}
			t.row(a.ID, a.Name, fmt.Sprint(a.Version), fmtBytes(a.Size), a.ContentType, final, shortHash(a.SHA256), fmtTime(a.CreatedAt))
		}
		return t.flush()
	}
	return cmd
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func (c *cli) artifactCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "artifact",
		Short:   "Download an artifact",
		Example: `  longhaul artifact get art_5VQ -o report.md`,
		Args:    usageArgs(noSubcommand),
		RunE:    showHelp,
	}
	co := clientFlags(cmd)
	cmd.AddCommand(c.artifactGetCmd(co))
	return cmd
}

// getCmd is "longhaul get ARTIFACT_ID": the short form of "artifact get".
func (c *cli) getCmd() *cobra.Command {
	get := c.artifactGetCmd(nil)
	get.Example = `  longhaul get art_5VQ > report.md
  longhaul get art_5VQ -o report.md`
	return get
}

// artifactGetCmd downloads an artifact; a nil co means the command has its
// own client flags (the top-level "get").
func (c *cli) artifactGetCmd(co *clientOpts) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "get ARTIFACT_ID [-o FILE]",
		Short: "Write an artifact's content to stdout or a file",
		Long: `Download an artifact's bytes, checked against its sha256, to stdout or, with
-o, to a file (written whole or not at all).`,
		Example: `  longhaul artifact get art_5VQ
  longhaul artifact get art_5VQ -o report.md`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.newClient(cmd, co)
			if err != nil {
				return err
			}
			data, _, err := cl.ArtifactContent(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.writeOutput(out, data)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (default: stdout)")
	if co == nil {
		co = clientFlags(cmd)
	}
	return cmd
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory and a rename, so that a failed download never leaves a
// truncated file where a good one was.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeOutput writes a download to stdout (out empty or "-") or whole to
// the file out, saying on stderr what it wrote.
func (c *cli) writeOutput(out string, data []byte) error {
	if out == "" || out == "-" {
		_, err := c.stdout.Write(data)
		return err
	}
	if err := writeFileAtomic(out, data); err != nil {
		return err
	}
	_, err := fmt.Fprintf(c.stderr, "Wrote %s (%s).\n", out, fmtBytes(int64(len(data))))
	return err
}
