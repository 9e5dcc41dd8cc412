package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	lhnode "github.com/longhaul-dev/longhaul/internal/node"
)

// This file chooses the store (SQLite in a data directory, or PostgreSQL
// given by a URL) for serve, migrate, export and import, opens it through
// internal/node (which also decides, in one place, whether this binary may
// use a store's schema), and holds the migrate command. The CLI imports no
// storage driver itself.

// storeEnv names the environment variable that gives --store.
const storeEnv = "LONGHAUL_STORE"

// storeFlagUsage is the help of --store, the same for every command.
const storeFlagUsage = "PostgreSQL connection URL, postgres://USER@HOST:PORT/DB?search_path=SCHEMA (env " + storeEnv +
	"; default: SQLite in the data directory); a password in it is never printed, but prefer PGPASSWORD or ~/.pgpass"

// storeOpts are the flags that choose a store.
type storeOpts struct {
	url     string
	dataDir string
}

// storeChoice is which store a command uses: PostgreSQL when url is set,
// else SQLite in dataDir.
type storeChoice struct {
	url     string
	dataDir string
}

// storeFlags registers --store and --data on cmd.
func storeFlags(cmd *cobra.Command, dataUsage string) *storeOpts {
	o := &storeOpts{}
	fs := cmd.Flags()
	fs.StringVar(&o.url, "store", "", storeFlagUsage)
	fs.StringVar(&o.dataDir, "data", defaultDataDir, dataUsage)
	return o
}

// isPostgresURL reports whether s selects the PostgreSQL store.
func isPostgresURL(s string) bool { return lhnode.IsPostgresURL(s) }

// storeChoice reads the flags (and LONGHAUL_STORE, LONGHAUL_DATA). An
// explicit --data without --store means SQLite even when LONGHAUL_STORE is
// set: a flag wins over the environment. A URL is checked by its scheme
// only and never echoed: it may hold a password.
func (c *cli) storeChoice(cmd *cobra.Command, o *storeOpts) (storeChoice, error) {
	dataGiven := cmd.Flags().Changed("data")
	storeGiven := cmd.Flags().Changed("store")
	ch := storeChoice{dataDir: c.flagOrEnv(cmd, "data", o.dataDir, "LONGHAUL_DATA")}
	if storeGiven || !dataGiven {
		ch.url = c.flagOrEnv(cmd, "store", o.url, storeEnv)
	}
	if ch.url != "" && !isPostgresURL(ch.url) {
		source := "--store"
		if !storeGiven {
			source = storeEnv
		}
		return ch, usagef("%s: want a postgres:// or postgresql:// URL (the value is not shown: it may hold a password); leave it empty for SQLite in the data directory", source)
	}
	return ch, nil
}

// openedStore is an open store and how to name it to a person.
type openedStore = lhnode.Store

// openStore opens the chosen store without migrating it. For SQLite,
// create says whether a missing database may be created (serve, migrate)
// or is an error (a command that reads one).
func openStore(ctx context.Context, ch storeChoice, log *slog.Logger, create bool) (*openedStore, error) {
	s, err := lhnode.OpenStore(ctx, lhnode.StoreChoice{URL: ch.url, DataDir: ch.dataDir}, log, create)
	if err != nil {
		return nil, unreachableStore(err) // names the database, never the password
	}
	return s, nil
}

// unreachableStore gives an error that says PostgreSQL could not be
// reached the hint that fits it, instead of the client commands' hint about
// a Longhaul server (printError's, for any dial error).
func unreachableStore(err error) error {
	var op *net.OpError
	if err == nil || !(errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED)) {
		return err
	}
	return &exitError{code: exitFailure, msg: err.Error() +
		"\nHint: is PostgreSQL running at that address, and does it accept this node's connections? (--store, " + storeEnv + ")"}
}

// checkSchema decides whether this binary may use a store's schema,
// migrating an older one when migrate is set (see lhnode.CheckSchema).
func checkSchema(ctx context.Context, s *openedStore, migrate bool) error {
	return lhnode.CheckSchema(ctx, s, migrate)
}

func (c *cli) migrateCmd() *cobra.Command {
	var status bool
	cmd := &cobra.Command{
		Use:   "migrate [--store URL | --data DIR] [--status]",
		Short: "Apply the database migrations this longhaul brings (or show the schema version)",
		Long: `Apply the schema migrations that this longhaul binary brings to a store: the
SQLite database in a data directory (--data, the default), or the PostgreSQL
schema a URL names (--store or LONGHAUL_STORE; the tables live in the first
schema of its search_path). Migrations run in order, each in its own
transaction; running it again does nothing. A schema newer than this binary
is refused.

"longhaul serve" migrates at start too, unless given --no-migrate. To upgrade
several nodes sharing PostgreSQL: run the new binary's "longhaul migrate"
once, then restart the nodes one by one with the new binary (started with
--no-migrate, a node refuses a schema that is not its own). Nodes still on
the old binary keep running their sessions, but report not ready on /readyz
until they are replaced.

With --status it changes nothing and prints the store's schema version and
this binary's.`,
		Example: `  longhaul migrate --status
  longhaul migrate --data /var/lib/longhaul
  LONGHAUL_STORE='postgres://longhaul@db:5432/longhaul?search_path=longhaul' longhaul migrate`,
		Args: usageArgs(cobra.NoArgs),
	}
	o := storeFlags(cmd, "data directory of the SQLite store (env LONGHAUL_DATA)")
	cmd.Flags().BoolVar(&status, "status", false, "print the schema version and change nothing")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ch, err := c.storeChoice(cmd, o)
		if err != nil {
			return err
		}
		return c.migrate(cmd.Context(), ch, status)
	}
	return cmd
}

func (c *cli) migrate(ctx context.Context, ch storeChoice, status bool) error {
	if ch.url == "" && !status {
		// Not under a running serve, which migrated the database itself.
		if err := os.MkdirAll(ch.dataDir, 0o700); err != nil {
			return fmt.Errorf("create data directory: %w", err)
		}
		unlock, err := lockDataDir(ch.dataDir)
		if err != nil {
			return err
		}
		defer unlock()
	}
	s, err := openStore(ctx, ch, nil, !status)
	if err != nil {
		return err
	}
	defer s.Close()
	before, known, err := s.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("read the schema version of %s: %w", s, err)
	}
	fmt.Fprintf(c.stdout, "store:   %s\n", s)
	if status {
		fmt.Fprintf(c.stdout, "schema:  version %d; this longhaul's is %d: %s\n", before, known, schemaAdvice(before, known))
		return nil
	}
	if err := checkSchema(ctx, s, true); err != nil {
		return err
	}
	after, _, err := s.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("read the schema version of %s: %w", s, err)
	}
	if after == before {
		fmt.Fprintf(c.stdout, "schema:  version %d, up to date: nothing to do\n", after)
		return nil
	}
	fmt.Fprintf(c.stdout, "schema:  version %d -> %d (%d migration(s) applied)\n", before, after, after-before)
	return nil
}

// schemaAdvice says what a schema version means for this binary.
func schemaAdvice(current, known int) string {
	switch {
	case current == known:
		return "up to date"
	case current > known:
		return "NEWER than this binary: upgrade longhaul"
	case current == 0:
		return "not created yet: run `longhaul migrate`"
	}
	return fmt.Sprintf("%d migration(s) pending: run `longhaul migrate`", known-current)
}
