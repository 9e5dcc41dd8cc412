package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// filesCmd groups the commands that take over a session's workspace: list,
// download, upload and delete its files, and read any checkpoint's
// snapshot.
func (c *cli) filesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "files",
		Short: "List, download, upload and delete a session's workspace files",
		Long: `Take over a session's workspace. "ls" and "get" read the workspace (or, with
--checkpoint, a checkpoint's snapshot); "put" and "rm" change it, which the
server allows only while the session is paused, idle, waiting or
requires_action. Every change is journaled as workspace.changed (by person,
the path and its sha256), and the model is told at its next call.`,
		Example: `  longhaul files ls ses_01J9Z
  longhaul files ls ses_01J9Z src --checkpoint ckpt_4K2
  longhaul files get ses_01J9Z notes.md -o notes.md
  longhaul files put ses_01J9Z notes.md ./notes.md
  echo "use the staging database" | longhaul files put ses_01J9Z HINTS.txt
  longhaul files rm ses_01J9Z scratch/tmp.txt`,
		Args: usageArgs(noSubcommand),
		RunE: showHelp,
	}
	co := clientFlags(cmd)
	cmd.AddCommand(c.filesLsCmd(co), c.filesGetCmd(co), c.filesPutCmd(co), c.filesRmCmd(co))
	return cmd
}

func (c *cli) filesLsCmd(co *clientOpts) *cobra.Command {
	var asJSON bool
	var checkpoint string
	cmd := &cobra.Command{
		Use:   "ls SESSION_ID [DIR] [--checkpoint CHECKPOINT_ID]",
		Short: "List a directory of a session's workspace (or of a checkpoint's snapshot)",
		Example: `  longhaul files ls ses_01J9Z
  longhaul files ls ses_01J9Z src/pkg
  longhaul files ls ses_01J9Z --checkpoint ckpt_4K2 --json`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.newClient(cmd, co)
			if err != nil {
				return err
			}
			dir := ""
			if len(args) == 2 {
				dir = args[1]
			}
			l, err := cl.ListFiles(cmd.Context(), args[0], checkpoint, dir)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(c.stdout, l)
			}
			if len(l.Entries) == 0 {
				_, err := fmt.Fprintf(c.stdout, "%s is empty.\n", l.Path)
				return err
			}
			t := newTable(c.stdout, "TYPE", "SIZE", "SHA256", "PATH")
			for _, e := range l.Entries {
				p := e.Path
				switch e.Type {
				case lt.FileTypeDir:
					p += "/"
				case lt.FileTypeSymlink:
					p += " -> " + e.Target
				}
				size := ""
				if e.Type == lt.FileTypeFile {
					size = fmtBytes(e.Size)
				}
				t.row(e.Type, size, shortHash(e.SHA256), p)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if l.Truncated {
				_, err := fmt.Fprintf(c.stdout, "(%d of %d entries)\n", len(l.Entries), l.Total)
				return err
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the listing as JSON (the API object)")
	cmd.Flags().StringVar(&checkpoint, "checkpoint", "", "list this checkpoint's snapshot instead of the live workspace")
	return cmd
}

func (c *cli) filesGetCmd(co *clientOpts) *cobra.Command {
	var out, checkpoint string
	cmd := &cobra.Command{
		Use:   "get SESSION_ID PATH [-o FILE] [--checkpoint CHECKPOINT_ID]",
		Short: "Write a workspace file (or a checkpoint's copy of it) to stdout or a file",
		Long: `Download a file of the session's workspace, or of a checkpoint's snapshot
with --checkpoint, checked against its sha256, to stdout or, with -o, to a
file (written whole or not at all).`,
		Example: `  longhaul files get ses_01J9Z report.md
  longhaul files get ses_01J9Z report.md -o report.md
  longhaul files get ses_01J9Z report.md --checkpoint ckpt_4K2 > before.md`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.newClient(cmd, co)
			if err != nil {
				return err
			}
			data, err := cl.GetFile(cmd.Context(), args[0], checkpoint, args[1])
			if err != nil {
				return err
			}
			return c.writeOutput(out, data)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (default: stdout)")
	cmd.Flags().StringVar(&checkpoint, "checkpoint", "", "read this checkpoint's snapshot instead of the live workspace")
	return cmd
}

func (c *cli) filesPutCmd(co *clientOpts) *cobra.Command {
	var action, ifMatch string
	cmd := &cobra.Command{
		Use:   "put SESSION_ID PATH [LOCAL_FILE|-] [--action ACTION_ID]",
		Short: "Upload a file into a session's workspace (from a local file or stdin)",
		Long: `Write PATH in the session's workspace with the content of LOCAL_FILE, or of
stdin when it is "-" or not given. The session must be paused, idle, waiting
or requires_action (409 otherwise). With --action, the upload answers that
input action (one that asks for a file at PATH).`,
		Example: `  longhaul files put ses_01J9Z config/app.yaml ./app.yaml
  longhaul files put ses_01J9Z data.csv ./data.csv --action act_7QH
  printf 'fixed\n' | longhaul files put ses_01J9Z NOTES.md`,
		Args: usageArgs(cobra.RangeArgs(2, 3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var data []byte
			var err error
			if len(args) == 3 && args[2] != "-" {
				data, err = os.ReadFile(args[2])
			} else {
				data, err = io.ReadAll(cmd.InOrStdin())
			}
			if err != nil {
				return fmt.Errorf("read the file to upload: %w", err)
			}
			cl, err := c.newClient(cmd, co)
			if err != nil {
				return err
			}
			ch, err := cl.PutFileIfMatch(cmd.Context(), args[0], args[1], data, action, ifMatch)
			if err != nil {
				return err
			}
			if ch.Unchanged {
				_, err = fmt.Fprintf(c.stdout, "%s already holds these bytes (sha256 %s): nothing changed.\n", ch.Path, shortHash(ch.SHA256))
				return err
			}
			_, err = fmt.Fprintf(c.stdout, "Wrote %s (%s, sha256 %s): journaled as event %d.\n", ch.Path, fmtBytes(ch.Size), shortHash(ch.SHA256), ch.Seq)
			return err
		},
	}
	cmd.Flags().StringVar(&action, "action", "", "the input action (kind file) this upload answers")
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "write only while the file holds these bytes: the full sha256 it held when you read it (\"files ls --json\"), or * while it exists (409 otherwise)")
	return cmd
}

func (c *cli) filesRmCmd(co *clientOpts) *cobra.Command {
	var ifMatch string
	cmd := &cobra.Command{
		Use:   "rm SESSION_ID PATH",
		Short: "Delete a file (or a symlink) of a session's workspace",
		Long: `Delete PATH from the session's workspace (a symlink itself, never its target;
directories are refused). The session must be paused, idle, waiting or
requires_action (409 otherwise).`,
		Example: `  longhaul files rm ses_01J9Z scratch/tmp.txt`,
		Args:    usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.newClient(cmd, co)
			if err != nil {
				return err
			}
			ch, err := cl.DeleteFileIfMatch(cmd.Context(), args[0], args[1], ifMatch)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.stdout, "Deleted %s: journaled as event %d.\n", ch.Path, ch.Seq)
			return err
		},
	}
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "delete only while the file holds these bytes: the full sha256 it held when you read it, or * while it exists (409 otherwise)")
	return cmd
}

// workspaceChangedSummary is the one-line form of workspace.changed in
// "longhaul events": "by person: wrote notes.md (12 B, sha256 3f2a…)".
func workspaceChangedSummary(ev lt.Event) (string, bool) {
	var d lt.WorkspaceChange
	if !decode(ev, &d) || d.Path == "" {
		return "", false
	}
	s := "by " + d.By + ": "
	if d.Op == lt.WorkspaceDelete {
		s += "deleted " + d.Path
	} else {
		s += fmt.Sprintf("wrote %s (%s, sha256 %s)", d.Path, fmtBytes(d.Size), shortHash(d.SHA256))
	}
	if d.ActionID != "" {
		s += ", answering " + d.ActionID
	}
	return s, true
}

// changeNotAppliedSummary is the one-line form of
// workspace.change_not_applied in "longhaul events": "change #12 (write
// notes.md) not applied: conflict, based on sha256:3f2a…, found
// sha256:9c1e…".
func changeNotAppliedSummary(ev lt.Event) (string, bool) {
	var d lt.WorkspaceChangeNotAppliedData
	if !decode(ev, &d) || d.Path == "" {
		return "", false
	}
	if d.Reason == lt.NotAppliedFailed {
		return fmt.Sprintf("change #%d (%s %s) not applied: %s", d.ChangeSeq, d.Op, d.Path, d.Error), true
	}
	return fmt.Sprintf("change #%d (%s %s) not applied: %s, based on %s, found %s",
		d.ChangeSeq, d.Op, d.Path, d.Reason, hashOrWord(d.BasedOn), hashOrWord(d.Found)), true
}

// hashOrWord shortens a "sha256:<hex>" and leaves a word ("absent",
// "dir") as it is.
func hashOrWord(s string) string {
	if hex, ok := strings.CutPrefix(s, "sha256:"); ok {
		return "sha256:" + shortHash(hex)
	}
	return s
}
