package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/buildinfo"
)

func main() {
	// First of all, before any goroutine of ours or child process starts:
	// the vault's key leaves the environment (see vaultenv.go).
	vaultKey, err := hideVaultKey()
	if err != nil && vaultKey == "" {
		fmt.Fprintf(os.Stderr, "longhaul: %v\n", err)
		os.Exit(exitFailure)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "longhaul: warning: %v\n", err)
	}
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling: a second
		// Ctrl-C during a slow drain kills the process at once.
		<-ctx.Done()
		stop()
	}()
	err = execute(ctx, os.Args[1:], os.Stdout, os.Stderr, vaultKeyGetenv(vaultKey))
	os.Exit(reportError(ctx, os.Stderr, err))
}

// run is execute over the process environment as it is.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return execute(ctx, args, stdout, stderr, os.Getenv)
}

// execute runs the command line args (without the program name). It writes
// results to stdout and diagnostics (logs, progress notes) to stderr, and
// returns the error that ended the command without printing it: main hands
// it to reportError. The environment is read through getenv, so tests can
// set LONGHAUL_* variables without touching the process environment, and
// main can hand over the vault's key it took out of the environment.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	c := &cli{stdout: stdout, stderr: stderr, getenv: getenv, now: time.Now}
	root := c.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT, as shells report it
)

// usageError is a mistake on the command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// exitError ends a command with a code after the command has already told
// the user why (a failed turn, for example): reportError prints nothing more
// unless msg is set.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// hintedError is an error with advice for the person who hit it, printed
// after the error itself ("did you mean …?").
type hintedError struct {
	err  error
	hint string
}

func (e *hintedError) Error() string { return e.err.Error() }
func (e *hintedError) Unwrap() error { return e.err }

// reportError prints err for a person and returns the process exit code.
func reportError(ctx context.Context, stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "Error:", ee.msg)
		}
		return ee.code
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "interrupted")
		return exitInterrupted
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "Error:", ue.err)
		fmt.Fprintln(stderr, "Run 'longhaul --help' (or 'longhaul COMMAND --help') for usage.")
		return exitUsage
	}
	printError(stderr, err)
	return exitFailure
}

// usageArgs wraps a cobra positional-argument check so that its failure is a
// usage error (exit code 2) that names the command.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{fmt.Errorf("%s: %w", cmd.CommandPath(), err)}
		}
		return nil
	}
}

// defaultServer is where client commands look for the API when neither
// --server nor LONGHAUL_SERVER says otherwise; `longhaul serve` listens there
// by default.
const defaultServer = "http://127.0.0.1:8080"

// cli holds what every command writes to and reads from. Commands never touch
// os.Stdout, os.Stderr or os.Getenv directly, so tests run them in-process.
type cli struct {
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// now is the clock of relative times in the output ("expires in 5m").
	now func() time.Time
}

func (c *cli) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "longhaul",
		Short: "Durable task system for long-running AI agents",
		Long: `Longhaul runs AI agents whose work outlives one model response, one process
and one browser tab: every step is journaled, every side effect is in a ledger,
and every decision a person must take is a required action.

"longhaul serve" runs the server (SQLite in a data directory); the other
commands talk to it over its HTTP API.`,
		Example: `  longhaul serve
  longhaul demo
  longhaul run --agent researcher "Write a competitor brief for ACME"
  longhaul ls --status requires_action
  longhaul inbox`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          usageArgs(noSubcommand),
		RunE:          showHelp,
		// The completion command is ours (version.go), with the
		// examples and exit codes of every other command.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		// --version prints this program's build, as `longhaul version
		// --client` does.
		Version: versionText(new(buildinfo.Read())),
	}
	root.SetVersionTemplate("longhaul {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%s: %w", cmd.CommandPath(), err)}
	})
	root.SetHelpCommand(&cobra.Command{
		Use:     "help [COMMAND]...",
		Short:   "Show help for a command",
		Example: "  longhaul help\n  longhaul help agents put",
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || target == nil || len(rest) > 0 {
				return usagef("help: unknown command %q", args)
			}
			return target.Help()
		},
	})
	root.AddCommand(
		c.serveCmd(),
		c.demoCmd(),
		c.runCmd(),
		c.sendCmd(),
		c.lsCmd(),
		c.showCmd(),
		c.cancelCmd(),
		c.steerCmd(),
		c.pauseCmd(),
		c.resumeCmd(),
		c.constrainCmd(),
		c.reviewCmd(),
		c.forkCmd(),
		c.signalCmd(),
		c.checkpointsCmd(),
		c.getCmd(),
		c.eventsCmd(),
		c.traceCmd(),
		c.reportCmd(),
		c.actionsCmd(),
		c.respondCmd(),
		c.decideCmd(),
		c.inboxCmd(),
		c.actionCmd(),
		c.approveCmd(),
		c.rejectCmd(),
		c.stopCmd(),
		c.continueCmd(),
		c.unpinCmd(),
		c.answerCmd(),
		c.allowCmd(),
		c.denyCmd(),
		c.budgetCmd(),
		c.effectsCmd(),
		c.agentsCmd(),
		c.secretCmd(),
		c.keysCmd(),
		c.auditCmd(),
		c.runnersCmd(),
		c.runnerCmd(),
		c.artifactsCmd(),
		c.artifactCmd(),
		c.filesCmd(),
		c.benchCmd(),
		c.migrateCmd(),
		c.openapiCmd(),
		c.exportCmd(),
		c.importCmd(),
		c.sandboxForwardCmd(),
		c.versionCmd(),
		c.completionCmd(),
	)
	return root
}

// noSubcommand is the argument check of commands that only group others: any
// argument is an unknown subcommand.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	// cobra applies its default distance (2) only to the suggestions of
	// its own unknown-command error, which Args checks like this one
	// replace: SuggestionsFor alone would suggest only prefixes.
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return errors.New(msg)
}

// showHelp is the action of a command that only groups others.
func showHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// clientOpts are the flags of every command that calls the API.
type clientOpts struct {
	server string
	apiKey string
}

// clientFlags registers --server and --api-key on cmd, persistent so that
// the subcommands of a group inherit them.
func clientFlags(cmd *cobra.Command) *clientOpts {
	o := &clientOpts{}
	fs := cmd.PersistentFlags()
	fs.StringVar(&o.server, "server", defaultServer, "URL of the Longhaul server (env LONGHAUL_SERVER)")
	fs.StringVar(&o.apiKey, "api-key", "", "API key, sent as a bearer token (env LONGHAUL_API_KEY)")
	return o
}

// newClient builds the API client from the flags, falling back to the
// environment for a flag that was not given.
func (c *cli) newClient(cmd *cobra.Command, o *clientOpts) (*client.Client, error) {
	server := c.flagOrEnv(cmd, "server", o.server, "LONGHAUL_SERVER")
	key := c.flagOrEnv(cmd, "api-key", o.apiKey, "LONGHAUL_API_KEY")
	cl, err := client.New(server, &client.Config{APIKey: key})
	if err != nil {
		return nil, usagef("--server %q: %v", server, err)
	}
	return cl, nil
}

// flagOrEnv returns the flag's value when it was given, else the environment
// variable's when it is set, else the flag's default. A secret from the
// environment thus never shows up as a default in --help.
func (c *cli) flagOrEnv(cmd *cobra.Command, flag, value, env string) string {
	if f := cmd.Flags().Lookup(flag); f != nil && f.Changed {
		return value
	}
	if v := c.getenv(env); v != "" {
		return v
	}
	return value
}
