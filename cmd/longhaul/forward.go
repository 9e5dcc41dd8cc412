package main

import (
	"github.com/spf13/cobra"

	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

// sandboxForwardCmd is the hidden command the bwrap sandbox runs inside
// itself when its session may use the network: it relays TCP connections on
// the sandbox's loopback to the egress proxy's Unix socket mounted there.
// People never run it; it is not listed in help.
func (c *cli) sandboxForwardCmd() *cobra.Command {
	var listen, socket string
	cmd := &cobra.Command{
		Use:   sandbox.ForwardCommand,
		Short: "Relay a sandbox's proxy connections to the egress proxy's socket (internal)",
		Long: `Run inside a bwrap sandbox by the server, never by people: listen on the
sandbox's loopback, print "ready" and close stdout once listening, and relay
every connection to the egress proxy's Unix socket until killed.`,
		Example: "  longhaul " + sandbox.ForwardCommand + " --listen " + sandbox.ProxyListen + " --socket " + sandbox.ProxySocketPath,
		Hidden:  true,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listen == "" {
				return usagef("%s: --listen is required", sandbox.ForwardCommand)
			}
			if socket == "" {
				return usagef("%s: --socket is required", sandbox.ForwardCommand)
			}
			// The sandbox's start-up script reads stdout to its end: the
			// forwarder announces that it listens, then closes it.
			return sandbox.RunForwarder(cmd.Context(), listen, socket, c.stdout)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", sandbox.ProxyListen, "TCP address to listen on, inside the sandbox")
	cmd.Flags().StringVar(&socket, "socket", sandbox.ProxySocketPath, "Unix socket of the egress proxy to relay to")
	return cmd
}
