package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/internal/export"
	"github.com/longhaul-dev/longhaul/internal/store"
)

func (c *cli) exportCmd() *cobra.Command {
	var (
		out       string
		subagents bool
	)
	cmd := &cobra.Command{
		Use:   "export SESSION [--store URL | --data DIR] [-o FILE]",
		Short: "Write a session, from the store, to a file that `longhaul import` reads",
		Long: `Write a session to a file, read straight from a store (SQLite in a data
directory, or PostgreSQL with --store), to move it to another store with
"longhaul import". The file is JSON Lines: a header, the session (its pinned
spec and state), every event of its journal in order, every projection (turns,
actions, effects, artifacts, checkpoints), and every blob it references — large
event payloads, artifacts' contents and the workspace snapshots of its
checkpoints, tree by tree and chunk by chunk — each with its SHA-256.

Only that session is exported: not its sub-agents (unless --with-subagents),
its agent's definition, the vault's secrets or webhook endpoints. The
workspace travels as its checkpoints' snapshots: the node that runs the
session next restores it from the last one. For a session with a webhook_url
the file holds its signing secret: keep the file private (it is written with
mode 0600).

Export a session that no node is running (stopped, idle, waiting or
finished): one that changes while it is read is read again, and the export
fails if it keeps changing.`,
		Example: `  longhaul export ses_01jabc... -o session.jsonl
  longhaul export ses_01jabc... --with-subagents --data /var/lib/longhaul -o tree.jsonl
  longhaul export ses_01jabc... | longhaul import --store "$LONGHAUL_STORE" -`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}
	o := storeFlags(cmd, "data directory of the SQLite store to read (env LONGHAUL_DATA)")
	cmd.Flags().StringVarP(&out, "output", "o", "-", "file to write (\"-\": standard output)")
	cmd.Flags().BoolVar(&subagents, "with-subagents", false, "export the session's sub-agents too (its children, theirs...), parents first")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ch, err := c.storeChoice(cmd, o)
		if err != nil {
			return err
		}
		return c.runExport(cmd.Context(), ch, args[0], out, subagents)
	}
	return cmd
}

func (c *cli) runExport(ctx context.Context, ch storeChoice, id, out string, subagents bool) (err error) {
	s, err := openStore(ctx, ch, nil, false)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := checkSchema(ctx, s, false); err != nil {
		return err
	}
	w := c.stdout
	var commit func() error
	if out != "-" {
		// Written beside the target and renamed into place: a failed
		// export leaves no partial file under the name asked for.
		f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".tmp-*")
		if err != nil {
			return fmt.Errorf("create %s: %w", out, err)
		}
		defer func() {
			if err != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}()
		w = f
		commit = func() error {
			if err := f.Sync(); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			return os.Rename(f.Name(), out)
		}
	}
	sum, err := export.Export(ctx, s, id, w, &export.Options{WithSubagents: subagents})
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w (in %s)", err, s)
	}
	if err != nil {
		return err
	}
	if commit != nil {
		if err := commit(); err != nil {
			return err
		}
	}
	dest := out
	if out == "-" {
		dest = "standard output"
	}
	// The summary goes to stderr: stdout may be the file itself.
	fmt.Fprintf(c.stderr, "Exported %s from %s to %s: %s.\n", plural(len(sum.Sessions), "session"), s, dest, describeCounts(sum))
	printWarnings(c.stderr, sum.Warnings)
	return nil
}

func (c *cli) importCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "import [--store URL | --data DIR] FILE",
		Short: "Read a session exported by `longhaul export` into a store",
		Long: `Read a file written by "longhaul export" into a store (SQLite in a data
directory, or PostgreSQL with --store; migrated to this longhaul's schema:
see "longhaul migrate"). FILE "-" reads standard input.

The whole file is checked before anything is written: its format version,
every line, each journal's seqs (1, 2, 3... without a gap), every blob's
SHA-256 and size, that every blob a session references is in the file, and
that the file is complete. A session that exists in the store already is
refused (import never overwrites), as is a damaged or truncated file. Then
the blobs are written, and each session with its whole journal in one
transaction.

An imported session is not leased: a node of the target store picks it up if
it was runnable, and restores its workspace from its last checkpoint's
snapshot when it next runs a tool. Run the import while no node serves the
target (for SQLite it refuses to run beside one), so that no node notifies
the session's webhooks before the import has set their state.`,
		Example: `  longhaul import --store 'postgres://longhaul@db:5432/longhaul?search_path=longhaul' session.jsonl
  longhaul import --data /var/lib/longhaul --dry-run session.jsonl`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}
	o := storeFlags(cmd, "data directory of the SQLite store to write (env LONGHAUL_DATA)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the file and the store, and write nothing")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ch, err := c.storeChoice(cmd, o)
		if err != nil {
			return err
		}
		return c.runImport(cmd.Context(), ch, args[0], cmd.InOrStdin(), dryRun)
	}
	return cmd
}

func (c *cli) runImport(ctx context.Context, ch storeChoice, path string, stdin io.Reader, dryRun bool) error {
	f, err := openImportFile(path, stdin)
	if err != nil {
		return err
	}
	defer f.close()
	s, err := openStore(ctx, ch, nil, false)
	if err != nil {
		return err
	}
	defer s.Close()
	if ch.url == "" && !dryRun {
		unlock, err := lockDataDir(ch.dataDir)
		if err != nil {
			return fmt.Errorf("%w: stop the node first (import writes while no node serves the store)", err)
		}
		defer unlock()
	}
	if err := checkSchema(ctx, s, false); err != nil {
		return err
	}
	sum, err := export.Import(ctx, s, f.f, f.size, &export.ImportOptions{DryRun: dryRun})
	if err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	verb := "Imported"
	if dryRun {
		verb = "Checked (nothing written)"
	}
	fmt.Fprintf(c.stdout, "%s %s into %s: %s", verb, plural(len(sum.Sessions), "session"), s, describeCounts(sum))
	if !dryRun {
		fmt.Fprintf(c.stdout, ", %d new", sum.NewBlobs)
	}
	fmt.Fprintln(c.stdout, ".")
	for _, id := range sum.Sessions {
		fmt.Fprintf(c.stdout, "  %s\n", id)
	}
	printWarnings(c.stderr, sum.Warnings)
	return nil
}

// importInput is the file import reads, which it reads twice: standard
// input is spooled to a temporary file first.
type importInput struct {
	f     *os.File
	name  string
	size  int64
	close func()
}

func openImportFile(path string, stdin io.Reader) (*importInput, error) {
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("%s is not a regular file", path)
		}
		return &importInput{f: f, name: path, size: fi.Size(), close: func() { f.Close() }}, nil
	}
	tmp, err := os.CreateTemp("", "longhaul-import-*")
	if err != nil {
		return nil, fmt.Errorf("spool standard input: %w", err)
	}
	done := func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}
	n, err := io.Copy(tmp, stdin)
	if err != nil {
		done()
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	return &importInput{f: tmp, name: "standard input", size: n, close: done}, nil
}

func describeCounts(sum *export.Summary) string {
	return fmt.Sprintf("%s, %s, %s (%.1f MiB)", plural(sum.Events, "event"), plural(sum.Docs, "doc"),
		plural(sum.Blobs, "blob"), float64(sum.BlobBytes)/(1<<20))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func printWarnings(w io.Writer, warnings []string) {
	for _, m := range warnings {
		fmt.Fprintln(w, "warning:", m)
	}
}
