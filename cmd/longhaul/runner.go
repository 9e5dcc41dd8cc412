package main

import (
	"fmt"
	"log/slog"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/internal/buildinfo"
	"github.com/longhaul-dev/longhaul/internal/runner"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// runnerKeyEnv holds a runner's key: from the environment, it stays out
// of the process list.
const runnerKeyEnv = "LONGHAUL_RUNNER_KEY"

type runnerOpts struct {
	server, key, name, data, sandbox, sandboxUser string
	labels                                        []string
	capacity, blobCacheMB                         int
	insecure                                      bool
}

func (c *cli) runnerCmd() *cobra.Command {
	o := &runnerOpts{}
	cmd := &cobra.Command{
		Use:   "runner --server URL --key KEY --name NAME [--label L]... [--capacity N] [--data DIR]",
		Short: "Run a self-managed environment: connect out to a server and run its sessions' commands here",
		Long: `Run a runner: a self-managed environment on this machine. It connects OUT to
the server (no port opens here) over one WebSocket, with a key of the runner
role (longhaul keys create NAME --role runner), announces its name, labels and
capacity, and runs the commands the server sends in this machine's sandbox
(bwrap when it works, else local), each session in a workspace of its own
under --data. It takes and restores the workspaces' snapshots here, sending
the server only the blobs it lacks and keeping a bounded cache of them under
--data (--blob-cache-mb), so a restore fetches only what this machine lacks.
The journal, the vault and every secret stay on the server.

When the connection drops, the runner connects again, waiting longer each
time (exponential backoff with jitter, up to a minute). It stops with an
error when the server refuses it for good: its key is refused or revoked,
a newer runner of the same key connected under the same name (the newer
one wins), or the server needs a newer runner protocol than this build
speaks (upgrade longhaul on this machine). A server older than the runner
(one that does not know protocol versions) refuses its hello: the runner
tries again with backoff, saying to upgrade the server, and connects once
it is. A name held by another key's live runner is tried again later.

A plain http:// server is refused unless it is loopback (the key would
travel in the clear); --insecure allows it.`,
		Example: `  export LONGHAUL_RUNNER_KEY=lh_...
  longhaul runner --server https://longhaul.example.com --name box1 --label gpu --label linux
  longhaul runner --server http://127.0.0.1:8080 --key "$KEY" --name laptop --capacity 2 --data /var/lib/longhaul-runner`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.runRunner(cmd, o) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.server, "server", defaultServer, "URL of the Longhaul server (env LONGHAUL_SERVER)")
	fs.StringVar(&o.key, "key", "", "API key of the runner role (env "+runnerKeyEnv+", which keeps it out of the process list)")
	fs.StringVar(&o.name, "name", "", "the runner's name within its key's project: a-z, 0-9, '.', '_', '-' (required)")
	fs.StringArrayVar(&o.labels, "label", nil, "a label agents may ask for (environment.runner.labels); repeat for several")
	fs.IntVar(&o.capacity, "capacity", runtime.NumCPU(), "how many sessions' environments the runner holds open at once, and how many of their calls it runs at once (default: the number of CPUs); a session past it waits for a free one")
	fs.StringVar(&o.data, "data", "longhaul-runner-data", "directory of the sessions' workspaces and of the cache of snapshot blobs")
	fs.IntVar(&o.blobCacheMB, "blob-cache-mb", runner.DefaultBlobCacheBytes>>20, "the most the cache of snapshot blobs under --data holds, in MiB (the least recently used go first)")
	fs.StringVar(&o.sandbox, "sandbox", "auto", "where commands run: auto (bwrap when it works, else local with a warning), bwrap (refuse to start without it) or local (no isolation)")
	fs.BoolVar(&o.insecure, "insecure", false, "allow a plain http:// server that is not loopback (the key then travels in the clear)")
	fs.StringVar(&o.sandboxUser, "sandbox-user", fmt.Sprintf("%d:%d", sandbox.DefaultUID, sandbox.DefaultGID), "UID[:GID]: the unprivileged host user a runner running as root runs its bwrap sandboxes as; never 0")
	return cmd
}

func (c *cli) runRunner(cmd *cobra.Command, o *runnerOpts) error {
	server := c.flagOrEnv(cmd, "server", o.server, "LONGHAUL_SERVER")
	key := c.flagOrEnv(cmd, "key", o.key, runnerKeyEnv)
	if key == "" {
		return usagef("--key: required (or set %s)", runnerKeyEnv)
	}
	if o.name == "" {
		return usagef("--name: required")
	}
	switch o.sandbox {
	case "auto", "bwrap", "local":
	default:
		return usagef("--sandbox %q: want auto, bwrap or local", o.sandbox)
	}
	if o.blobCacheMB < 1 {
		return usagef("--blob-cache-mb %d: must be at least 1", o.blobCacheMB)
	}
	uid, gid, err := parseSandboxUser(o.sandboxUser)
	if err != nil {
		return usagef("--sandbox-user %q: %v", o.sandboxUser, err)
	}
	log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	backend, warning := sandbox.Detect(cmd.Context(), sandbox.DetectOptions{
		Local: o.sandbox == "local", Bwrap: sandbox.BwrapOptions{UID: uid, GID: gid},
	})
	if o.sandbox == "bwrap" && backend.Name() != "bwrap" {
		return fmt.Errorf("--sandbox bwrap: %s", warning)
	}
	if warning != "" {
		log.Warn(warning)
	}
	version := buildinfo.Read().Version
	r, err := runner.New(runner.Config{
		Server: server, Insecure: o.insecure, Key: key, DataDir: o.data, Backend: backend, Logger: log,
		BlobCacheBytes: int64(o.blobCacheMB) << 20,
		Hello:          link.Hello{Name: o.name, Labels: o.labels, Capacity: o.capacity, Version: version, Protocol: link.ProtocolVersion},
	})
	if err != nil {
		return usagef("%s", flagNames(err.Error()))
	}
	return r.Run(cmd.Context())
}

// flagNames says a runner configuration error in the command's terms: the
// fields are its flags.
func flagNames(msg string) string {
	msg = strings.TrimPrefix(msg, "runner config: ")
	for field, flag := range map[string]string{
		"hello.name": "--name", "hello.labels": "--label", "hello.capacity": "--capacity", "hello.version": "version",
		"server:": "--server:", "data:": "--data:", "key:": "--key:",
	} {
		if strings.HasPrefix(msg, field) {
			return flag + strings.TrimPrefix(msg, field)
		}
	}
	return msg
}

type runnersOpts struct {
	client  *clientOpts
	project string
	json    bool
}

func (c *cli) runnersCmd() *cobra.Command {
	o := &runnersOpts{}
	cmd := &cobra.Command{
		Use:   "runners",
		Short: "List the runners (self-managed environments) connected to the server",
		Long: `List the runners connected to any node of the server: name, project, labels,
capacity, how many sessions have their environments open on it (their ids
with --json, as of its node's last check of the connection), the node each
is connected to, when it connected and when it was last seen, its build
and the version of the runner protocol it speaks. A runner whose node died stops being listed within three of the
server's runner check intervals (15 s by default). Needs an admin or operator
key; an operator sees its own project's runners.`,
		Example: `  longhaul runners
  longhaul runners --json | jq -r '.[] | select(.labels | index("gpu")) | .name'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.runnersLs(cmd, o) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.project, "project", "", "an admin's filter: only this project's runners")
	cmd.Flags().BoolVar(&o.json, "json", false, "print a JSON array of runners (API objects)")
	return cmd
}

func (c *cli) runnersLs(cmd *cobra.Command, o *runnersOpts) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	l, err := cl.ListRunners(cmd.Context(), o.project)
	if err != nil {
		return err
	}
	runners := l.Data
	if runners == nil {
		runners = []lt.Runner{}
	}
	if o.json {
		return writeJSON(c.stdout, runners)
	}
	if len(runners) == 0 {
		_, err := fmt.Fprintln(c.stdout, "No runner is connected. Start one with 'longhaul runner --server URL --name NAME' and a runner key.")
		return err
	}
	t := newTable(c.stdout, "NAME", "PROJECT", "LABELS", "CAPACITY", "SESSIONS", "NODE", "CONNECTED", "LAST SEEN", "VERSION", "PROTOCOL")
	for _, r := range runners {
		labels := strings.Join(r.Labels, ",")
		if labels == "" {
			labels = "-"
		}
		t.row(r.Name, r.Project, labels, fmt.Sprint(r.Capacity), fmt.Sprint(len(r.Sessions)), r.Node, fmtTime(r.ConnectedAt), fmtTime(r.LastSeenAt), r.Version, fmt.Sprint(r.Protocol))
	}
	return t.flush()
}
