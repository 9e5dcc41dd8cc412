package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// verdictStep is a scripted monitor's answer.
func verdictStep(verdict string, reasons ...string) string {
	raw, _ := json.Marshal(map[string]any{"verdict": verdict, "reasons": reasons})
	text, _ := json.Marshal(string(raw))
	return `{"text":` + string(text) + `}`
}

// modelMonitor is a monitor spec with a scripted model answering steps.
func modelMonitor(everySteps int, before []lt.EffectClass, steps ...string) *lt.MonitorSpec {
	m := allLog()
	m.Model = &lt.ModelSpec{Provider: "scripted", Name: "watcher", Script: json.RawMessage("[" + strings.Join(steps, ",") + "]")}
	m.EverySteps, m.Before = everySteps, before
	return m
}

// markerCall is an irreversible shell call that appends a line to marker.
func markerCall(marker string) string {
	return shellCall("echo ran >> " + marker)
}

// markerLines counts how often a marker call ran.
func markerLines(t *testing.T, marker string) int {
	t.Helper()
	b, err := os.ReadFile(marker)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "ran\n")
}

func reviews(t *testing.T, h *harness, id string) []lt.MonitorReviewedData {
	t.Helper()
	var out []lt.MonitorReviewedData
	for _, ev := range events(t, h, id, lt.EventMonitorReviewed) {
		out = append(out, data[lt.MonitorReviewedData](t, ev))
	}
	return out
}

func monitorCalls(t *testing.T, h *harness, id string) int {
	t.Helper()
	n := 0
	for _, ev := range events(t, h, id, lt.EventModelRequested) {
		if data[lt.ModelRequestedData](t, ev).Purpose == lt.PurposeMonitor {
			n++
		}
	}
	return n
}

var irreversibleShell = lt.ToolSpec{Name: "shell", Effect: lt.EffectIrreversible}

// TestModelMonitorPauseThenContinue: the model monitor answers pause before
// an irreversible call: the call does not run, the monitor action is
// pending and survives a restart of the engine, and continue runs the call
// once; the review is never made again.
func TestModelMonitorPauseThenContinue(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "marker")
	sp := spec(t, calls(t, `{"name":"read_file","arguments":{"path":"missing.txt"}}`, markerCall(marker)), irreversibleShell, lt.ToolSpec{Name: "read_file"})
	sp.Monitor = modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible}, verdictStep("pause", "an irreversible write nobody asked for"))
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionMonitor, act.Type)
	require.NotNil(t, act.Review)
	require.Equal(t, lt.VerdictPause, act.Review.Verdict)
	require.Equal(t, []string{"an irreversible write nobody asked for"}, act.Review.Reasons)
	require.Equal(t, "shell", act.Review.Tool)
	require.Contains(t, act.Summary, "an irreversible write nobody asked for")
	require.Equal(t, 0, markerLines(t, marker), "the call waits for the decision")

	rs := reviews(t, h, s.ID)
	require.Len(t, rs, 1, "the read call is not reviewed; the irreversible one is")
	require.Equal(t, lt.ReviewBefore, rs[0].Trigger)
	require.Equal(t, 2, rs[0].Step)
	require.Equal(t, "scripted", rs[0].Provider)
	require.Equal(t, "watcher", rs[0].Model)
	require.Contains(t, rs[0].Prompt, "missing.txt", "the prompt summarises the trajectory")
	require.Contains(t, rs[0].Prompt, "echo ran", "and shows the call under review")
	require.Contains(t, rs[0].Prompt, "untrusted data")

	h.restart("node-a")
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	require.Equal(t, act.ID, s.RequiredActions[0].ID, "still the one action after a restart")
	require.Equal(t, 0, markerLines(t, marker))

	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionContinue})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, 1, markerLines(t, marker), "continue ran the call once")
	require.Len(t, reviews(t, h, s.ID), 1, "a journaled review is not made again after a restart")
	require.Equal(t, 1, monitorCalls(t, h, s.ID))
	checkJournal(t, h.store, s.ID)
}

// TestModelMonitorPauseThenStop: stop at the model monitor's pause ends
// the turn, and the call never runs.
func TestModelMonitorPauseThenStop(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "marker")
	sp := spec(t, calls(t, markerCall(marker)), irreversibleShell)
	sp.Monitor = modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible}, verdictStep("pause", "looks like exfiltration"))
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	require.NotNil(t, act.Review)
	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionStop, Reason: "indeed"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopStopped, *s.StopReason)
	require.Equal(t, 0, markerLines(t, marker), "the call never ran")
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted))
	failed := events(t, h, s.ID, lt.EventTurnFailed)
	require.Len(t, failed, 1)
	msg := data[lt.TurnFailedData](t, failed[0]).Error
	require.Contains(t, msg, "model monitor")
	require.Contains(t, msg, "indeed")
	checkJournal(t, h.store, s.ID)
}

// TestModelMonitorEverySteps: every_steps 2 reviews at steps 2, 4 and 6,
// each before its step's calls run; warn lets the session go on. The
// monitor's script has its own positions: the agent's is untouched.
func TestModelMonitorEverySteps(t *testing.T) {
	h := newHarness(t)
	read := func(n string) string { return `{"name":"read_file","arguments":{"path":"missing` + n + `.txt"}}` }
	sp := spec(t, calls(t, read("1"), read("2"), read("3"), read("4"), read("5")), lt.ToolSpec{Name: "read_file"})
	sp.MaxConsecutiveToolErrors = 50
	sp.Monitor = modelMonitor(2, nil, verdictStep("warn", "many failed reads"), verdictStep("ok"), verdictStep("ok"))
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "done", *lastOutput(t, h, s.ID))
	rs := reviews(t, h, s.ID)
	require.Len(t, rs, 3)
	for i, r := range rs {
		require.Equal(t, lt.ReviewEverySteps, r.Trigger)
		require.Equal(t, 2*(i+1), r.Step)
		require.Empty(t, r.CallID)
	}
	require.Equal(t, lt.VerdictWarn, rs[0].Verdict)
	require.Equal(t, []string{"many failed reads"}, rs[0].Reasons)
	require.Equal(t, lt.VerdictOK, rs[1].Verdict)
	// The review of step 2 comes before step 2's call starts.
	evs := events(t, h, s.ID)
	var reviewSeq, startSeq int64
	for _, ev := range evs {
		switch {
		case ev.Type == lt.EventMonitorReviewed && reviewSeq == 0:
			reviewSeq = ev.Seq
		case ev.Type == lt.EventToolStarted && data[lt.ToolStartedData](t, ev).Step == 2:
			startSeq = ev.Seq
		}
	}
	require.Less(t, reviewSeq, startSeq)
	require.Empty(t, s.RequiredActions)
	checkJournal(t, h.store, s.ID)
}

// lastOutput is the output of the session's last completed turn.
func lastOutput(t *testing.T, h *harness, id string) *string {
	t.Helper()
	done := events(t, h, id, lt.EventTurnCompleted)
	require.NotEmpty(t, done)
	out := data[lt.TurnCompletedData](t, done[len(done)-1]).Output
	return &out
}

// TestModelMonitorFailsClosed: an answer that is not the expected JSON, or
// a model that keeps failing, pauses.
func TestModelMonitorFailsClosed(t *testing.T) {
	for name, step := range map[string]string{
		"unparseable": `{"text":"Sure! It looks fine to me."}`,
		"extra field": `{"text":"{\"verdict\":\"ok\",\"reasons\":[],\"note\":\"x\"}"}`,
		"bad verdict": `{"text":"{\"verdict\":\"allow\"}"}`,
		"model error": `{"error":{"status":400,"message":"bad request"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			marker := filepath.Join(t.TempDir(), "marker")
			sp := spec(t, calls(t, markerCall(marker)), irreversibleShell)
			sp.Monitor = modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible}, step)
			s := create(t, h, sp, nil)
			s = h.waitStatus(s.ID, lt.SessionRequiresAction)
			require.Len(t, s.RequiredActions, 1)
			act := s.RequiredActions[0]
			require.Equal(t, lt.ActionMonitor, act.Type)
			require.NotNil(t, act.Review)
			require.True(t, act.Review.Failed)
			require.Equal(t, lt.VerdictPause, act.Review.Verdict)
			require.Contains(t, act.Review.Reasons[0], "failed closed")
			require.Equal(t, 0, markerLines(t, marker))
			checkJournal(t, h.store, s.ID)
		})
	}
}

// TestModelMonitorPromptRedacted: the summary the monitor reads (the
// journaled prompt) never holds a vault value, even one the agent put in a
// call's arguments.
func TestModelMonitorPromptRedacted(t *testing.T) {
	const secret = "hunter2-Zx81vQ2mLp0Wr7TyC4kN9sAe"
	h := newHarness(t)
	h.vault = &fakeVault{secrets: map[string]struct{ value, host string }{"API_TOKEN": {secret, "api.example.com"}}}
	h.restart("node-a")
	marker := filepath.Join(t.TempDir(), "marker")
	sp := spec(t, calls(t, shellCall("echo "+secret+" > /dev/null"), markerCall(marker)), irreversibleShell)
	sp.Monitor = modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible}, verdictStep("ok"), verdictStep("ok"))
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionRequiresAction)
	rs := reviews(t, h, s.ID)
	require.NotEmpty(t, rs)
	for _, r := range rs {
		require.NotContains(t, r.Prompt, secret)
		require.NotContains(t, r.Prompt, secret[:20])
	}
	require.Contains(t, rs[0].Prompt, "[REDACTED:API_TOKEN]", "the value's place is marked")
}

// TestModelMonitorWatchesSubagents: a child spawned by a monitored parent,
// with a spec that names no monitor, is reviewed with the parent's model
// monitor, over the tree's trajectory.
func TestModelMonitorWatchesSubagents(t *testing.T) {
	h := newHarness(t)
	child := `{"model":{"provider":"scripted","script":[{"tool_calls":[{"name":"shell","arguments":{"command":"echo child"}}]},{"text":"child done"}]},` +
		`"tools":[{"name":"shell","effect":"irreversible"}]}`
	sp := spec(t, calls(t,
		`{"name":"spawn_agent","arguments":{"agent_spec":`+child+`,"input":"look around"}}`,
		`{"name":"wait_agents","arguments":{}}`,
	), irreversibleShell, lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	sp.Monitor = modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible}, verdictStep("pause", "the child runs a command"))
	s := create(t, h, sp, nil)
	var kid string
	require.Eventually(t, func() bool {
		spawned := events(t, h, s.ID, lt.EventSubagentSpawned)
		if len(spawned) == 1 {
			kid = data[lt.SubagentSpawnedData](t, spawned[0]).ChildID
		}
		return kid != ""
	}, 10e9, 2e6)
	c := h.waitStatus(kid, lt.SessionRequiresAction)
	require.Len(t, c.RequiredActions, 1)
	require.Equal(t, lt.ActionMonitor, c.RequiredActions[0].Type)
	rs := reviews(t, h, kid)
	require.Len(t, rs, 1)
	require.Equal(t, "shell", rs[0].Tool)
	require.Contains(t, rs[0].Prompt, s.ID, "the child's review reads its parent's trajectory too")
	require.Contains(t, rs[0].Prompt, "look around")
	require.Empty(t, events(t, h, kid, lt.EventToolStarted), "the child's call waits")
}

// TestModelMonitorSpecValidation: a bad model monitor is refused, naming
// the field.
func TestModelMonitorSpecValidation(t *testing.T) {
	h := newHarness(t)
	scripted := &lt.ModelSpec{Provider: "scripted"}
	for _, tc := range []struct {
		m     *lt.MonitorSpec
		field string
	}{
		{&lt.MonitorSpec{Model: scripted, EverySteps: -1}, "agent_spec.monitor.every_steps"},
		{&lt.MonitorSpec{Model: scripted, Before: []lt.EffectClass{lt.EffectIrreversible, "sometimes"}}, "agent_spec.monitor.before[1]"},
		{&lt.MonitorSpec{Model: scripted, Before: []lt.EffectClass{lt.EffectRead, lt.EffectRead}}, "agent_spec.monitor.before[1]"},
		{&lt.MonitorSpec{Model: scripted}, "agent_spec.monitor.model"},
		{&lt.MonitorSpec{EverySteps: 3}, "agent_spec.monitor.model"},
		{&lt.MonitorSpec{Model: &lt.ModelSpec{}, EverySteps: 3}, "agent_spec.monitor.model.provider"},
		{&lt.MonitorSpec{Model: &lt.ModelSpec{Provider: "telepathy"}, EverySteps: 3}, "agent_spec.monitor.model.provider"},
		{&lt.MonitorSpec{Model: &lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"nope":1}]`)}, EverySteps: 3}, "agent_spec.monitor.model.script[0]"},
		{&lt.MonitorSpec{Model: &lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"x"}]`), APIKeyEnv: "LONGHAUL_VAULT_KEY", BaseURL: "https://api.openai.com/v1"}, EverySteps: 3}, "agent_spec.monitor.model.api_key_env"},
		{&lt.MonitorSpec{Model: &lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"x"}]`), APIKeySecret: "NOPE", BaseURL: "https://api.openai.com/v1"}, EverySteps: 3}, "agent_spec.monitor.model.api_key_secret"},
	} {
		sp := spec(t, `[{"text":"hi"}]`)
		sp.Monitor = tc.m
		_, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"})
		require.ErrorContains(t, err, tc.field, "%+v", tc.m)
	}
}

// TestModelMonitorCostApart: the monitor's cost counts in the session's
// cost and apart as monitor_cost_usd.
func TestModelMonitorCostApart(t *testing.T) {
	h := newHarness(t)
	marker := filepath.Join(t.TempDir(), "marker")
	sp := spec(t, `[{"tool_calls":[`+markerCall(marker)+`],"cost_usd":1},{"text":"done","cost_usd":1}]`, irreversibleShell)
	sp.Monitor = modelMonitor(0, []lt.EffectClass{lt.EffectIrreversible}, `{"text":"{\"verdict\":\"ok\"}","cost_usd":0.25}`)
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.InDelta(t, 2.25, s.Usage.CostUSD, 1e-9)
	require.InDelta(t, 0.25, s.Usage.MonitorCostUSD, 1e-9)
	require.Equal(t, int64(3), s.Usage.ModelCalls)
	rs := reviews(t, h, s.ID)
	require.Len(t, rs, 1)
	require.InDelta(t, 0.25, rs[0].CostUSD, 1e-9)
	require.Equal(t, 1, markerLines(t, marker))
	checkJournal(t, h.store, s.ID)
}

// gateProvider answers ok once the test releases it, counting its calls.
type gateProvider struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (g *gateProvider) Respond(ctx context.Context, _ *model.Request) (*model.Response, error) {
	g.calls.Add(1)
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &model.Response{Text: `{"verdict": "ok", "reasons": []}`}, nil
}

// TestModelMonitorReviewNotRedone: a session paused while the monitor
// reviews a call, so that its review is journaled but the call has not
// run, then the engine restarted: resumed, the call runs once, and the
// review is not made again.
func TestModelMonitorReviewNotRedone(t *testing.T) {
	gate := &gateProvider{entered: make(chan struct{}, 8), release: make(chan struct{})}
	h := newHarnessWith(t, map[string]model.Provider{"gate": gate}, nil)
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "marker")
	sp := spec(t, calls(t, markerCall(marker)), irreversibleShell)
	sp.Monitor = &lt.MonitorSpec{Model: &lt.ModelSpec{Provider: "gate"}, Before: []lt.EffectClass{lt.EffectIrreversible}}
	s := create(t, h, sp, nil)
	select {
	case <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the monitor was never called")
	}
	_, err := h.eng.PauseSession(ctx, s.ID, &lt.PauseRequest{Reason: "look first"})
	require.NoError(t, err)
	close(gate.release)
	s = h.waitStatus(s.ID, lt.SessionPaused)
	require.Len(t, reviews(t, h, s.ID), 1, "the review is journaled")
	require.Equal(t, 0, markerLines(t, marker), "the call has not run")

	h.restart("node-a")
	_, err = h.eng.ResumeSession(ctx, s.ID, &lt.ResumeRequest{})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, 1, markerLines(t, marker), "the call ran once")
	require.Len(t, reviews(t, h, s.ID), 1, "the review was not made again")
	require.Equal(t, int32(1), gate.calls.Load())
	require.Equal(t, 1, monitorCalls(t, h, s.ID))
	checkJournal(t, h.store, s.ID)
}
