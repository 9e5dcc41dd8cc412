package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestEmptyWorkspaceAcrossARestart: a session whose tools never wrote a
// file gets no snapshot list beside its workspace (the list's file is an
// inode a session), and its next turn after a restart of the node finds the
// copy as the journal left it: no environment.lost, no restore. A file put
// in the copy meanwhile (behind the journal's back) is found, as before.
func TestEmptyWorkspaceAcrossARestart(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[
		{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"},
		{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done again"},
		{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done a third time"}]`,
		lt.ToolSpec{Name: "list_files"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	require.DirExists(t, ws)
	require.NoFileExists(t, ws+".snapshots")
	checkpoints := len(events(t, h, s.ID, lt.EventCheckpointCreated))
	require.Positive(t, checkpoints)

	turn := func() {
		t.Helper()
		before := len(events(t, h, s.ID, lt.EventTurnCompleted))
		_, err := h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
		require.NoError(t, err)
		waitUntil(t, 10*time.Second, func() bool { return len(events(t, h, s.ID, lt.EventTurnCompleted)) > before })
		h.waitStatus(s.ID, lt.SessionIdle)
	}
	h.restart("node-a")
	// A person's read finds the copy current too (nothing restored, no
	// list written).
	listing, err := h.eng.ListFiles(ctx, s.ID, ".")
	require.NoError(t, err)
	require.Empty(t, listing.Entries)
	require.NoFileExists(t, ws+".snapshots")
	turn()
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost, lt.EventEnvironmentRestored))
	require.Greater(t, len(events(t, h, s.ID, lt.EventCheckpointCreated)), checkpoints)
	require.NoFileExists(t, ws+".snapshots")

	// Not the empty snapshot any longer: restored to it.
	require.NoError(t, os.WriteFile(filepath.Join(ws, "stray.txt"), []byte("x"), 0o600))
	h.restart("node-a")
	turn()
	require.Len(t, events(t, h, s.ID, lt.EventEnvironmentLost), 1)
	require.NoFileExists(t, filepath.Join(ws, "stray.txt"))
	checkJournal(t, h.store, s.ID)
}

// TestWorkspaceThatMayBeSharedKeepsItsList: a session that may spawn a
// sub-agent into its workspace keeps its snapshot list on disk from its
// first checkpoint, empty as the workspace is (its entry must outlive a
// restart once a sub-agent's files are in the copy).
func TestWorkspaceThatMayBeSharedKeepsItsList(t *testing.T) {
	h := newHarness(t)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "list_files"}, lt.ToolSpec{Name: "spawn_agent"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.FileExists(t, filepath.Join(h.dir, "workspaces", s.ID+".snapshots"))
}

// parkedAfterAWrite runs a session whose first step checkpoints the empty
// workspace and whose second writes draft.md with writer, then parks on a
// function call before that step's checkpoint: the copy holds a file no
// checkpoint holds. Its third step reads draft.md back.
func parkedAfterAWrite(t *testing.T, writer string, extra ...tool.Tool) (*harness, *planProvider, *lt.Session) {
	t.Helper()
	p := &planProvider{plan: []model.Response{
		call("list_files", `{}`),
		{ToolCalls: []model.ToolCall{
			{Name: writer, Arguments: json.RawMessage(`{"path":"draft.md","content":"v1"}`)},
			{Name: "lookup", Arguments: json.RawMessage(`{}`)},
		}},
		call("read_file", `{"path":"draft.md"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	if len(extra) > 0 {
		h.tools = append(tool.Builtins(), extra...)
		h.restart("node-a")
	}
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{
		{Name: "list_files"}, {Name: writer}, {Name: "read_file"}, {Name: "lookup", Type: "function"},
	}}, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.FileExists(t, filepath.Join(h.dir, "workspaces", s.ID, "draft.md"))
	return h, p, s
}

// requireReadBack checks that the session's last step read draft.md as
// written, and that no loss was journaled.
func requireReadBack(t *testing.T, h *harness, p *planProvider, id string) {
	t.Helper()
	require.Empty(t, events(t, h, id, lt.EventEnvironmentLost), "no loss journaled")
	steps := p.stepRequests()
	last := steps[len(steps)-1].msgs
	require.Contains(t, last[len(last)-1].Text, "v1", "read_file found what the step wrote")
	checkJournal(t, h.store, id)
}

// TestWriteSinceAnEmptyCheckpointSurvivesARestart: what a step wrote after
// the session's empty checkpoint, and before its own checkpoint (parked on
// a function call), is in the copy after a restart: the copy's list went
// to disk before the write, so the copy is not taken for a stale one and
// restored to the empty snapshot (found by a review: the file was lost).
// Through the Environment (write_file) and behind it (a Go tool writing in
// the workspace's directory); then resumed by the runner, or read by a
// person first (whose sync restored the empty snapshot, silently).
func TestWriteSinceAnEmptyCheckpointSurvivesARestart(t *testing.T) {
	for _, writer := range []string{"write_file", "put_file"} {
		for _, readFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/read first %v", writer, readFirst), func(t *testing.T) {
				h, p, s := parkedAfterAWrite(t, writer, putFile{})
				ctx := context.Background()
				h.restart("node-a")
				if readFirst {
					l, err := h.eng.ListFiles(ctx, s.ID, "")
					require.NoError(t, err)
					require.Len(t, l.Entries, 1, "the write journaled as done is in the copy")
				}
				_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"ok"`)})
				require.NoError(t, err)
				h.waitStatus(s.ID, lt.SessionIdle)
				requireReadBack(t, h, p, s.ID)
			})
		}
	}
}

// TestPersonsWriteAfterARestartKeepsTheEmptySnapshot: a person's change
// to a copy whose empty snapshot was kept in memory by a process since
// gone is made with the snapshot's entry noted again, so the session's
// next turn does not take the copy for a stale one.
func TestPersonsWriteAfterARestartKeepsTheEmptySnapshot(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"},
		{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done again"}]`, lt.ToolSpec{Name: "list_files"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	h.restart("node-a")
	_, err := h.eng.WriteFile(ctx, s.ID, "p.txt", []byte("person"), "")
	require.NoError(t, err)
	before := len(events(t, h, s.ID, lt.EventTurnCompleted))
	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	waitUntil(t, 10*time.Second, func() bool { return len(events(t, h, s.ID, lt.EventTurnCompleted)) > before })
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost))
	data, err := os.ReadFile(filepath.Join(h.dir, "workspaces", s.ID, "p.txt"))
	require.NoError(t, err)
	require.Equal(t, "person", string(data))
}

// TestWorkspaceFreeToolsMakeNoList: a tool that says it never touches the
// workspace gets no path, and a session of such calls keeps no list on
// disk; a tool that may open the workspace itself has the list written
// before it runs.
func TestWorkspaceFreeToolsMakeNoList(t *testing.T) {
	free, opens := &pathSeen{free: true}, &pathSeen{}
	h := newHarness(t, free, opens)
	run := func(name string) string {
		t.Helper()
		s := create(t, h, spec(t, `[{"tool_calls":[{"name":"`+name+`","arguments":{}}]},{"tool_calls":[{"name":"`+name+`","arguments":{}}]},{"text":"done"}]`,
			lt.ToolSpec{Name: name}), nil)
		h.waitStatus(s.ID, lt.SessionIdle)
		return s.ID
	}
	id := run("free_tool")
	require.Equal(t, []string{"", ""}, free.paths())
	require.NoFileExists(t, filepath.Join(h.dir, "workspaces", id+".snapshots"))
	id = run("opens_tool")
	require.Equal(t, []string{filepath.Join(h.dir, "workspaces", id), filepath.Join(h.dir, "workspaces", id)}, opens.paths())
	require.FileExists(t, filepath.Join(h.dir, "workspaces", id+".snapshots"))
}

// putFile writes a file in the workspace's directory itself, behind the
// Environment's back, as an application's Go tool may.
type putFile struct{}

func (putFile) Name() string                { return "put_file" }
func (putFile) Description() string         { return "Writes a file." }
func (putFile) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (putFile) Effect() lt.EffectClass      { return lt.EffectIdempotent }
func (putFile) Run(_ context.Context, c *tool.Call) (*tool.Result, error) {
	var in struct{ Path, Content string }
	if err := json.Unmarshal(c.Arguments, &in); err != nil {
		return nil, err
	}
	return &tool.Result{Output: "ok"}, os.WriteFile(filepath.Join(c.Workspace, in.Path), []byte(in.Content), 0o600)
}

// pathSeen records the workspace path each call got.
type pathSeen struct {
	free bool
	mu   sync.Mutex
	seen []string
}

func (p *pathSeen) Name() string {
	if p.free {
		return "free_tool"
	}
	return "opens_tool"
}
func (p *pathSeen) Description() string         { return "Looks." }
func (p *pathSeen) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (p *pathSeen) Effect() lt.EffectClass      { return lt.EffectRead }
func (p *pathSeen) WorkspaceFree() bool         { return p.free }
func (p *pathSeen) Run(_ context.Context, c *tool.Call) (*tool.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, c.Workspace)
	return &tool.Result{Output: "ok"}, nil
}

func (p *pathSeen) paths() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// TestOnlyALoneSessionKeepsItsListInMemory: a session's Environment is
// opened Unshared only when no other session can work in its workspace: a
// session without spawn_agent, never its sub-agent (which spawns none
// itself: were it Unshared, its empty snapshot kept in memory while its
// root wrote files would, after a restart, have it restore the empty
// snapshot over them), nor the root that spawned it.
func TestOnlyALoneSessionKeepsItsListInMemory(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	unshared := map[string][]bool{}
	h.wrapEnvironments = func(b environment.Backend) environment.Backend {
		return openSpy{Backend: b, seen: func(p *environment.OpenParams) {
			mu.Lock()
			defer mu.Unlock()
			unshared[p.Session] = append(unshared[p.Session], p.Unshared)
		}}
	}
	h.restart("node-a")
	lone := create(t, h, spec(t, `[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"}]`, lt.ToolSpec{Name: "list_files"}), nil)
	h.waitStatus(lone.ID, lt.SessionIdle)
	kid := childSpec(script(t,
		map[string]any{"tool_calls": []any{toolCall("list_files", map[string]any{})}},
		map[string]any{"text": "kid done"},
	), "list_files")
	root := create(t, h, spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": kid, "input": "look"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "root done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"}, lt.ToolSpec{Name: "list_files"}), nil)
	h.waitStatus(root.ID, lt.SessionIdle)
	kids := children(t, h, root.ID)
	require.Len(t, kids, 1)

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, unshared[lone.ID])
	for _, u := range unshared[lone.ID] {
		require.True(t, u, "a session alone in its workspace")
	}
	for _, id := range []string{root.ID, kids[0].ID} {
		require.NotEmpty(t, unshared[id], id)
		for _, u := range unshared[id] {
			require.False(t, u, "%s shares its workspace", id)
		}
	}
	require.FileExists(t, filepath.Join(h.dir, "workspaces", root.ID+".snapshots"))
}

// openSpy reports the params of every Open of its Backend.
type openSpy struct {
	environment.Backend
	seen func(*environment.OpenParams)
}

func (s openSpy) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	s.seen(p)
	return s.Backend.Open(ctx, p)
}

// TestMCPServersWriteSinceAnEmptyCheckpointSurvivesARestart: an MCP stdio
// server runs from the turn's start, so it may write into the workspace
// after an empty checkpoint, over its own pipe, with no call of the
// Environment to put the copy's list on disk first. The empty snapshot is
// therefore not kept in memory while it runs: after a restart the copy,
// holding what the server wrote, is not taken for a stale one and restored
// (found by a review: the write was lost). In bubblewrap, whose TMPDIR is
// not the workspace, and with a server that writes nothing at its start,
// so the workspace is empty at the first checkpoint; the server's call
// allowed by a policy, so that the session parks (and the server stops)
// only after it.
func TestMCPServersWriteSinceAnEmptyCheckpointSurvivesARestart(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	sb, err := sandbox.NewBwrap(sandbox.BwrapOptions{ReadOnlyPaths: []string{filepath.Dir(exe)}})
	if err != nil {
		t.Skipf("no bubblewrap here: %v", err)
	}
	p := &planProvider{plan: []model.Response{
		call("list_files", `{}`),
		{ToolCalls: []model.ToolCall{
			{Name: "t__record", Arguments: json.RawMessage(`{"note":"n1"}`)},
			{Name: "lookup", Arguments: json.RawMessage(`{}`)},
		}},
		call("list_files", `{}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	h.sandbox = sb
	h.restart("node-a")
	server := testMCPServer(t, "t", func(s *lt.ToolSpec) { s.Env[mcptest.QuietEnv] = "1" })
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"},
		Tools:    []lt.ToolSpec{{Name: "list_files"}, server, {Name: "lookup", Type: "function"}},
		Policies: []lt.Policy{{Name: "allow_record", Tool: "t__record", Decision: "allow"}},
	}, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Equal(t, lt.ActionFunctionCall, s.RequiredActions[0].Type)
	require.FileExists(t, filepath.Join(h.workspace(s.ID), mcptest.CallLog), "the server wrote in the workspace")

	h.restart("node-a")
	_, err = h.eng.DecideAction(context.Background(), s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"ok"`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost), "no loss journaled")
	require.FileExists(t, filepath.Join(h.workspace(s.ID), mcptest.CallLog), "what the server wrote is still there")
	checkJournal(t, h.store, s.ID)
}

// TestUntouchedWorkspaceIsNotMade: a session whose tools never reach its
// workspace (the application's functions, tools that say they never touch
// it) gets no directory for it: its checkpoints hold the empty snapshot,
// and its next turn after a restart finds the copy as the journal left it
// (no environment.lost, nothing made). A person's change makes the copy,
// holding the empty snapshot and the change, which the next turn keeps
// and checkpoints.
func TestUntouchedWorkspaceIsNotMade(t *testing.T) {
	free := &pathSeen{free: true}
	h := newHarness(t, free)
	ctx := context.Background()
	s := create(t, h, spec(t, `[
		{"tool_calls":[{"name":"free_tool","arguments":{}}]},{"text":"done"},
		{"tool_calls":[{"name":"free_tool","arguments":{}}]},{"text":"done again"},
		{"tool_calls":[{"name":"free_tool","arguments":{}}]},{"text":"done a third time"}]`,
		lt.ToolSpec{Name: "free_tool"}, lt.ToolSpec{Name: "lookup", Type: "function"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	require.NoDirExists(t, ws)
	require.NoFileExists(t, ws+".snapshots")
	snaps := func() []string {
		var ids []string
		for _, ev := range events(t, h, s.ID, lt.EventCheckpointCreated) {
			var d lt.CheckpointCreatedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			ids = append(ids, d.Checkpoint.Snapshot)
		}
		return ids
	}
	empty := snaps()
	require.NotEmpty(t, empty)
	require.NotEmpty(t, empty[0])
	turn := func() {
		t.Helper()
		before := len(events(t, h, s.ID, lt.EventTurnCompleted))
		_, err := h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
		require.NoError(t, err)
		waitUntil(t, 10*time.Second, func() bool { return len(events(t, h, s.ID, lt.EventTurnCompleted)) > before })
		h.waitStatus(s.ID, lt.SessionIdle)
	}
	h.restart("node-a")
	turn()
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost, lt.EventEnvironmentRestored))
	require.NoDirExists(t, ws)
	for _, id := range snaps() {
		require.Equal(t, empty[0], id, "every checkpoint holds the empty snapshot")
	}

	// A person's change: the copy is made for it, and kept.
	_, err := h.eng.WriteFile(ctx, s.ID, "p.txt", []byte("person"), "")
	require.NoError(t, err)
	turn()
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost))
	data, err := os.ReadFile(filepath.Join(ws, "p.txt"))
	require.NoError(t, err)
	require.Equal(t, "person", string(data))
	all := snaps()
	require.NotEqual(t, empty[0], all[len(all)-1], "the change is in the last checkpoint")
	require.Equal(t, []string{"", "", ""}, free.paths(), "the tool never got the workspace's path")
	checkJournal(t, h.store, s.ID)
}
