package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/longhaul-dev/longhaul/internal/engine"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The control run measures how long an in-flight control takes to reach a
// running turn: from the request, taken by the engine's API method (what
// the HTTP handler calls), to the journal showing its effect. Every session
// is in a model call that would last controlCallDelay, so an effect seen
// at all was the call being cut, not the call ending by itself.

// ControlKind names the in-flight control a control run sends.
type ControlKind string

// ControlCancel is a cancel (POST /v1/sessions/{id}/cancel): its effect is
// the model call abandoned (model.failed, interrupted "cancelled") and the
// session cancelled with the cancel no longer pending.
const ControlCancel ControlKind = "cancel"

// ControlSteer is a steer with interrupt (POST /v1/sessions/{id}/steer,
// "interrupt": true): its effect is the model call abandoned (model.failed,
// interrupted "steered") and made again with the message (a step's
// model.requested carrying it). The call made again is as slow; the run
// cancels the sessions afterwards.
const ControlSteer ControlKind = "steer"

// steerMessage is what the steer run sends.
const steerMessage = "Stop here and answer with what you have."

// controlCallDelay is how long each session's model call would take: far
// longer than a whole run, so no call ends by itself.
const controlCallDelay = 10 * time.Minute

// controlEffectTimeout bounds the wait for one request's effect: past it
// the run fails, since the control did not reach the turn.
const controlEffectTimeout = time.Minute

// controlFallbackPoll re-reads a session whose journal growth was not
// notified (a notification may be lost by design): it bounds the error of
// the measurement, not the latency measured.
const controlFallbackPoll = 5 * time.Millisecond

// ControlResult is the latency of one kind of in-flight control.
type ControlResult struct {
	Kind ControlKind
	// Sessions is the number of sessions a request was sent to, each in a
	// model call.
	Sessions int
	// CrossNode counts the requests taken by a node other than the one
	// running the session (with Nodes > 1, all of them): the runner learns
	// of those through the store's notifier or its poll interval.
	CrossNode int
	// Latencies holds, in the order sent, each request's time from the call
	// of the API method to the journal showing the effect.
	Latencies     []time.Duration
	P50, P99, Max time.Duration
	// AnswerP50 and AnswerP99 are of the API call's own time, until it
	// returned (the request made durable): the rest of a latency is the
	// way to the runner and the runner's work.
	AnswerP50, AnswerP99 time.Duration
}

// controlSample is one request's times from its start: to the API call's
// return, and to the effect in the journal.
type controlSample struct {
	answer, effect time.Duration
}

// Control puts cfg.Sessions sessions (default 1) each in a model call that
// would last minutes, then sends kind to them one after another, each once
// the previous one's effect is in the journal, and measures each request's
// latency from request to effect (a steer run then cancels its sessions,
// unmeasured). With cfg.Nodes > 1 each request is taken by a node that
// does not run the session. Steps and Rounds are not used.
func Control(ctx context.Context, cfg Config, kind ControlKind) (*ControlResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if kind != ControlCancel && kind != ControlSteer {
		return nil, fmt.Errorf("bench: unknown control %q", kind)
	}
	n := max(cfg.Sessions, 1)
	if cfg.Workers <= 0 {
		cfg.Workers = max(n, 32)
	}
	r, err := open(ctx, cfg, cfg.Workers)
	if err != nil {
		return nil, err
	}
	defer r.close()
	// One slow call, and for a steer the slow call made again with it.
	slow := map[string]any{"delay_ms": controlCallDelay.Milliseconds(), "text": "this answer comes too late"}
	script, err := json.Marshal([]map[string]any{slow, slow})
	if err != nil {
		return nil, err
	}
	spec := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: script}}
	ids, err := createSessions(ctx, r, n, spec, "benchmark")
	if err != nil {
		return nil, err
	}
	// Every call is in flight before the first request: the requests reach
	// turns of a loaded engine, not an idle one.
	runners := make([]string, n)
	for i, id := range ids {
		if runners[i], err = awaitModelCall(ctx, r.nodes[0].eng, id); err != nil {
			return nil, err
		}
	}
	res := &ControlResult{Kind: kind, Sessions: n}
	var answers []time.Duration
	for i, id := range ids {
		to, at := r.requestNode(runners[i])
		if to.NodeID() != runners[i] {
			res.CrossNode++
		}
		latency := cancelLatency
		if kind == ControlSteer {
			latency = steerLatency
		}
		sample, err := latency(ctx, to, at, id)
		if err != nil {
			return nil, err
		}
		res.Latencies = append(res.Latencies, sample.effect)
		answers = append(answers, sample.answer)
	}
	if kind == ControlSteer {
		// Each steered session is in its call made again: a cancel ends it
		// (and checks that the steer let no answer through), so the
		// engines stop at once.
		for i, id := range ids {
			to, at := r.requestNode(runners[i])
			if _, err := cancelLatency(ctx, to, at, id); err != nil {
				return nil, err
			}
		}
	}
	sorted := slices.Clone(res.Latencies)
	res.P50, res.P99 = percentile(sorted, 0.50), percentile(sorted, 0.99)
	res.Max = sorted[len(sorted)-1]
	res.AnswerP50, res.AnswerP99 = percentile(answers, 0.50), percentile(answers, 0.99)
	return res, nil
}

// requestNode returns the engine a request for a session that runner runs
// is sent to (another node's, when there is one) and the runner's engine,
// where the effect is watched for (the journal grows there first).
func (r *rig) requestNode(runner string) (to, at *engine.Engine) {
	at = r.nodes[0].eng
	for _, n := range r.nodes {
		if n.eng.NodeID() == runner {
			at = n.eng
		}
	}
	to = at
	for _, n := range r.nodes {
		if n.eng.NodeID() != runner {
			return n.eng, at
		}
	}
	return to, at
}

// awaitModelCall waits until the session's model call has started and
// returns the node running it (the worker id of model.requested).
func awaitModelCall(ctx context.Context, eng *engine.Engine, id string) (string, error) {
	deadline := time.Now().Add(controlEffectTimeout)
	for {
		evs, err := eng.ListEvents(ctx, id, 0, 1000)
		if err != nil {
			return "", err
		}
		for _, ev := range evs {
			if ev.Type == lt.EventModelRequested {
				return ev.WorkerID, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("bench: session %s started no model call within %s", id, controlEffectTimeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// cancelLatency cancels the session through to and returns the time until
// the journal, watched on at, shows the cancel's effect; then it checks
// that the effect is the call in flight abandoned, not one that ended.
func cancelLatency(ctx context.Context, to, at *engine.Engine, id string) (controlSample, error) {
	grew, stop := at.WatchSession(ctx, id)
	defer stop()
	poll := time.NewTicker(controlFallbackPoll)
	defer poll.Stop()
	start := time.Now()
	if _, err := to.CancelSession(ctx, id, &lt.CancelRequest{Reason: "benchmark"}); err != nil {
		return controlSample{}, fmt.Errorf("bench: cancel session %s: %w", id, err)
	}
	sample := controlSample{answer: time.Since(start)}
	deadline := time.After(controlEffectTimeout)
	for {
		s, err := at.GetSession(ctx, id)
		if err != nil {
			return controlSample{}, err
		}
		if s.Status == lt.SessionCancelled && !s.CancelRequested {
			sample.effect = time.Since(start)
			return sample, checkCancelled(ctx, at, id)
		}
		if s.Status.Terminal() && s.Status != lt.SessionCancelled {
			return controlSample{}, fmt.Errorf("bench: session %s ended %s, not cancelled", id, s.Status)
		}
		select {
		case <-ctx.Done():
			return controlSample{}, ctx.Err()
		case <-deadline:
			return controlSample{}, fmt.Errorf("bench: the cancel of session %s took no effect within %s", id, controlEffectTimeout)
		case <-grew:
		case <-poll.C:
		}
	}
}

// checkCancelled checks a cancelled session's journal: its one model call
// was abandoned by the cancel, nothing answered it, and no tool ran.
func checkCancelled(ctx context.Context, eng *engine.Engine, id string) error {
	evs, err := eng.ListEvents(ctx, id, 0, 1000)
	if err != nil {
		return err
	}
	abandoned := 0
	for _, ev := range evs {
		switch ev.Type {
		case lt.EventModelFailed:
			var d lt.ModelFailedData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return fmt.Errorf("bench: session %s: decode %s: %w", id, ev.Type, err)
			}
			if d.Interrupted == string(interruptedByCancel) {
				abandoned++
			}
		case lt.EventModelResponded, lt.EventToolStarted:
			return fmt.Errorf("bench: session %s journaled %s: the cancel did not cut the model call", id, ev.Type)
		}
	}
	if abandoned != 1 {
		return fmt.Errorf("bench: session %s journaled %d model calls interrupted by the cancel, want 1", id, abandoned)
	}
	return nil
}

// interruptedByCancel is the `interrupted` field of a model.failed that a
// cancel cut (docs/api.md).
const interruptedByCancel = "cancelled"

// steerLatency steers the session with interrupt through to and returns
// the time until the journal, watched on at, shows the steer's effect: the
// call in flight abandoned for it and a step's call made again with the
// message.
func steerLatency(ctx context.Context, to, at *engine.Engine, id string) (controlSample, error) {
	grew, stop := at.WatchSession(ctx, id)
	defer stop()
	poll := time.NewTicker(controlFallbackPoll)
	defer poll.Stop()
	start := time.Now()
	if _, err := to.SteerSession(ctx, id, &lt.SteerRequest{Input: steerMessage, Interrupt: true}); err != nil {
		return controlSample{}, fmt.Errorf("bench: steer session %s: %w", id, err)
	}
	sample := controlSample{answer: time.Since(start)}
	deadline := time.After(controlEffectTimeout)
	for {
		evs, err := at.ListEvents(ctx, id, 0, 1000)
		if err != nil {
			return controlSample{}, err
		}
		done, err := steered(id, evs)
		if done || err != nil {
			sample.effect = time.Since(start)
			return sample, err
		}
		select {
		case <-ctx.Done():
			return controlSample{}, ctx.Err()
		case <-deadline:
			return controlSample{}, fmt.Errorf("bench: the steer of session %s took no effect within %s", id, controlEffectTimeout)
		case <-grew:
		case <-poll.C:
		}
	}
}

// steered reports whether a session's journal shows a steer's effect: after
// turn.steered, the model call abandoned for it (model.failed, interrupted
// "steered"), then a step's call made again carrying the message. An
// answer or an end of the turn first is an error: the steer did not cut
// the call.
func steered(id string, evs []lt.Event) (bool, error) {
	sent, abandoned := false, false
	for _, ev := range evs {
		switch ev.Type {
		case lt.EventTurnSteered:
			sent = true
		case lt.EventModelFailed:
			var d lt.ModelFailedData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return false, fmt.Errorf("bench: session %s: decode %s: %w", id, ev.Type, err)
			}
			abandoned = abandoned || sent && d.Interrupted == lt.InterruptedSteered
		case lt.EventModelRequested:
			var d lt.ModelRequestedData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return false, fmt.Errorf("bench: session %s: decode %s: %w", id, ev.Type, err)
			}
			if abandoned && d.Purpose == "" && d.Steers >= 1 {
				return true, nil
			}
		case lt.EventModelResponded, lt.EventToolStarted, lt.EventTurnCompleted, lt.EventTurnFailed, lt.EventTurnCancelled:
			return false, fmt.Errorf("bench: session %s journaled %s before the steer's call: the steer did not cut the model call", id, ev.Type)
		}
	}
	return false, nil
}

// PrintControl writes the control latencies' table.
func PrintControl(w io.Writer, runs []*ControlResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "control\tsessions\tcross-node\tp50 answer\tp99 answer\tp50 to effect\tp99 to effect\tmax\t")
	round := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.Kind, r.Sessions, r.CrossNode,
			round(r.AnswerP50), round(r.AnswerP99), round(r.P50), round(r.P99), round(r.Max))
	}
	tw.Flush()
}
