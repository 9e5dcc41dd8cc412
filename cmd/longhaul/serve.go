package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/vault"
)

// Defaults of `serve`.
const (
	defaultAddr    = "127.0.0.1:8080"
	defaultDataDir = "longhaul-data"
)

type serveOpts struct {
	addr     string
	dataDir  string
	config   string
	apiKeys  []string
	logLevel string
	ping     time.Duration
	vaultKey string
	sandbox  string
	// webhookAllowPrivate lists private addresses webhooks may reach.
	webhookAllowPrivate []string
	// otlpEndpoint is where turn traces are exported ("": per OTEL_*).
	otlpEndpoint string
	// webhookAllowPorts are ports webhooks may reach besides 80 and 443.
	webhookAllowPorts []int
}

func (c *cli) serveCmd() *cobra.Command {
	o := &serveOpts{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Longhaul server (HTTP API, workers, embedded SQLite)",
		Long: `Run the Longhaul server: the HTTP API and the workers that run sessions, with
an embedded SQLite database in the data directory (DATA/longhaul.db, session
workspaces in DATA/workspaces, this node's id in DATA/node-id).

Agents listed in the config file are registered at start, each only when its
spec differs from the latest stored version:

  agents:
    - name: researcher
      spec:
        model: {provider: scripted, script: [{text: "Hello"}]}
        instructions: Be brief.
        tools: [{name: shell}, {name: write_file}]

Without API keys the server accepts requests from loopback addresses only.
SIGINT or SIGTERM drains it: it stops accepting requests, lets running steps
finish (or leaves them resumable) and exits 0.`,
		Example: `  longhaul serve
  longhaul serve --addr 0.0.0.0:8080 --data /var/lib/longhaul --api-key "$KEY"
  LONGHAUL_API_KEYS=key1,key2 longhaul serve --config agents.yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return c.serve(cmd, o) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.addr, "addr", defaultAddr, "address to listen on, HOST:PORT (env LONGHAUL_ADDR)")
	fs.StringVar(&o.dataDir, "data", defaultDataDir, "data directory: database, workspaces, node id (env LONGHAUL_DATA)")
	fs.StringVar(&o.config, "config", "", "config file with agents to register (env LONGHAUL_CONFIG; default "+defaultConfigFile+" if it exists)")
	fs.StringArrayVar(&o.apiKeys, "api-key", nil, "API key accepted as a bearer token; repeat for several (env LONGHAUL_API_KEYS, comma-separated)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error (env LONGHAUL_LOG_LEVEL)")
	fs.DurationVar(&o.ping, "ping-interval", 15*time.Second, "how often an idle event stream gets a \": ping\" comment")
	fs.StringVar(&o.sandbox, "sandbox", "auto", "where shell commands run: auto (bwrap when it works, else local with a warning), bwrap (refuse to start without it) or local (no isolation: development only)")
	fs.StringVar(&o.vaultKey, "vault-key-file", "", "the vault's key file (default DATA/vault.key, created on first use; env LONGHAUL_VAULT_KEY gives the key itself, base64): back it up, apart from the database")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "export each turn as an OpenTelemetry trace to this OTLP collector URL, e.g. http://localhost:4318 (default: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT when set, else no export)")
	fs.StringArrayVar(&o.webhookAllowPrivate, "webhook-allow-private", nil, "IP address that webhooks may reach although it is private, loopback or link-local (e.g. 127.0.0.1 for a local receiver); repeat for several")
	fs.IntSliceVar(&o.webhookAllowPorts, "webhook-allow-port", nil, "destination port that webhooks may reach besides 80 and 443 (e.g. the port of a local receiver); repeat for several")
	return cmd
}

func (c *cli) serve(cmd *cobra.Command, o *serveOpts) error {
	ctx := cmd.Context()
	addr := c.flagOrEnv(cmd, "addr", o.addr, "LONGHAUL_ADDR")
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usagef("--addr %q: want HOST:PORT: %v", addr, err)
	}
	dataDir := c.flagOrEnv(cmd, "data", o.dataDir, "LONGHAUL_DATA")
	level, err := parseLogLevel(c.flagOrEnv(cmd, "log-level", o.logLevel, "LONGHAUL_LOG_LEVEL"))
	if err != nil {
		return err
	}
	keys := o.apiKeys
	if !cmd.Flags().Changed("api-key") {
		keys = splitList(c.getenv("LONGHAUL_API_KEYS"))
	}
	for i, k := range keys {
		if k == "" || strings.ContainsAny(k, " \t\r\n") {
			return usagef("API key %d is empty or contains whitespace", i+1)
		}
	}
	for _, p := range o.webhookAllowPorts {
		if p < 1 || p > 65535 {
			return usagef("--webhook-allow-port %d: want a port number (1-65535)", p)
		}
	}
	switch o.sandbox {
	case "auto", "bwrap", "local":
	default:
		return usagef("--sandbox %q: want auto, bwrap or local", o.sandbox)
	}
	cf, err := c.serverConfig(cmd, o)
	if err != nil {
		return err
	}
	otlp, err := c.otlpFromEnv(o.otlpEndpoint)
	if err != nil {
		return err
	}

	// Logs never carry a secret's value: they go through the redactor of
	// the vault's secrets, kept current by the node.
	red := &atomic.Pointer[redact.Redactor]{}
	logOut := redact.NewWriter(c.stderr, red.Load)
	defer logOut.Flush()
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	n, err := startNode(ctx, nodeConfig{
		redactor: red,
		addr:     addr, dataDir: dataDir, apiKeys: keys, pingInterval: o.ping, config: cf, logger: log,
		vaultKeyFile: o.vaultKey, vaultKeyEnv: c.getenv(vault.KeyEnv), sandbox: o.sandbox, otlp: otlp,
		webhookAllowPrivate: o.webhookAllowPrivate, webhookAllowPorts: o.webhookAllowPorts,
	})
	if err != nil {
		return err
	}
	vaultKey := "key from " + vault.KeyEnv
	if c.getenv(vault.KeyEnv) == "" {
		vaultKey = o.vaultKey
		if vaultKey == "" {
			vaultKey = filepath.Join(n.dataDir, vault.DefaultKeyFile)
		}
		vaultKey = "key in " + vaultKey + " (back it up, apart from the database)"
	}
	printServeBanner(c.stdout, n, cf, len(keys), vaultKey)

	select {
	case <-ctx.Done():
		log.Info("signal received; draining", "http_timeout", httpDrainTimeout, "engine_timeout", engineDrainTimeout)
		if err := n.stop(ctx); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, "Longhaul stopped.")
		return nil
	case err := <-n.served:
		// Serve returned without Shutdown: the listener failed. Put the
		// result back for stop, which waits for it.
		n.served <- err
		stopErr := n.stop(context.WithoutCancel(ctx))
		return errors.Join(fmt.Errorf("serve http: %w", err), stopErr)
	}
}

// serverConfig loads the config file: the one given by --config or
// LONGHAUL_CONFIG (which must exist), else longhaul.yaml when it exists, else
// none.
func (c *cli) serverConfig(cmd *cobra.Command, o *serveOpts) (*configFile, error) {
	path := c.flagOrEnv(cmd, "config", o.config, "LONGHAUL_CONFIG")
	if path == "" {
		if _, err := os.Stat(defaultConfigFile); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		path = defaultConfigFile
	}
	return loadConfig(path)
}

func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, usagef("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// splitList splits a comma-separated environment variable, dropping empty
// items and the spaces around items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func printServeBanner(w io.Writer, n *node, cf *configFile, keys int, vaultKey string) {
	fmt.Fprintf(w, "Longhaul is listening on %s\n", n.url)
	fmt.Fprintf(w, "  data:    %s (database %s, workspaces in %s)\n", n.dataDir, dbFile, workspacesDir+string(filepath.Separator))
	fmt.Fprintf(w, "  node:    %s\n", n.nodeID)
	sb := n.sandbox
	if sb == "local" {
		sb += " (commands are NOT isolated: install bubblewrap)"
	}
	fmt.Fprintf(w, "  sandbox: %s\n", sb)
	fmt.Fprintf(w, "  vault:   %s\n", vaultKey)
	if cf != nil {
		var parts []string
		for _, a := range n.agents {
			state := "unchanged"
			if a.created {
				state = "registered"
			}
			parts = append(parts, fmt.Sprintf("%s v%d (%s)", a.name, a.version, state))
		}
		if len(parts) == 0 {
			parts = []string{"none"}
		}
		fmt.Fprintf(w, "  agents:  %s, from %s\n", strings.Join(parts, ", "), cf.doc.name)
	}
	if keys == 0 {
		fmt.Fprintln(w, "  access:  no API keys configured: accepting requests from loopback addresses only")
	} else {
		fmt.Fprintf(w, "  access:  %d API key(s); requests need \"Authorization: Bearer <key>\"\n", keys)
	}
	fmt.Fprintln(w, "Press Ctrl-C to stop; running steps finish first.")
}
