package main

import (
	"fmt"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type steerOpts struct {
	client    *clientOpts
	interrupt bool
	json      bool
}

func (c *cli) steerCmd() *cobra.Command {
	o := &steerOpts{}
	cmd := &cobra.Command{
		Use:   "steer SESSION_ID MESSAGE",
		Short: "Send a message to a session's running turn",
		Long: `Send a message to the turn a session is running (or has queued, or that
waits for an action or a signal). It is journaled (turn.steered) and reaches
the model verbatim, as your message, at its next call, after everything that
came before it. A tool call in flight is never cut: the message goes in at
the model call after it.

With --interrupt, a model call in flight is abandoned (what it was sent is
still counted) and made again with the message. A session waiting for an
action or a signal keeps waiting: the message is given when the turn next
calls the model.

A session with no turn to steer (idle, failed, cancelled) answers 409: send
a follow-up turn instead.`,
		Example: `  longhaul steer ses_01J9Z "Use the 2025 figures, not 2024"
  longhaul steer ses_01J9Z "Stop: answer with what you have" --interrupt`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.steer(cmd, o, args[0], args[1]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.interrupt, "interrupt", false, "abandon a model call in flight and make it again with the message")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the session as JSON")
	return cmd
}

func (c *cli) steer(cmd *cobra.Command, o *steerOpts, id, message string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	s, err := cl.Steer(cmd.Context(), id, &lt.SteerRequest{Input: message, Interrupt: o.interrupt})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, s)
	}
	when := "at its next call"
	if o.interrupt {
		when = "now if a model call is in flight, else at its next call"
	}
	_, err = fmt.Fprintf(c.stdout, "Steered %s (status: %s): the model reads the message %s.\n", s.ID, s.Status, when)
	return err
}
