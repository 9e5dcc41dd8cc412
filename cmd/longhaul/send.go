package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type sendOpts struct {
	client *clientOpts
	detach bool
	json   bool
}

func (c *cli) sendCmd() *cobra.Command {
	o := &sendOpts{}
	cmd := &cobra.Command{
		Use:   "send SESSION_ID INPUT",
		Short: "Send a follow-up message to a session and follow the turn it starts",
		Long: `Send a follow-up message to a session (POST /v1/sessions/{id}/turns): it
starts a new turn with the whole conversation so far, or waits in the queue
while a turn runs. Then, like 'longhaul run', print that turn's events as
they happen and its output.

To redirect the turn that is running now instead, use 'longhaul steer'.

The exit code is 0 when the turn completed, 1 when it failed or was cancelled.`,
		Example: `  longhaul send ses_01J9Z "Now make it half as long"
  longhaul send ses_01J9Z --detach "Add a section on pricing"`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.send(cmd, o, args[0], args[1]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.detach, "detach", false, "print the new turn's id and return without following")
	cmd.Flags().BoolVar(&o.json, "json", false, "print events as JSON lines (with --detach: the turn as JSON)")
	return cmd
}

func (c *cli) send(cmd *cobra.Command, o *sendOpts, sessionID, input string) error {
	if strings.TrimSpace(input) == "" {
		return usagef("INPUT is empty: say what the agent should do next")
	}
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	turn, err := cl.CreateTurn(ctx, sessionID, &lt.CreateTurnRequest{Input: input})
	if err != nil {
		return err
	}
	if o.detach {
		return c.printCreated(turn, turn.ID, o.json)
	}
	return c.followAndReport(ctx, cl, sessionID, turn.ID, o.json, func(notes io.Writer) {
		fmt.Fprintf(notes, "turn %s of session %s is %s; following it\n", turn.ID, sessionID, turn.Status)
	})
}
