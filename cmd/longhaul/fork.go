package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type forkOpts struct {
	client     *clientOpts
	checkpoint string
	input      string
	webhookURL string
	json       bool
}

func (c *cli) forkCmd() *cobra.Command {
	o := &forkOpts{}
	cmd := &cobra.Command{
		Use:   "fork SESSION_ID --checkpoint CKPT_ID [--input TEXT] [--webhook-url URL]",
		Short: "Start a new session from a checkpoint of another",
		Long: `Create a session from one of a session's checkpoints: it starts with the
journal up to the checkpoint and the workspace as the checkpoint saw it. The
effects before the checkpoint are inherited as done and never run again. With
--input the fork starts a new turn at once; otherwise it goes on from where
the checkpoint stood (or waits for a turn, if the checkpoint ended one).
See a session's checkpoints with 'longhaul checkpoints SESSION_ID'.

The fork's notifications go to its origin's webhook_url, or to
--webhook-url (--webhook-url '' for none), signed with a secret of the
fork's own: it is printed once, here (webhook_secret with --json).`,
		Example: `  longhaul fork ses_01J9Z --checkpoint ckpt_3f2a --input "Try the other supplier"`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.checkpoint == "" {
				return usagef("--checkpoint is required")
			}
			cl, err := c.newClient(cmd, o.client)
			if err != nil {
				return err
			}
			req := &lt.ForkRequest{CheckpointID: o.checkpoint, Input: o.input}
			if cmd.Flags().Changed("webhook-url") {
				req.WebhookURL = &o.webhookURL
			}
			s, err := cl.Fork(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(c.stdout, s)
			}
			if _, err = fmt.Fprintf(c.stdout, "Forked %s from %s at checkpoint %s (status %s).\n", s.ID, args[0], o.checkpoint, s.Status); err != nil {
				return err
			}
			if s.WebhookSecret != "" {
				_, err = fmt.Fprintf(c.stdout, "Its notifications go to %s, signed with %s (shown only now).\n", s.WebhookURL, s.WebhookSecret)
			}
			return err
		},
	}
	o.client = clientFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.checkpoint, "checkpoint", "", "the checkpoint to fork from (required)")
	fs.StringVar(&o.input, "input", "", "start a new turn in the fork with this input")
	fs.StringVar(&o.webhookURL, "webhook-url", "", "send the fork's notifications here instead of to its origin's webhook_url ('' for none)")
	fs.BoolVar(&o.json, "json", false, "print the new session as JSON")
	return cmd
}

type checkpointsOpts struct {
	client *clientOpts
	json   bool
}

func (c *cli) checkpointsCmd() *cobra.Command {
	o := &checkpointsOpts{}
	cmd := &cobra.Command{
		Use:   "checkpoints SESSION_ID",
		Short: "List a session's checkpoints",
		Long: `List the session's checkpoints in journal order: one after every step and
turn, and the ones the agent named, each with its journal position and its
workspace snapshot. Fork from one with 'longhaul fork'.`,
		Example: `  longhaul checkpoints ses_01J9Z`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.newClient(cmd, o.client)
			if err != nil {
				return err
			}
			l, err := cl.ListCheckpoints(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(c.stdout, l.Data)
			}
			t := newTable(c.stdout, "ID", "SEQ", "KIND", "NAME", "FILES", "SIZE", "CREATED")
			for _, cp := range l.Data {
				t.row(cp.ID, fmt.Sprint(cp.EventSeq), cp.Kind, truncate(cp.Name, 40), fmt.Sprint(cp.Files), fmtBytes(cp.Bytes), cp.CreatedAt.Local().Format("Jan 02 15:04:05"))
			}
			return t.flush()
		},
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the checkpoints as JSON")
	return cmd
}

type signalOpts struct {
	client  *clientOpts
	payload string
	json    bool
}

func (c *cli) signalCmd() *cobra.Command {
	o := &signalOpts{}
	cmd := &cobra.Command{
		Use:   "signal SESSION_ID NAME [--payload JSON]",
		Short: "Send a signal to a session",
		Long: `Deliver a signal to a session: it wakes the agent's wait_for_signal of that
name (the payload becomes the tool's result), or it is kept until the agent
waits for it.`,
		Example: `  longhaul signal ses_01J9Z deploy.finished --payload '{"version": "1.4.2"}'`,
		Args:    usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &lt.SignalRequest{Name: args[1]}
			if o.payload != "" {
				if !json.Valid([]byte(o.payload)) {
					return usagef("--payload: not valid JSON")
				}
				req.Payload = json.RawMessage(o.payload)
			}
			cl, err := c.newClient(cmd, o.client)
			if err != nil {
				return err
			}
			sig, err := cl.SendSignal(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(c.stdout, sig)
			}
			state := "kept until the session waits for it"
			if sig.Delivered {
				state = "delivered to the waiting session"
			}
			_, err = fmt.Fprintf(c.stdout, "Signal %s (%s) %s.\n", sig.ID, sig.Name, state)
			return err
		},
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.payload, "payload", "", "the signal's payload, as JSON")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the signal as JSON")
	return cmd
}
