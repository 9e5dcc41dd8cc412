package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

type pauseOpts struct {
	client *clientOpts
	reason string
	json   bool
}

func (c *cli) pauseCmd() *cobra.Command {
	o := &pauseOpts{}
	cmd := &cobra.Command{
		Use:   "pause SESSION_ID",
		Short: "Pause a session at its next safe point; it holds no worker until resumed",
		Long: `Ask the server to pause the session. A pause is not a cancel: a call in
flight (a model request, a tool) finishes, and the session pauses before its
next call starts. A session no worker runs (queued, waiting for a required
action or a timer) is paused at once. Until the pause has taken effect,
'longhaul show' says "(pause requested)".

While paused the session runs nothing and holds no worker: its required
actions stay pending (a decision is recorded but runs nothing), timers do not
fire (one that came due fires on resume), and the time paused counts toward
neither max_wall_seconds nor turn_timeout_seconds. 'longhaul cancel' still
cancels it. Pausing again changes nothing.

The pause reaches the session's running sub-agents, and theirs: each is
paused with it, at its own next safe point, and goes on only when this
session is resumed. If the command fails midway (a lost connection), run it
again: it pauses whatever the first run did not reach.`,
		Example: `  longhaul pause ses_01J9Z
  longhaul pause ses_01J9Z --reason "checking the draft first"
  longhaul resume ses_01J9Z`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return c.pause(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().StringVar(&o.reason, "reason", "", "why, recorded in the journal")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the session as JSON")
	return cmd
}

func (c *cli) pause(cmd *cobra.Command, o *pauseOpts, id string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	s, err := cl.Pause(cmd.Context(), id, &lt.PauseRequest{Reason: o.reason})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, s)
	}
	if s.Status == lt.SessionPaused {
		_, err = fmt.Fprintf(c.stdout, "Paused %s.\n", s.ID)
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "Pause requested for %s (status: %s): it pauses once the call in flight has finished.\n", s.ID, s.Status)
	return err
}

type resumeOpts struct {
	client *clientOpts
	json   bool
}

func (c *cli) resumeCmd() *cobra.Command {
	o := &resumeOpts{}
	cmd := &cobra.Command{
		Use:   "resume SESSION_ID",
		Short: "Resume a paused session where it stopped",
		Long: `Resume a session paused with 'longhaul pause' (or withdraw a pause that has
not taken effect yet). The session goes back to what it was doing: it runs
if it has work, waits for its pending required actions, or goes on waiting
for its timer or signal (a timer that came due while paused fires now).
The sub-agents paused with it are resumed with it; one paused by itself stays
paused. A sub-agent cannot be resumed alone while its parent or an ancestor
is paused (409, naming the session to resume), or waits on a monitor action
(409, naming the action to decide). Resuming a session that is
not paused is an error (409), unless sub-agents paused with it are still
paused (a resume cut short): they are resumed.`,
		Example: `  longhaul resume ses_01J9Z`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE:    func(cmd *cobra.Command, args []string) error { return c.resume(cmd, o, args[0]) },
	}
	o.client = clientFlags(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the session as JSON")
	return cmd
}

func (c *cli) resume(cmd *cobra.Command, o *resumeOpts, id string) error {
	cl, err := c.newClient(cmd, o.client)
	if err != nil {
		return err
	}
	s, err := cl.Resume(cmd.Context(), id)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(c.stdout, s)
	}
	_, err = fmt.Fprintf(c.stdout, "Resumed %s (status: %s).\n", s.ID, s.Status)
	return err
}

// pauseToComePrefix begins the summary of a session.pause_requested.
const pauseToComePrefix = "at the next safe point: "

// pauseSummary describes session.pause_requested, session.paused and
// session.resumed for `longhaul events`.
func pauseSummary(ev lt.Event) (string, bool) {
	switch ev.Type {
	case lt.EventSessionPauseRequested:
		var d lt.SessionPauseRequestedData
		if decode(ev, &d) {
			return pauseToComePrefix + orDash(truncate(d.Reason, 80)) + withParent(d.Parent), true
		}
	case lt.EventSessionPaused:
		var d lt.SessionPausedData
		if decode(ev, &d) {
			return orDash(truncate(d.Reason, 80)) + withParent(d.Parent), true
		}
	case lt.EventSessionResumed:
		var d lt.SessionResumedData
		if decode(ev, &d) {
			if d.PausedMS == 0 {
				return "the pause had not taken effect" + withParent(d.Parent), true
			}
			return "after " + fmtDuration(ms(d.PausedMS)) + " paused" + withParent(d.Parent), true
		}
	}
	return "", false
}

// withParent notes a pause or resume that came with the parent's ("" for
// none).
func withParent(parent string) string {
	if parent == "" {
		return ""
	}
	return " (with its parent " + parent + ")"
}

// printPauseHint follows a session.paused line of a followed turn with the
// command that resumes it: `run` goes on following the paused turn.
func printPauseHint(w io.Writer, sessionID string, ev lt.Event) {
	if ev.Type != lt.EventSessionPaused {
		return
	}
	fmt.Fprintf(w, "        ↳ paused; nothing runs until: longhaul resume %s\n", sessionID)
}
