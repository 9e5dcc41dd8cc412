package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// childSpec is an inline agent for spawn_agent's agent_spec argument.
func childSpec(script string, tools ...string) map[string]any {
	ts := make([]map[string]any, 0, len(tools))
	for _, name := range tools {
		ts = append(ts, map[string]any{"name": name})
	}
	return map[string]any{
		"model":        map[string]any{"provider": "scripted", "script": json.RawMessage(script)},
		"instructions": "Do the sub-task.",
		"tools":        ts,
	}
}

func toolCall(name string, args any) map[string]any {
	return map[string]any{"name": name, "arguments": args}
}

// script builds a scripted model's script from steps.
func script(t *testing.T, steps ...any) string {
	t.Helper()
	raw, err := json.Marshal(steps)
	require.NoError(t, err)
	return string(raw)
}

func children(t *testing.T, h *harness, parentID string) []lt.Session {
	t.Helper()
	l, err := h.eng.ListSessions(context.Background(), lt.ListSessionsParams{ParentID: parentID, Limit: 100})
	require.NoError(t, err)
	return l.Data
}

// TestSubagentsRunInParallelAndReport: a session spawns two sub-agents in
// one step; they run in its workspace, each with a share of its budget,
// and wait_agents returns their answers and artifacts. Their usage rolls
// up into the parent's.
func TestSubagentsRunInParallelAndReport(t *testing.T) {
	h := newHarness(t)
	one := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("write_file", map[string]any{"path": "a.txt", "content": "from a"})}, "usage": map[string]any{"input_tokens": 100, "output_tokens": 10}},
		map[string]any{"tool_calls": []any{toolCall("finish", map[string]any{"summary": "wrote a", "artifacts": []string{"a.txt"}})}, "usage": map[string]any{"input_tokens": 100, "output_tokens": 10}},
	), "write_file", "finish")
	two := childSpec(script(t, map[string]any{"text": "b is done", "usage": map[string]any{"input_tokens": 50, "output_tokens": 5}}))
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{
			toolCall("spawn_agent", map[string]any{"agent_spec": one, "input": "write a"}),
			toolCall("spawn_agent", map[string]any{"agent_spec": two, "input": "do b"}),
		}, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}},
		map[string]any{"tool_calls": []any{toolCall("read_file", map[string]any{"path": "a.txt"})}, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}},
		map[string]any{"text": "all done", "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "read_file"},
		// A child holds at most its parent's tools.
		lt.ToolSpec{Name: "write_file"})
	s := create(t, h, parent, &lt.Budget{MaxModelCalls: 70})
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", s.StopReason)
	require.Equal(t, "all done", mustTurnOutput(t, h, s))

	kids := children(t, h, s.ID)
	require.Len(t, kids, 2)
	var sum lt.Usage
	for _, k := range kids {
		require.Equal(t, s.ID, *k.ParentID)
		require.Equal(t, lt.SessionIdle, k.Status)
		// An equal share of the 70 model calls among six free slots and
		// the parent, then five and the parent (the parent had used one).
		require.Positive(t, k.Budget.MaxModelCalls)
		require.LessOrEqual(t, k.Budget.MaxModelCalls, int64(10))
		sum.Add(k.Usage)
		checkJournal(t, h.store, k.ID)
	}
	spawned := events(t, h, s.ID, lt.EventSubagentSpawned)
	require.Len(t, spawned, 2)
	completed := events(t, h, s.ID, lt.EventSubagentCompleted)
	require.Len(t, completed, 2)

	// The parent's own four calls plus the children's.
	require.Equal(t, int64(4)+sum.ModelCalls, s.Usage.ModelCalls)
	require.Equal(t, int64(40)+sum.InputTokens, s.Usage.InputTokens)
	require.Equal(t, int64(250), sum.InputTokens)

	// wait_agents' result holds both answers and the artifact.
	var waitOut string
	for _, ev := range events(t, h, s.ID, lt.EventToolCompleted) {
		if d := data[lt.ToolCompletedData](t, ev); d.Tool == "wait_agents" {
			waitOut = string(d.Output)
		}
		if d := data[lt.ToolCompletedData](t, ev); d.Tool == "read_file" {
			require.Contains(t, string(d.Output), "from a", "the child wrote in the parent's workspace")
		}
	}
	require.Contains(t, waitOut, "wrote a")
	require.Contains(t, waitOut, "b is done")
	require.Contains(t, waitOut, `"name":"a.txt"`)
	require.NotContains(t, waitOut, `"running"`)
	checkJournal(t, h.store, s.ID)
}

// TestSubagentSlots: past max_parallel, a spawn waits (holding no worker)
// until a child finishes.
func TestSubagentSlots(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	waiter := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("wait_for_signal", map[string]any{"name": "go"})}},
		map[string]any{"text": "first done"},
	), "wait_for_signal")
	quick := childSpec(script(t, map[string]any{"text": "second done"}))
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{
			toolCall("spawn_agent", map[string]any{"agent_spec": waiter, "input": "wait"}),
			toolCall("spawn_agent", map[string]any{"agent_spec": quick, "input": "quick"}),
		}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{"mode": "all"})}},
		map[string]any{"text": "both done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	parent.Subagents = &lt.SubagentLimits{MaxParallel: 1}
	s := create(t, h, parent, nil)
	s = h.waitStatus(s.ID, lt.SessionWaiting)
	waits := events(t, h, s.ID, lt.EventWaitStarted)
	require.Len(t, waits, 1)
	require.Equal(t, lt.WaitSubagentSlot, data[lt.WaitStartedData](t, waits[0]).Kind)
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1, "the second spawn waits for a slot")
	h.waitStatus(kids[0].ID, lt.SessionWaiting)

	_, err := h.eng.SendSignal(ctx, kids[0].ID, &lt.SignalRequest{Name: "go"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, "both done", mustTurnOutput(t, h, s))
	kids = children(t, h, s.ID)
	require.Len(t, kids, 2)
	// The second child was created only after the first one reported.
	var firstDone int64
	for _, ev := range events(t, h, s.ID, lt.EventSubagentCompleted) {
		if data[lt.SubagentCompletedData](t, ev).ChildID != "" && firstDone == 0 {
			firstDone = ev.Seq
		}
	}
	spawned := events(t, h, s.ID, lt.EventSubagentSpawned)
	require.Len(t, spawned, 2)
	require.Greater(t, spawned[1].Seq, firstDone)
	checkJournal(t, h.store, s.ID)
}

// delegatingTree is a root that spawns a child (its input "delegate"),
// which spawns a grandchild that waits for a signal that never comes;
// each waits for its sub-agent.
func delegatingTree(t *testing.T) *lt.AgentSpec {
	t.Helper()
	grandchild := childSpec(script(t, map[string]any{"tool_calls": []any{toolCall("wait_for_signal", map[string]any{"name": "never"})}}), "wait_for_signal")
	child := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": grandchild, "input": "wait forever"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "unreachable"},
	), "spawn_agent", "wait_agents")
	return spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "delegate"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "unreachable"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
}

// waitingTree waits until the one child of the delegatingTree rootID and
// its one child both wait, and returns them.
func waitingTree(t *testing.T, h *harness, rootID string) (kid, grand lt.Session) {
	t.Helper()
	kids := children(t, h, rootID)
	require.Len(t, kids, 1)
	h.waitStatus(kids[0].ID, lt.SessionWaiting)
	var grands []lt.Session
	require.Eventually(t, func() bool { grands = children(t, h, kids[0].ID); return len(grands) == 1 }, testTimeout, pollEvery)
	h.waitStatus(grands[0].ID, lt.SessionWaiting)
	return kids[0], grands[0]
}

// TestCancelCascadesToSubagents: cancelling the parent cancels its
// children (and theirs); each reports how it ended.
func TestCancelCascadesToSubagents(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, delegatingTree(t), nil)
	s = h.waitStatus(s.ID, lt.SessionWaiting)
	kid, grand := waitingTree(t, h, s.ID)

	_, err := h.eng.CancelSession(ctx, s.ID, &lt.CancelRequest{Reason: "enough"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionCancelled)
	h.waitStatus(kid.ID, lt.SessionCancelled)
	h.waitStatus(grand.ID, lt.SessionCancelled)
	require.Eventually(t, func() bool {
		return len(events(t, h, s.ID, lt.EventSubagentCompleted)) == 1 && len(events(t, h, kid.ID, lt.EventSubagentCompleted)) == 1
	}, testTimeout, pollEvery, "each child reported its end")
	// A child journals subagent.reported after its parent has the report:
	// its journal is checked once that last event is there.
	require.Eventually(t, func() bool {
		return len(events(t, h, kid.ID, lt.EventSubagentReported)) == 1 && len(events(t, h, grand.ID, lt.EventSubagentReported)) == 1
	}, testTimeout, pollEvery, "each child recorded that its report was delivered")
	d := data[lt.SubagentCompletedData](t, events(t, h, s.ID, lt.EventSubagentCompleted)[0])
	require.Equal(t, lt.TurnCancelled, d.Status)
	for _, id := range []string{s.ID, kid.ID, grand.ID} {
		checkJournal(t, h.store, id)
	}
}

// TestSubagentInheritsPoliciesAndBudget: the parent's rules apply to the
// child, and the child cannot spend past its share.
func TestSubagentInheritsPoliciesAndBudget(t *testing.T) {
	h := newHarness(t)
	child := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("write_file", map[string]any{"path": "x.txt", "content": "x"})}},
		map[string]any{"text": "tried"},
	), "write_file")
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "write", "budget": map[string]any{"max_tool_calls": 1000}})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "write_file"})
	parent.Policies = []lt.Policy{{Name: "no-writes", Tool: "write_file", Decision: lt.PolicyDeny, Reason: "read-only task"}}
	s := create(t, h, parent, &lt.Budget{MaxToolCalls: 3})
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status)
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	// Asked for 1,000 tool calls, got what was left.
	require.Equal(t, int64(3), kids[0].Budget.MaxToolCalls)
	require.Zero(t, kids[0].Budget.MaxModelCalls, "no limit where the parent has none")
	var denied bool
	for _, ev := range events(t, h, kids[0].ID, lt.EventPolicyDecided) {
		d := data[lt.PolicyDecidedData](t, ev)
		denied = denied || (d.Rule == "parent.no-writes" && d.Decision == lt.PolicyDeny)
	}
	require.True(t, denied, "the parent's policy applies in the child")
}

// TestSubagentToolErrors: bad spawns come back to the model as tool errors.
func TestSubagentToolErrors(t *testing.T) {
	h := newHarness(t)
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{
			toolCall("spawn_agent", map[string]any{"agent": "nobody", "input": "x"}),
			toolCall("spawn_agent", map[string]any{"input": "x"}),
			toolCall("wait_agents", map[string]any{"ids": []string{"ses_unknown"}}),
			// A field an agent spec does not have is named, not dropped.
			toolCall("spawn_agent", map[string]any{"agent_spec": withField(childSpec(script(t, map[string]any{"text": "hi"})), "webhook_url", "http://elsewhere.example/hook"), "input": "x"}),
			toolCall("spawn_agent", map[string]any{"agent_spec": withField(childSpec(script(t, map[string]any{"text": "hi"})), "polices", []any{}), "input": "x"}),
		}},
		map[string]any{"text": "gave up"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	s := create(t, h, parent, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 5)
	msgs := ""
	for _, ev := range failed {
		msgs += data[lt.ToolFailedData](t, ev).Error + "\n"
	}
	require.Contains(t, msgs, `no agent named "nobody"`)
	require.Contains(t, msgs, "give exactly one of agent")
	require.Contains(t, msgs, `"ses_unknown" is not a sub-agent`)
	require.Contains(t, msgs, `agent_spec.webhook_url: unknown field "agent_spec.webhook_url"`)
	require.Contains(t, msgs, `agent_spec.polices: unknown field "agent_spec.polices"`)
	require.Empty(t, children(t, h, s.ID))
}

// withField returns m with key set to v.
func withField(m map[string]any, key string, v any) map[string]any {
	m[key] = v
	return m
}

// TestSubagentByNameInItsProject: a sub-agent spawned by name is its
// session's project's agent: an agent of that name in another project is
// no agent at all to it.
func TestSubagentByNameInItsProject(t *testing.T) {
	h := newHarness(t)
	leaf := lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"helped"}]`)}}
	a, err := h.eng.PutAgent(t.Context(), &lt.PutAgentRequest{Name: "helper", Spec: leaf, Project: "support"})
	require.NoError(t, err)
	require.Equal(t, "support", a.Project)
	spawner := func() *lt.AgentSpec {
		return spec(t, script(t,
			map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent": "helper", "input": "x"})}},
			map[string]any{"text": "done"},
		), lt.ToolSpec{Name: "spawn_agent"})
	}
	s := create(t, h, spawner(), nil) // a session of the default project
	s = h.waitStatus(s.ID, lt.SessionIdle)
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Contains(t, data[lt.ToolFailedData](t, failed[0]).Error, `no agent named "helper"`)
	require.Empty(t, children(t, h, s.ID))

	// Once the default project has its own helper, the same call spawns it.
	_, err = h.eng.PutAgent(t.Context(), &lt.PutAgentRequest{Name: "helper", Spec: leaf})
	require.NoError(t, err)
	s = create(t, h, spawner(), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	require.Equal(t, lt.AgentRef{Name: "helper", Version: 1}, kids[0].Agent)
}

// TestSubagentDepthLimit: a child at the maximum depth cannot spawn.
func TestSubagentDepthLimit(t *testing.T) {
	h := newHarness(t)
	leaf := childSpec(script(t, map[string]any{"text": "leaf"}))
	mid := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": leaf, "input": "deeper"})}},
		map[string]any{"text": "mid done"},
	), "spawn_agent")
	mid["subagents"] = map[string]any{"max_depth": 1}
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": mid, "input": "delegate"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	s := create(t, h, parent, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	require.Empty(t, children(t, h, kids[0].ID))
	failed := events(t, h, kids[0].ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Contains(t, data[lt.ToolFailedData](t, failed[0]).Error, "at most 1 deep")
}

// How long the tests poll for a state the engine reaches on its own.
const (
	testTimeout = 10 * time.Second
	pollEvery   = 2 * time.Millisecond
)

// TestTrajectoryRulesSpanTheTree: a rule that counts effects counts those
// of the whole tree: the parent's write uses up what the child may do.
func TestTrajectoryRulesSpanTheTree(t *testing.T) {
	h := newHarness(t)
	child := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("write_file", map[string]any{"path": "second.txt", "content": "2"})}},
		map[string]any{"text": "tried"},
	), "write_file")
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("write_file", map[string]any{"path": "first.txt", "content": "1"})}},
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "write"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "write_file"})
	parent.Policies = []lt.Policy{{Name: "one-write", Tool: "write_file", When: `count(effects, e.tool == "write_file") >= 1`, Decision: lt.PolicyDeny, Reason: "one write per tree"}}
	s := create(t, h, parent, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Empty(t, events(t, h, s.ID, lt.EventPolicyDecided), "the first write of the tree is allowed")
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	decided := events(t, h, kids[0].ID, lt.EventPolicyDecided)
	require.Len(t, decided, 1)
	d := data[lt.PolicyDecidedData](t, decided[0])
	require.Equal(t, "parent.one-write", d.Rule)
	require.Equal(t, lt.PolicyDeny, d.Decision, "the parent's write counts in the child")
}

// spawnErrors returns the errors of a session's failed spawn_agent calls.
func spawnErrors(t *testing.T, h *harness, id string) []string {
	t.Helper()
	var out []string
	for _, ev := range events(t, h, id, lt.EventToolFailed) {
		if d := data[lt.ToolFailedData](t, ev); d.Tool == "spawn_agent" {
			out = append(out, d.Error)
		}
	}
	return out
}

// TestSubagentCannotWiden: whichever form names the child — an inline
// agent_spec, a configured agent — a spawn that asks for more than the
// parent holds is one tool error naming each refused item, and no child
// exists; the instructions form gets exactly the parent's tools.
func TestSubagentCannotWiden(t *testing.T) {
	h := newHarnessWith(t, nil, map[string]string{"SERVER_KEY": "k-123"})
	h.vault = &fakeVault{secrets: map[string]struct{ value, host string }{"DEPLOY_TOKEN": {"t-456", "127.0.0.1"}}}
	h.restart("node-a")
	ctx := context.Background()

	wide := childSpec(script(t, map[string]any{"text": "out"}), "shell", "http_request")
	wide["environment"] = map[string]any{
		"network": map[string]any{"allow": []string{"127.0.0.1"}, "ports": []int{8443}},
		"secrets": []string{"DEPLOY_TOKEN"},
	}
	wide["model"].(map[string]any)["api_key_env"] = "SERVER_KEY"
	_, err := h.eng.PutAgent(ctx, &lt.PutAgentRequest{Name: "deployer", Spec: lt.AgentSpec{
		Model:       lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text": "deployed"}]`)},
		Tools:       []lt.ToolSpec{{Name: "shell"}, {Name: "sqlite_query"}},
		Environment: &lt.Environment{Secrets: []string{"DEPLOY_TOKEN"}},
	}})
	require.NoError(t, err)
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{
			toolCall("spawn_agent", map[string]any{"agent_spec": wide, "input": "exfiltrate"}),
			toolCall("spawn_agent", map[string]any{"agent": "deployer", "input": "deploy"}),
			toolCall("spawn_agent", map[string]any{"instructions": "Same tools, other task.", "input": "look"}),
		}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "shell"})
	s := create(t, h, parent, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	errs := spawnErrors(t, h, s.ID)
	require.Len(t, errs, 2)
	require.Equal(t, "child may not use model api_key_env SERVER_KEY: its parent may not; "+
		"child may not use tool http_request: its parent may not; "+
		"child may not use network 127.0.0.1:8443: its parent may not; "+
		"child may not use secret DEPLOY_TOKEN: its parent may not", errs[0])
	require.Equal(t, "child may not use tool sqlite_query: its parent may not; "+
		"child may not use secret DEPLOY_TOKEN: its parent may not", errs[1])
	for _, e := range errs {
		require.NotContains(t, e, "k-123")
		require.NotContains(t, e, "t-456")
	}

	kids := children(t, h, s.ID)
	require.Len(t, kids, 1, "only the instructions form was spawned")
	raw, err := h.store.SessionGet(ctx, kids[0].ID)
	require.NoError(t, err)
	var got lt.AgentSpec
	require.NoError(t, json.Unmarshal(raw.Spec, &got))
	require.Equal(t, parent.Tools, got.Tools)
	require.Equal(t, "Same tools, other task.", got.Instructions)
	require.Nil(t, got.Environment)
}

// TestSubagentGrandchildCannotWiden: a grandchild is narrowed against its
// own parent, which was narrowed already: the root's network does not
// reach a grandchild through a child that gave it up.
func TestSubagentGrandchildCannotWiden(t *testing.T) {
	h := newHarness(t)
	net := map[string]any{"network": map[string]any{"allow": []string{"127.0.0.1"}, "ports": []int{8443}}}
	grand := childSpec(script(t, map[string]any{"text": "out"}))
	grand["environment"] = net
	child := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": grand, "input": "deeper"})}},
		map[string]any{"text": "child done"},
	), "spawn_agent")
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "delegate"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	parent.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{8443}}}
	s := create(t, h, parent, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	require.Equal(t, []string{"child may not use network 127.0.0.1:8443: its parent may not"}, spawnErrors(t, h, kids[0].ID))
	require.Empty(t, children(t, h, kids[0].ID))
}

// TestSubagentSpecBudgetCannotRaise: a child spec's own budget is one more
// ask: it lowers the child's share, and never raises it.
func TestSubagentSpecBudgetCannotRaise(t *testing.T) {
	h := newHarness(t)
	big := childSpec(script(t, map[string]any{"text": "big"}))
	big["budget"] = map[string]any{"max_tool_calls": 1000, "max_cost_usd": 50}
	small := childSpec(script(t, map[string]any{"text": "small"}))
	small["budget"] = map[string]any{"max_tool_calls": 2}
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{
			toolCall("spawn_agent", map[string]any{"agent_spec": small, "input": "small"}),
			toolCall("spawn_agent", map[string]any{"agent_spec": big, "input": "big"}),
		}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	s := create(t, h, parent, &lt.Budget{MaxToolCalls: 12})
	s = h.waitStatus(s.ID, lt.SessionIdle)
	kids := children(t, h, s.ID)
	require.Len(t, kids, 2)
	for _, k := range kids {
		switch k.Input {
		case "big":
			require.LessOrEqual(t, k.Budget.MaxToolCalls, int64(10), "at most what the parent had left")
			require.Positive(t, k.Budget.MaxToolCalls)
			require.Equal(t, 50.0, k.Budget.MaxCostUSD, "a limit the parent does not have is the child's own ask")
		case "small":
			require.Equal(t, int64(2), k.Budget.MaxToolCalls)
		}
	}
}

// TestSubagentMCPUnderDenyAll: under a parent that denies every tool, an
// MCP server the parent has is never started, by the parent nor by a child
// that has it too; a server the parent lacks is refused before any process
// could start.
func TestSubagentMCPUnderDenyAll(t *testing.T) {
	h := newHarness(t)
	srv := testMCPServer(t, "docs")
	marker := filepath.Join(t.TempDir(), "marker")
	same := childSpec(script(t, map[string]any{"text": "no tools"}))
	same["tools"] = []lt.ToolSpec{srv}
	evil := childSpec(script(t, map[string]any{"text": "ran"}))
	evil["tools"] = []lt.ToolSpec{{Name: "evil", Type: "mcp", Command: "sh", Args: []string{"-c", "touch " + marker}}}
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{
			toolCall("spawn_agent", map[string]any{"agent_spec": evil, "input": "start it"}),
			toolCall("spawn_agent", map[string]any{"agent_spec": same, "input": "use docs"}),
		}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, srv)
	parent.Policies = []lt.Policy{{Name: "nothing", Tool: "*", Decision: lt.PolicyDeny}}
	s := create(t, h, parent, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, []string{"child may not use MCP server evil: its parent may not"}, spawnErrors(t, h, s.ID))
	kids := children(t, h, s.ID)
	require.Len(t, kids, 1)
	h.waitStatus(kids[0].ID, lt.SessionIdle)
	require.NoFileExists(t, marker)
	require.Empty(t, readLines(t, filepath.Join(h.workspace(s.ID), mcptest.PIDLog)), "no MCP server process started")
	require.Empty(t, events(t, h, s.ID, lt.EventMCPToolsListed))
	require.Empty(t, events(t, h, kids[0].ID, lt.EventMCPToolsListed))
}

// TestSubagentMCPStartsOnlyForAnAllowedCall: a sub-agent with its parent's
// MCP server offers the tools of the parent's listing ("parent") without
// starting the server; a call its policies deny starts nothing, and an
// allowed call starts the server for itself.
func TestSubagentMCPStartsOnlyForAnAllowedCall(t *testing.T) {
	h := newHarness(t)
	srv := testMCPServer(t, "docs", func(s *lt.ToolSpec) { s.Effects = map[string]lt.EffectClass{"echo": lt.EffectRead} })
	run := func(call map[string]any) (root, child string) {
		c := childSpec(script(t, map[string]any{"tool_calls": []any{call}}, map[string]any{"text": "child done"}))
		c["tools"] = []lt.ToolSpec{srv}
		parent := spec(t, script(t,
			map[string]any{"tool_calls": []any{
				toolCall("spawn_agent", map[string]any{"agent_spec": c, "input": "use docs"}),
				toolCall("wait_agents", map[string]any{}),
			}},
			map[string]any{"text": "done"},
		), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, srv)
		parent.Policies = []lt.Policy{{Name: "no-records", Tool: "docs__record", Decision: lt.PolicyDeny}}
		s := create(t, h, parent, nil)
		s = h.waitStatus(s.ID, lt.SessionIdle)
		kids := children(t, h, s.ID)
		require.Len(t, kids, 1)
		listed := events(t, h, kids[0].ID, lt.EventMCPToolsListed)
		require.NotEmpty(t, listed)
		d := data[lt.MCPToolsListedData](t, listed[0])
		require.Equal(t, "parent", d.Reason)
		require.Len(t, d.Tools, len(data[lt.MCPToolsListedData](t, events(t, h, s.ID, lt.EventMCPToolsListed)[0]).Tools))
		return s.ID, kids[0].ID
	}

	root, child := run(toolCall("docs__record", map[string]any{"note": "x"}))
	failed := events(t, h, child, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Equal(t, lt.RefusedPolicy, data[lt.ToolFailedData](t, failed[0]).Refused)
	require.Len(t, readLines(t, filepath.Join(h.workspace(root), mcptest.PIDLog)), 1, "only the parent's listing started the server")
	require.Empty(t, readLines(t, filepath.Join(h.workspace(root), mcptest.CallLog)))

	root, child = run(toolCall("docs__echo", map[string]any{"text": "hi"}))
	require.Len(t, events(t, h, child, lt.EventToolCompleted), 1)
	require.Len(t, readLines(t, filepath.Join(h.workspace(root), mcptest.PIDLog)), 2, "the allowed call started the child's own")
	checkJournal(t, h.store, child)
}
