package trace_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/trace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// journalBuilder writes a hand-made journal: each event comes after the
// previous one by the given delay.
type journalBuilder struct {
	t   *testing.T
	sid string
	now time.Time
	evs []lt.Event
}

func newJournal(t *testing.T, sid string) *journalBuilder {
	j := &journalBuilder{t: t, sid: sid, now: t0}
	j.add(0, lt.EventSessionCreated, "", 0, lt.SessionCreatedData{Agent: lt.AgentRef{Name: "researcher", Version: 2}, Input: "go"})
	return j
}

func (j *journalBuilder) add(after time.Duration, typ, turn string, step int, data any) *journalBuilder {
	j.t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(j.t, err)
	j.now = j.now.Add(after)
	j.evs = append(j.evs, lt.Event{
		Seq: int64(len(j.evs) + 1), Type: typ, Time: j.now, SessionID: j.sid, TurnID: turn, Step: step, WorkerID: "node-a", Data: raw,
	})
	return j
}

func (j *journalBuilder) turn(after time.Duration, id string, index int) *journalBuilder {
	j.add(after, lt.EventTurnCreated, id, 0, lt.TurnCreatedData{TurnID: id, Index: index, Input: "go"})
	return j.add(0, lt.EventTurnStarted, id, 0, lt.TurnStartedData{TurnID: id})
}

func (j *journalBuilder) requested(after time.Duration, turn string, step, attempt int, purpose string) *journalBuilder {
	return j.add(after, lt.EventModelRequested, turn, step, lt.ModelRequestedData{
		Step: step, Attempt: attempt, Provider: "scripted", Model: "demo", Purpose: purpose, ContextTokens: 120,
	})
}

func (j *journalBuilder) responded(after time.Duration, turn string, step int, in, out int64, cost float64, calls ...string) *journalBuilder {
	var tcs []lt.ToolCall
	for i, name := range calls {
		tcs = append(tcs, lt.ToolCall{ID: callID(step, i), Name: name, Arguments: json.RawMessage(`{}`)})
	}
	stop := "end_turn"
	if len(calls) > 0 {
		stop = "tool_use"
	}
	return j.add(after, lt.EventModelResponded, turn, step, lt.ModelRespondedData{
		Step: step, ToolCalls: tcs, Usage: lt.Usage{InputTokens: in, OutputTokens: out}, CostUSD: cost, Model: "demo-2025", StopReason: stop,
	})
}

func callID(step, index int) string {
	return "call_" + string(rune('0'+step)) + "_" + string(rune('0'+index))
}

func (j *journalBuilder) toolRequested(after time.Duration, turn string, step, index int, tool string, class lt.EffectClass) *journalBuilder {
	return j.add(after, lt.EventToolRequested, turn, step, lt.ToolRequestedData{
		Step: step, Index: index, CallID: callID(step, index), Tool: tool, Kind: lt.CallBuiltin, Class: class,
		Arguments: json.RawMessage(`{}`), ArgumentsSHA256: strings.Repeat("a", 64),
	})
}

func (j *journalBuilder) toolStarted(after time.Duration, turn string, step, index, attempt int, tool string) *journalBuilder {
	return j.add(after, lt.EventToolStarted, turn, step, lt.ToolStartedData{
		Step: step, Index: index, CallID: callID(step, index), Tool: tool, EffectID: "eff_" + callID(step, index),
		IdempotencyKey: "key-" + callID(step, index), Class: lt.EffectIdempotent, Attempt: attempt,
	})
}

func (j *journalBuilder) toolCompleted(after time.Duration, turn string, step, index int, tool string, effect bool) *journalBuilder {
	d := lt.ToolCompletedData{Step: step, Index: index, CallID: callID(step, index), Tool: tool, Output: json.RawMessage(`"ok"`)}
	if effect {
		d.EffectID = "eff_" + callID(step, index)
	}
	return j.add(after, lt.EventToolCompleted, turn, step, d)
}

func (j *journalBuilder) stepCheckpoint(after time.Duration, turn string, step int) *journalBuilder {
	return j.add(after, lt.EventCheckpointCreated, turn, step, lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{
		ID: "ckpt_" + turn + "_" + callID(step, 0), TurnID: turn, Step: step, Kind: lt.CheckpointStep, Name: "step", CreatedAt: j.now.Add(after),
	}})
}

func (j *journalBuilder) completed(after time.Duration, turn string) *journalBuilder {
	return j.add(after, lt.EventTurnCompleted, turn, 0, lt.TurnCompletedData{TurnID: turn, Output: "done"})
}

// projected applies the journal the way the engine does and returns each
// turn's usage and the session's: a turn span's usage must equal the
// turn's, the trace's the session's.
func (j *journalBuilder) projected() (map[string]lt.Usage, lt.Usage) {
	j.t.Helper()
	var st journal.State
	var ch journal.Changes
	for _, ev := range j.evs {
		require.NoError(j.t, journal.Apply(&st, ev, &ch), "the hand-made journal must be one the engine accepts")
	}
	out := map[string]lt.Usage{}
	for _, d := range ch.Docs() {
		if t, ok := d.Value.(lt.Turn); ok && d.Kind == journal.DocTurn {
			out[t.ID] = t.Usage
		}
	}
	return out, st.Session.Usage
}

func (j *journalBuilder) build(opts *trace.Options) *lt.Trace {
	j.t.Helper()
	tr, err := trace.Build(j.evs, opts)
	require.NoError(j.t, err)
	turns, session := j.projected()
	require.Equal(j.t, roundCost(session), roundCost(tr.Usage), "the trace's usage is the session's")
	for id, u := range turns {
		var found bool
		for _, sp := range tr.Spans {
			if sp.ID == id {
				found = true
				require.NotNil(j.t, sp.Usage, "turn %s", id)
				require.Equal(j.t, u.ModelCalls, sp.Usage.ModelCalls, "turn %s model calls", id)
				require.Equal(j.t, u.ToolCalls, sp.Usage.ToolCalls, "turn %s tool calls", id)
				require.Equal(j.t, u.InputTokens, sp.Usage.InputTokens, "turn %s input tokens", id)
				require.Equal(j.t, u.OutputTokens, sp.Usage.OutputTokens, "turn %s output tokens", id)
				require.InDelta(j.t, u.CostUSD, sp.Usage.CostUSD, 1e-12, "turn %s cost", id)
			}
		}
		require.True(j.t, found, "turn %s has a span", id)
	}
	// Derivation is deterministic: the same journal gives the same bytes.
	again, err := trace.Build(j.evs, opts)
	require.NoError(j.t, err)
	a, _ := json.Marshal(tr)
	b, _ := json.Marshal(again)
	require.JSONEq(j.t, string(a), string(b))
	return tr
}

// find returns the span with id, anywhere in the tree.
func find(t *testing.T, spans []lt.Span, id string) lt.Span {
	t.Helper()
	var walk func([]lt.Span) *lt.Span
	walk = func(ss []lt.Span) *lt.Span {
		for i := range ss {
			if ss[i].ID == id {
				return &ss[i]
			}
			if f := walk(ss[i].Children); f != nil {
				return f
			}
		}
		return nil
	}
	sp := walk(spans)
	require.NotNil(t, sp, "no span %s", id)
	return *sp
}

// shape renders the tree as "kind name status" lines, indented by depth.
func shape(spans []lt.Span) string {
	var b strings.Builder
	var walk func([]lt.Span, int)
	walk = func(ss []lt.Span, depth int) {
		for _, s := range ss {
			b.WriteString(strings.Repeat("  ", depth) + string(s.Kind) + " " + s.Name + " " + string(s.Status) + "\n")
			walk(s.Children, depth+1)
		}
	}
	walk(spans, 0)
	return b.String()
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestBuildCompletedTurn(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(ms(10), "turn_a", 1).
		requested(ms(5), "turn_a", 1, 1, "").
		responded(ms(300), "turn_a", 1, 900, 40, 0.01, "write_file").
		toolRequested(0, "turn_a", 1, 0, "write_file", lt.EffectIdempotent).
		toolStarted(ms(1), "turn_a", 1, 0, 1, "write_file").
		toolCompleted(ms(20), "turn_a", 1, 0, "write_file", true).
		stepCheckpoint(ms(4), "turn_a", 1).
		requested(ms(1), "turn_a", 2, 1, "").
		responded(ms(200), "turn_a", 2, 1000, 10, 0.02).
		completed(ms(2), "turn_a")
	tr := j.build(nil)

	require.Equal(t, "ses_1", tr.SessionID)
	require.Equal(t, lt.AgentRef{Name: "researcher", Version: 2}, tr.Agent)
	require.Equal(t, int64(len(j.evs)), tr.LastEventSeq)
	require.Equal(t, j.now, tr.AsOf)
	require.Equal(t, `turn turn 1 ok
  step step 1 ok
    model_call model demo ok
    tool_call tool write_file ok
  step step 2 ok
    model_call model demo ok
`, shape(tr.Spans))

	turn := tr.Spans[0]
	require.Equal(t, "turn_a", turn.ID)
	require.Nil(t, turn.ParentID)
	require.Equal(t, t0.Add(ms(10)), turn.Start)
	require.Equal(t, int64(5+300+1+20+4+1+200+2), turn.DurationMS)
	require.Equal(t, lt.Usage{InputTokens: 1900, OutputTokens: 50, CostUSD: 0.03, ModelCalls: 2, ToolCalls: 1}, roundCost(*turn.Usage))
	require.Equal(t, tr.Usage, *turn.Usage)

	step1 := turn.Children[0]
	require.Equal(t, "turn_a/step/1", step1.ID)
	require.Equal(t, "turn_a", *step1.ParentID)
	// The step runs from its model call to its checkpoint.
	require.Equal(t, int64(300+1+20+4), step1.DurationMS)
	require.Equal(t, lt.Usage{InputTokens: 900, OutputTokens: 40, CostUSD: 0.01, ModelCalls: 1, ToolCalls: 1}, *step1.Usage)

	model := step1.Children[0]
	require.Equal(t, "turn_a/model/4", model.ID)
	require.Equal(t, int64(300), model.DurationMS)
	require.Equal(t, lt.SpanAttributes{
		TurnID: "turn_a", Step: 1, Provider: "scripted", Model: "demo", ResponseModel: "demo-2025", StopReason: "tool_use",
		Attempt: 1, ContextTokens: 120,
	}, model.Attributes)

	tool := step1.Children[1]
	zero := 0
	require.Equal(t, "turn_a/step/1/call/0", tool.ID)
	require.Equal(t, "turn_a/step/1", *tool.ParentID)
	require.Nil(t, tool.Usage)
	require.Equal(t, int64(21), tool.DurationMS)
	require.Equal(t, lt.SpanAttributes{
		TurnID: "turn_a", Step: 1, Tool: "write_file", CallID: "call_1_0", CallKind: lt.CallBuiltin, Index: &zero,
		EffectID: "eff_call_1_0", EffectClass: lt.EffectIdempotent, IdempotencyKey: "key-call_1_0", Attempts: 1,
	}, tool.Attributes)
}

func roundCost(u lt.Usage) lt.Usage {
	u.CostUSD = float64(int64(u.CostUSD*1e9+0.5)) / 1e9
	return u
}

func TestBuildModelRetries(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		add(ms(50), lt.EventModelFailed, "turn_a", 1, lt.ModelFailedData{Step: 1, Attempt: 1, Kind: "rate_limit", Status: 429, Message: "slow down", Consumed: true, Retry: true, RetryInMS: 1000}).
		requested(ms(1000), "turn_a", 1, 2, "").
		add(ms(70), lt.EventModelFailed, "turn_a", 1, lt.ModelFailedData{Step: 1, Attempt: 2, Kind: "server", Status: 500, Message: "boom", Consumed: true, Retry: true}).
		requested(ms(500), "turn_a", 1, 3, "").
		responded(ms(100), "turn_a", 1, 10, 5, 0.001).
		completed(0, "turn_a")
	tr := j.build(nil)
	require.Equal(t, `turn turn 1 ok
  step step 1 ok
    model_call model demo error
    model_call model demo error
    model_call model demo ok
`, shape(tr.Spans))
	step := tr.Spans[0].Children[0]
	first := step.Children[0]
	require.Equal(t, "slow down", first.Error)
	require.Equal(t, "rate_limit", first.Attributes.ErrorKind)
	require.True(t, first.Attributes.Retried)
	require.Equal(t, int64(50), first.DurationMS)
	require.Equal(t, &lt.Usage{ModelCalls: 1}, first.Usage)
	require.Equal(t, 3, step.Children[2].Attributes.Attempt)
	require.Equal(t, lt.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.001, ModelCalls: 3}, *step.Usage)
	// The step spans all its attempts, the backoff included.
	require.Equal(t, int64(50+1000+70+500+100), step.DurationMS)
}

func TestBuildFailedTurnAfterModelErrors(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		add(ms(30), lt.EventModelFailed, "turn_a", 1, lt.ModelFailedData{Step: 1, Attempt: 1, Kind: "auth", Status: 401, Message: "bad key", Consumed: true}).
		add(0, lt.EventTurnFailed, "turn_a", 0, lt.TurnFailedData{TurnID: "turn_a", StopReason: lt.StopProviderError, Error: "model: bad key"})
	tr := j.build(nil)
	require.Equal(t, `turn turn 1 error
  step step 1 error
    model_call model demo error
`, shape(tr.Spans))
	turn := tr.Spans[0]
	require.Equal(t, "model: bad key", turn.Error)
	require.Equal(t, lt.StopProviderError, turn.Attributes.StopReason)
	require.Equal(t, "bad key", turn.Children[0].Error)
}

func TestBuildToolRetry(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		responded(ms(10), "turn_a", 1, 10, 5, 0, "http_request").
		toolRequested(0, "turn_a", 1, 0, "http_request", lt.EffectIdempotent).
		toolStarted(ms(1), "turn_a", 1, 0, 1, "http_request").
		add(ms(40), lt.EventToolFailed, "turn_a", 1, lt.ToolFailedData{Step: 1, Index: 0, CallID: "call_1_0", Tool: "http_request", EffectID: "eff_call_1_0", Error: "503 from upstream", Retry: true, Attempt: 1, RetryInMS: 200}).
		toolStarted(ms(200), "turn_a", 1, 0, 2, "http_request").
		toolCompleted(ms(30), "turn_a", 1, 0, "http_request", true).
		requested(0, "turn_a", 2, 1, "").
		responded(ms(10), "turn_a", 2, 10, 5, 0).
		completed(0, "turn_a")
	tr := j.build(nil)
	require.Equal(t, `turn turn 1 ok
  step step 1 ok
    model_call model demo ok
    tool_call tool http_request ok
      attempt attempt 1 error
  step step 2 ok
    model_call model demo ok
`, shape(tr.Spans))
	tool := find(t, tr.Spans, "turn_a/step/1/call/0")
	require.Equal(t, 2, tool.Attributes.Attempts)
	require.Equal(t, int64(1+40+200+30), tool.DurationMS)
	att := tool.Children[0]
	require.Equal(t, "turn_a/step/1/call/0/attempt/1", att.ID)
	require.Equal(t, "503 from upstream", att.Error)
	require.Equal(t, int64(40), att.DurationMS)
	require.Equal(t, t0.Add(ms(10+1)), att.Start)
	require.Equal(t, int64(2), tr.Spans[0].Children[0].Usage.ToolCalls, "each execution counts, as in the session's usage")
}

func TestBuildRefusedCall(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		responded(ms(10), "turn_a", 1, 10, 5, 0, "send_email").
		toolRequested(0, "turn_a", 1, 0, "send_email", lt.EffectIrreversible).
		add(0, lt.EventPolicyDecided, "turn_a", 1, lt.PolicyDecidedData{Step: 1, Index: 0, CallID: "call_1_0", Tool: "send_email", Decision: lt.PolicyDeny, Rule: "no email"}).
		add(ms(1), lt.EventToolFailed, "turn_a", 1, lt.ToolFailedData{Step: 1, Index: 0, CallID: "call_1_0", Tool: "send_email", Error: "refused by policy", Refused: lt.RefusedPolicy}).
		requested(0, "turn_a", 2, 1, "").
		responded(ms(10), "turn_a", 2, 10, 5, 0).
		completed(0, "turn_a")
	tr := j.build(nil)
	tool := find(t, tr.Spans, "turn_a/step/1/call/0")
	require.Equal(t, lt.SpanError, tool.Status)
	require.Equal(t, "refused by policy", tool.Error)
	require.Equal(t, lt.RefusedPolicy, tool.Attributes.Refused)
	require.Equal(t, lt.PolicyDeny, tool.Attributes.Policy)
	require.Zero(t, tool.Attributes.Attempts)
	require.Equal(t, lt.SpanOK, tr.Spans[0].Children[0].Status, "a refused call is feedback to the model, not a failed step")
	require.Zero(t, tr.Spans[0].Usage.ToolCalls)
}

func TestBuildApprovalAndWait(t *testing.T) {
	t.Parallel()
	until := t0.Add(time.Hour)
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		responded(ms(10), "turn_a", 1, 10, 5, 0, "deploy", "sleep").
		toolRequested(0, "turn_a", 1, 0, "deploy", lt.EffectIrreversible).
		toolRequested(0, "turn_a", 1, 1, "sleep", lt.EffectRead).
		add(ms(1), lt.EventActionRequired, "turn_a", 1, lt.ActionRequiredData{Action: lt.Action{
			ID: "act_1", SessionID: "ses_1", Type: lt.ActionApproval, TurnID: "turn_a", Step: 1, CallID: "call_1_0", Tool: "deploy",
			ArgumentsSHA256: strings.Repeat("a", 64), CreatedAt: t0,
		}}).
		add(time.Minute, lt.EventActionResolved, "turn_a", 1, lt.ActionResolvedData{
			ActionID: "act_1", Type: string(lt.ActionApproval), CallID: "call_1_0", Decision: lt.Decision{Decision: lt.DecisionApprove},
			ArgumentsSHA256: strings.Repeat("a", 64), Actor: &lt.Actor{KeyID: "key_bob", Name: "bob", Role: lt.RoleApprover},
		}).
		toolStarted(ms(1), "turn_a", 1, 0, 1, "deploy").
		toolCompleted(ms(5), "turn_a", 1, 0, "deploy", true).
		add(ms(1), lt.EventWaitStarted, "turn_a", 1, lt.WaitStartedData{Step: 1, Index: 1, CallID: "call_1_1", Tool: "sleep", Kind: lt.WaitTimer, Until: &until}).
		toolCompleted(time.Hour, "turn_a", 1, 1, "sleep", false).
		requested(0, "turn_a", 2, 1, "").
		responded(ms(10), "turn_a", 2, 10, 5, 0).
		completed(0, "turn_a")
	tr := j.build(nil)
	require.Equal(t, `turn turn 1 ok
  step step 1 ok
    model_call model demo ok
    tool_call tool deploy ok
      action action approval ok
    tool_call tool sleep ok
      wait wait timer ok
  step step 2 ok
    model_call model demo ok
`, shape(tr.Spans))
	act := find(t, tr.Spans, "act_1")
	require.Equal(t, "turn_a/step/1/call/0", *act.ParentID)
	require.Equal(t, time.Minute.Milliseconds(), act.DurationMS)
	require.Equal(t, lt.DecisionApprove, act.Attributes.Decision)
	require.Equal(t, &lt.Actor{KeyID: "key_bob", Name: "bob", Role: lt.RoleApprover}, act.Attributes.DecidedBy, "who decided is on the action's span")
	require.Equal(t, lt.ActionApproval, act.Attributes.ActionType)
	wait := find(t, tr.Spans, "turn_a/step/1/call/1/wait/12")
	require.Equal(t, time.Hour.Milliseconds(), wait.DurationMS)
	require.Equal(t, &until, wait.Attributes.WaitUntil)
	require.Equal(t, lt.WaitTimer, wait.Attributes.WaitKind)
}

func TestBuildRunningTurn(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		responded(ms(10), "turn_a", 1, 10, 5, 0.5, "shell").
		toolRequested(0, "turn_a", 1, 0, "shell", lt.EffectIrreversible).
		toolStarted(ms(5), "turn_a", 1, 0, 1, "shell")
	j.add(0, lt.EventTurnCreated, "turn_b", 0, lt.TurnCreatedData{TurnID: "turn_b", Index: 2, Input: "more"})
	tr := j.build(nil)
	require.Equal(t, `turn turn 1 running
  step step 1 running
    model_call model demo ok
    tool_call tool shell running
turn turn 2 queued
`, shape(tr.Spans))
	turn := tr.Spans[0]
	require.Nil(t, turn.End)
	require.Equal(t, int64(15), turn.DurationMS, "an open span is measured to the last event")
	require.Nil(t, turn.Children[0].End)
	require.Equal(t, 0.5, turn.Usage.CostUSD)
	require.Equal(t, int64(1), turn.Usage.ToolCalls)
	require.True(t, tr.Spans[1].Status.Open())
	require.Equal(t, int64(0), tr.Spans[1].DurationMS)
}

func TestBuildCancelledTurn(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		responded(ms(10), "turn_a", 1, 10, 5, 0, "ask_human").
		add(0, lt.EventToolRequested, "turn_a", 1, lt.ToolRequestedData{Step: 1, Index: 0, CallID: "call_1_0", Tool: "ask_human", Kind: lt.CallHuman, Class: lt.EffectRead, Arguments: json.RawMessage(`{}`), ArgumentsSHA256: strings.Repeat("b", 64)}).
		add(ms(1), lt.EventActionRequired, "turn_a", 1, lt.ActionRequiredData{Action: lt.Action{
			ID: "act_q", SessionID: "ses_1", Type: lt.ActionInput, TurnID: "turn_a", Step: 1, CallID: "call_1_0", Question: "which?", CreatedAt: t0,
		}}).
		add(ms(100), lt.EventSessionCancelRequested, "", 0, lt.SessionCancelRequestedData{Reason: "enough"}).
		add(ms(2), lt.EventTurnCancelled, "turn_a", 0, lt.TurnCancelledData{TurnID: "turn_a", Reason: "enough"})
	tr := j.build(nil)
	require.Equal(t, `turn turn 1 cancelled
  step step 1 cancelled
    model_call model demo ok
    tool_call tool ask_human cancelled
      action action input cancelled
`, shape(tr.Spans))
	turn := tr.Spans[0]
	require.Equal(t, lt.StopCancelled, turn.Attributes.StopReason)
	act := find(t, tr.Spans, "act_q")
	require.Equal(t, *turn.End, *act.End, "what the turn left open ends with it")
	require.Equal(t, *turn.End, *turn.Children[0].End)
}

func TestBuildCompactionAndVerification(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, lt.PurposeCompaction).
		add(ms(80), lt.EventContextCompacted, "turn_a", 1, lt.ContextCompactedData{Step: 1, Items: 4, TokensBefore: 9000, TokensAfter: 1200, Summary: "s", Usage: lt.Usage{InputTokens: 9000, OutputTokens: 300}, CostUSD: 0.2, DurationMS: 80}).
		requested(0, "turn_a", 1, 1, "").
		responded(ms(10), "turn_a", 1, 1200, 50, 0.1).
		requested(0, "turn_a", 1, 1, lt.PurposeVerification).
		add(ms(40), lt.EventAcceptanceVerified, "turn_a", 1, lt.AcceptanceVerifiedData{Step: 1, Verdict: lt.AcceptanceVerdict{Attempt: 1, AllMet: true}, Usage: lt.Usage{InputTokens: 500, OutputTokens: 20}, CostUSD: 0.05, DurationMS: 40}).
		completed(0, "turn_a")
	tr := j.build(nil)
	require.Equal(t, `turn turn 1 ok
  model_call model demo (compaction) ok
  step step 1 ok
    model_call model demo ok
  model_call model demo (verification) ok
`, shape(tr.Spans))
	turn := tr.Spans[0]
	comp := turn.Children[0]
	require.Equal(t, lt.PurposeCompaction, comp.Attributes.Purpose)
	require.Equal(t, 9000, comp.Attributes.TokensBefore)
	require.Equal(t, 1200, comp.Attributes.TokensAfter)
	ver := turn.Children[2]
	require.NotNil(t, ver.Attributes.AcceptanceMet)
	require.True(t, *ver.Attributes.AcceptanceMet)
	require.Equal(t, lt.Usage{InputTokens: 1200, OutputTokens: 50, CostUSD: 0.1, ModelCalls: 1}, *turn.Children[1].Usage, "a step holds its own calls only")
	require.Equal(t, lt.Usage{InputTokens: 10700, OutputTokens: 370, CostUSD: 0.35, ModelCalls: 3}, roundCost(*turn.Usage))
}

func TestBuildInterruptedModelCall(t *testing.T) {
	t.Parallel()
	// A worker died waiting for the model; the next one called again.
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		requested(ms(30000), "turn_a", 1, 1, "").
		responded(ms(10), "turn_a", 1, 10, 5, 0).
		completed(0, "turn_a")
	tr := j.build(nil)
	step := tr.Spans[0].Children[0]
	require.Len(t, step.Children, 2)
	require.Equal(t, lt.SpanError, step.Children[0].Status)
	require.Contains(t, step.Children[0].Error, "interrupted")
	require.Equal(t, int64(30000), step.Children[0].DurationMS)
	require.Equal(t, lt.SpanOK, step.Status)
	require.NotEqual(t, step.Children[0].ID, step.Children[1].ID)
}

// subagentJournal is a parent whose step 1 spawns a child with spawn_agent
// and whose step 2 waits for it.
func subagentJournal(t *testing.T, reportFirst bool) *journalBuilder {
	j := newJournal(t, "ses_parent").turn(0, "turn_p", 1).
		requested(0, "turn_p", 1, 1, "").
		responded(ms(10), "turn_p", 1, 100, 10, 0.01, "spawn_agent").
		toolRequested(0, "turn_p", 1, 0, "spawn_agent", lt.EffectRead)
	spawned := lt.SubagentSpawnedData{Step: 1, Index: 0, CallID: "call_1_0", ChildID: "ses_child", Agent: lt.AgentRef{Name: "helper", Version: 1}, Input: "help"}
	report := lt.SubagentCompletedData{ChildID: "ses_child", TurnID: "turn_c", Status: lt.TurnCompleted, Output: "helped",
		Usage: lt.Usage{InputTokens: 50, OutputTokens: 5, CostUSD: 0.004, ModelCalls: 1}}
	if reportFirst {
		// The child's report can commit before the parent journals the spawn.
		j.add(ms(1), lt.EventSubagentCompleted, "turn_p", 1, report).
			add(ms(1), lt.EventSubagentSpawned, "turn_p", 1, spawned).
			toolCompleted(ms(1), "turn_p", 1, 0, "spawn_agent", false)
	} else {
		j.add(ms(1), lt.EventSubagentSpawned, "turn_p", 1, spawned).
			toolCompleted(ms(1), "turn_p", 1, 0, "spawn_agent", false).
			add(ms(500), lt.EventSubagentCompleted, "turn_p", 1, report)
	}
	return j.requested(0, "turn_p", 2, 1, "").
		responded(ms(10), "turn_p", 2, 100, 10, 0.01).
		completed(0, "turn_p")
}

func childJournal(t *testing.T) []lt.Event {
	c := newJournal(t, "ses_child").turn(0, "turn_c", 1).
		requested(0, "turn_c", 1, 1, "").
		responded(ms(20), "turn_c", 1, 50, 5, 0.004).
		completed(0, "turn_c")
	return c.evs
}

func TestBuildSubagent(t *testing.T) {
	t.Parallel()
	for _, reportFirst := range []bool{false, true} {
		j := subagentJournal(t, reportFirst)
		tr := j.build(nil)
		require.Equal(t, `turn turn 1 ok
  step step 1 ok
    model_call model demo ok
    tool_call tool spawn_agent ok
      subagent subagent helper ok
  step step 2 ok
    model_call model demo ok
`, shape(tr.Spans), "report first: %v", reportFirst)
		sub := find(t, tr.Spans, "turn_p/subagent/ses_child")
		require.Equal(t, "ses_child", sub.Attributes.ChildSessionID)
		require.Equal(t, &lt.AgentRef{Name: "helper", Version: 1}, sub.Attributes.Agent)
		require.Equal(t, lt.TurnCompleted, sub.Attributes.ChildStatus)
		require.Equal(t, &lt.Usage{InputTokens: 50, OutputTokens: 5, CostUSD: 0.004, ModelCalls: 1}, sub.Usage)
		// The step holds its own calls; the turn, like the API's turn, also
		// what the child reported during it; the trace's total, everything.
		step := tr.Spans[0].Children[0]
		require.Equal(t, int64(100), step.Usage.InputTokens)
		require.Equal(t, int64(250), tr.Spans[0].Usage.InputTokens)
		require.Equal(t, int64(250), tr.Usage.InputTokens)
		if !reportFirst {
			require.Equal(t, int64(1+500), sub.DurationMS)
		}
	}
}

func TestBuildNestsSubagentTraces(t *testing.T) {
	t.Parallel()
	j := subagentJournal(t, false)
	child := childJournal(t)
	var asked []string
	tr := j.build(&trace.Options{Subagents: func(id string) ([]lt.Event, error) {
		asked = append(asked, id)
		if id == "ses_child" {
			return child, nil
		}
		return nil, nil
	}})
	require.Contains(t, asked, "ses_child")
	sub := find(t, tr.Spans, "turn_p/subagent/ses_child")
	require.Len(t, sub.Children, 1)
	nested := sub.Children[0]
	require.Equal(t, "turn_c", nested.ID)
	require.Equal(t, sub.ID, *nested.ParentID)
	require.Equal(t, "turn_c", *nested.Children[0].ParentID)
	require.Equal(t, "turn_c/step/1", *nested.Children[0].Children[0].ParentID)
	require.Equal(t, int64(50), nested.Usage.InputTokens)
	require.Equal(t, int64(250), tr.Usage.InputTokens, "a nested trace adds nothing: the report already counted it")

	// Depth 0 is the default; a child that names its parent as its own
	// child is not followed back.
	loop := subagentJournal(t, false).evs
	for i := range loop {
		loop[i].SessionID = "ses_child"
	}
	deep, err := trace.Build(j.evs, &trace.Options{MaxDepth: 5, Subagents: func(id string) ([]lt.Event, error) {
		return loop, nil
	}})
	require.NoError(t, err)
	require.Len(t, find(t, deep.Spans, "turn_p/subagent/ses_child").Children, 1)
	require.Empty(t, find(t, deep.Spans, "turn_p/subagent/ses_child").Children[0].Children[0].Children[1].Children[0].Children,
		"ses_child's own spawn of ses_child is not expanded again")
}

func TestBuildDepthLimit(t *testing.T) {
	t.Parallel()
	// Each level spawns the next: ses_0 -> ses_1 -> ses_2 -> ...
	level := func(n int) []lt.Event {
		id := "ses_" + string(rune('0'+n))
		next := "ses_" + string(rune('0'+n+1))
		turn := "turn_" + string(rune('0'+n))
		j := newJournal(t, id).turn(0, turn, 1).
			requested(0, turn, 1, 1, "").
			responded(ms(10), turn, 1, 1, 1, 0, "spawn_agent").
			toolRequested(0, turn, 1, 0, "spawn_agent", lt.EffectRead).
			add(ms(1), lt.EventSubagentSpawned, turn, 1, lt.SubagentSpawnedData{Step: 1, Index: 0, CallID: "call_1_0", ChildID: next, Agent: lt.AgentRef{Name: "a", Version: 1}})
		return j.evs
	}
	depthOf := func(maxDepth int) int {
		tr, err := trace.Build(level(0), &trace.Options{MaxDepth: maxDepth, Subagents: func(id string) ([]lt.Event, error) {
			return level(int(id[4] - '0')), nil
		}})
		require.NoError(t, err)
		d := 0
		spans := tr.Spans
		for {
			sub := spans[0].Children[0].Children[1].Children[0]
			require.Equal(t, lt.SpanSubagent, sub.Kind)
			if len(sub.Children) == 0 {
				return d
			}
			d++
			spans = sub.Children
		}
	}
	require.Equal(t, 1, depthOf(1))
	require.Equal(t, trace.DefaultMaxDepth, depthOf(0))
	require.Equal(t, 5, depthOf(5))
}

func TestBuildErrors(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1)
	j.evs = append(j.evs, lt.Event{Seq: 4, Type: lt.EventModelResponded, SessionID: "ses_1", TurnID: "turn_a", Data: json.RawMessage(`{"step":"one"}`)})
	_, err := trace.Build(j.evs, nil)
	require.ErrorContains(t, err, "event 4 (model.responded)")

	j = subagentJournal(t, false)
	_, err = trace.Build(j.evs, &trace.Options{Subagents: func(string) ([]lt.Event, error) { return nil, errTest }})
	require.ErrorIs(t, err, errTest)
	require.ErrorContains(t, err, "ses_child")

	empty, err := trace.Build(nil, nil)
	require.NoError(t, err)
	require.Empty(t, empty.Spans)
	require.NotNil(t, empty.Spans, "an empty trace has an empty list, not null")
}

var errTest = &testError{}

type testError struct{}

func (*testError) Error() string { return "test error" }

func TestBuildIgnoresUnknownAndInformationalEvents(t *testing.T) {
	t.Parallel()
	j := newJournal(t, "ses_1").turn(0, "turn_a", 1).
		requested(0, "turn_a", 1, 1, "").
		add(ms(5), lt.EventModelDelta, "turn_a", 1, lt.ModelDeltaData{Step: 1, Attempt: 1, Text: "hel"}).
		add(0, "something.new", "turn_a", 1, map[string]any{"x": 1}).
		responded(ms(5), "turn_a", 1, 1, 1, 0).
		completed(0, "turn_a")
	tr, err := trace.Build(j.evs, nil)
	require.NoError(t, err)
	require.Equal(t, `turn turn 1 ok
  step step 1 ok
    model_call model demo ok
`, shape(tr.Spans))
}

func TestBuildRefusesTooManySessions(t *testing.T) {
	t.Parallel()
	j := subagentJournal(t, false)
	child := childJournal(t)
	load := func(string) ([]lt.Event, error) { return child, nil }
	_, err := trace.Build(j.evs, &trace.Options{MaxSessions: 1, Subagents: load})
	require.ErrorIs(t, err, trace.ErrTooManySessions)
	_, err = trace.Build(j.evs, &trace.Options{MaxSessions: 2, Subagents: load})
	require.NoError(t, err)
}
