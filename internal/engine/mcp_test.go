package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/mcp/mcptest"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// testMCPServer is a tools entry that runs this test binary as the stdio
// MCP test server (mcptest) in the session's workspace.
func testMCPServer(t *testing.T, name string, mod ...func(*lt.ToolSpec)) lt.ToolSpec {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	s := lt.ToolSpec{Name: name, Type: "mcp", Command: exe, Args: []string{"-test.run=^$"}, Env: map[string]string{mcptest.ServeEnv: "1"}}
	for _, m := range mod {
		m(&s)
	}
	return s
}

func (h *harness) workspace(id string) string {
	return filepath.Join(h.dir, "workspaces", id)
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// requireGone waits until every stdio test server the session started has
// exited: a session that waits or is idle holds no server process.
func requireGone(t *testing.T, ws string) {
	t.Helper()
	pids := readLines(t, filepath.Join(ws, mcptest.PIDLog))
	require.NotEmpty(t, pids, "no server was started")
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		require.NoError(t, err)
		for syscall.Kill(pid, 0) == nil {
			require.True(t, time.Now().Before(deadline), "MCP server process %d still runs", pid)
			time.Sleep(5 * time.Millisecond) // polling with a deadline
		}
	}
}

// TestMCPToolsListedAndCalled: an MCP server's tools are listed once and
// journaled; the model calls them as <server>__<tool>; a call is requested,
// started (with its idempotency key, passed to the server) and completed
// like a built-in's, with the server's name; a tool the agent trusts to be
// read-only runs at once, one that is not asks a person first (the default
// policy); the server is stopped when the session waits and when it is idle.
func TestMCPToolsListedAndCalled(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[
		{"tool_calls":[{"name":"t__echo","arguments":{"text":"hi"}},{"name":"t__record","arguments":{"note":"n1"}}]},
		{"tool_calls":[{"name":"t__add","arguments":{"a":2,"b":3}}]},
		{"text":"done"}]`,
		testMCPServer(t, "t", func(s *lt.ToolSpec) { s.TrustAnnotations = true })), nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionApproval, act.Type)
	require.Equal(t, "t__record", act.Tool, "not read-only: the default policy asks")
	require.Equal(t, "mcp_default", act.Policy)
	requireGone(t, h.workspace(s.ID))

	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: "approve"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Equal(t, "t__add", s.RequiredActions[0].Tool, "idempotent is not read-only")
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Decision: "approve"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	requireGone(t, h.workspace(s.ID))

	listed := events(t, h, s.ID, lt.EventMCPToolsListed)
	require.Len(t, listed, 1, "the same tools are journaled once, however often they are listed")
	l := data[lt.MCPToolsListedData](t, listed[0])
	require.Equal(t, "t", l.Server)
	require.Equal(t, "first", l.Reason)
	require.Equal(t, "mcptest", l.ServerName)
	classes := map[string]lt.EffectClass{}
	for _, tl := range l.Tools {
		classes[tl.Name] = tl.Effect
	}
	require.Equal(t, lt.EffectRead, classes["t__echo"])
	require.Equal(t, lt.EffectIdempotent, classes["t__add"])
	require.Equal(t, lt.EffectIrreversible, classes["t__record"])

	var started []lt.ToolStartedData
	for _, ev := range events(t, h, s.ID, lt.EventToolRequested, lt.EventToolStarted, lt.EventToolCompleted) {
		switch ev.Type {
		case lt.EventToolRequested:
			d := data[lt.ToolRequestedData](t, ev)
			require.Equal(t, lt.CallMCP, d.Kind)
			require.Equal(t, "t", d.Server)
		case lt.EventToolStarted:
			d := data[lt.ToolStartedData](t, ev)
			require.Equal(t, "t", d.Server)
			started = append(started, d)
		case lt.EventToolCompleted:
			d := data[lt.ToolCompletedData](t, ev)
			require.Equal(t, "t", d.Server)
			if d.Tool == "t__echo" {
				require.JSONEq(t, `{"content":[{"type":"text","text":"echo: hi"}]}`, string(d.Output))
			}
			if d.Tool == "t__add" {
				require.JSONEq(t, `{"content":[{"type":"text","text":"5"}],"structured_content":{"sum":5}}`, string(d.Output))
			}
		}
	}
	require.Len(t, started, 3)
	var recordKey string
	for _, st := range started {
		if st.Tool == "t__record" {
			recordKey = st.IdempotencyKey
		}
	}
	require.Equal(t, []string{"record " + recordKey + " n1"}, readLines(t, filepath.Join(h.workspace(s.ID), mcptest.CallLog)))
	effects, err := h.eng.ListEffects(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, effects, 3)
	for _, e := range effects {
		require.Equal(t, lt.EffectSucceeded, e.Status)
	}
	checkJournal(t, h.store, s.ID)
}

// TestMCPErrorsAndPolicies: a tool's isError result and a server's protocol
// error are failures the model reads; unknown tools and bad arguments fail
// before anything is sent; policies name MCP tools one by one or by
// "<server>__*".
func TestMCPErrorsAndPolicies(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[
		{"tool_calls":[{"name":"t__fail","arguments":{}},{"name":"t__refuse","arguments":{}},{"name":"t__nope","arguments":{}},
		               {"name":"t__echo","arguments":{"text":5}},{"name":"t__record","arguments":{"note":"x"}}]},
		{"text":"done"}]`, testMCPServer(t, "t"))
	sp.Policies = []lt.Policy{
		{Tool: "t__*", Decision: lt.PolicyAllow},
		{Name: "no records", Tool: "t__record", Decision: lt.PolicyDeny, Reason: "not today"},
	}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	failures := map[string]lt.ToolFailedData{}
	for _, ev := range events(t, h, s.ID, lt.EventToolFailed) {
		d := data[lt.ToolFailedData](t, ev)
		failures[d.Tool] = d
	}
	require.Equal(t, "it failed as asked", failures["t__fail"].Error)
	require.Contains(t, failures["t__refuse"].Error, "refused the call: error -32000: refused by the test server")
	require.Contains(t, failures["t__nope"].Error, `unknown tool "t__nope"`)
	require.Contains(t, failures["t__echo"].Error, "arguments.text")
	require.Equal(t, lt.RefusedPolicy, failures["t__record"].Refused)
	require.Contains(t, failures["t__record"].Error, "not today")
	for _, name := range []string{"t__fail", "t__refuse"} {
		require.False(t, failures[name].Retry, "%s: not transient", name)
		require.Equal(t, "t", failures[name].Server)
	}
	require.Empty(t, readLines(t, filepath.Join(h.workspace(s.ID), mcptest.CallLog)), "the denied call never reached the server")
	require.Empty(t, s.RequiredActions)
	checkJournal(t, h.store, s.ID)
}

// TestMCPCrashMidCallIrreversible: the server dies during an irreversible
// call: the journal says so (mcp.server_lost) and the effect is in doubt,
// never re-run blindly; a person's did_not_happen runs it again, with the
// same idempotency key, on a restarted server.
func TestMCPCrashMidCallIrreversible(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[{"tool_calls":[{"name":"t__crash_once","arguments":{"note":"pay"}}]},{"text":"done"}]`, testMCPServer(t, "t"))
	sp.Policies = []lt.Policy{{Tool: "t__*", Decision: lt.PolicyAllow}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, lt.ActionInDoubt, act.Type)
	require.Equal(t, "t__crash_once", act.Tool)
	lost := events(t, h, s.ID, lt.EventMCPServerLost)
	require.Len(t, lost, 1)
	ld := data[lt.MCPServerLostData](t, lost[0])
	require.Equal(t, "t", ld.Server)
	require.Contains(t, ld.Error, "exit status 3")
	require.Contains(t, ld.Error, "crashing as asked")
	// The person deciding reads that the server went away, not that a
	// worker stopped: nothing stopped but the server.
	require.Contains(t, act.Summary, `the MCP server "t" went away during the call, before it answered`)
	require.NotContains(t, act.Summary, "worker")
	ws := h.workspace(s.ID)
	require.Len(t, readLines(t, filepath.Join(ws, mcptest.CallLog)), 1, "ran once, not retried")

	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: lt.DecisionDidNotHappen})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	key := act.IdempotencyKey
	require.NotEmpty(t, key)
	require.Equal(t, []string{"crash_once " + key + " crashed", "crash_once " + key + " answered"},
		readLines(t, filepath.Join(ws, mcptest.CallLog)), "the re-run carries the same key")
	effects, err := h.eng.ListEffects(ctx, s.ID)
	require.NoError(t, err)
	require.Len(t, effects, 1)
	require.Equal(t, lt.EffectSucceeded, effects[0].Status)
	checkJournal(t, h.store, s.ID)
}

// TestMCPCrashMidCallIdempotent: the server dies during an idempotent call:
// it is retried (same effect, same key) once the server restarted, and the
// tools the model sees do not change (the same listing is not journaled
// again).
func TestMCPCrashMidCallIdempotent(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"tool_calls":[{"name":"t__crash_once","arguments":{"note":"upsert"}}]},{"text":"done"}]`,
		testMCPServer(t, "t", func(s *lt.ToolSpec) { s.Effects = map[string]lt.EffectClass{"crash_once": lt.EffectIdempotent} }))
	sp.Policies = []lt.Policy{{Tool: "t__crash_once", Decision: lt.PolicyAllow}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	var retried bool
	for _, ev := range events(t, h, s.ID, lt.EventToolFailed) {
		d := data[lt.ToolFailedData](t, ev)
		require.True(t, d.Retry, "only the retried attempt failed")
		require.Contains(t, d.Error, "broke during the call")
		retried = true
	}
	require.True(t, retried)
	started := events(t, h, s.ID, lt.EventToolStarted)
	require.Len(t, started, 2)
	k1, k2 := data[lt.ToolStartedData](t, started[0]), data[lt.ToolStartedData](t, started[1])
	require.Equal(t, k1.IdempotencyKey, k2.IdempotencyKey)
	require.Equal(t, k1.EffectID, k2.EffectID)
	require.Equal(t, 2, k2.Attempt)
	require.Equal(t, []string{"crash_once " + k1.IdempotencyKey + " crashed", "crash_once " + k1.IdempotencyKey + " answered"},
		readLines(t, filepath.Join(h.workspace(s.ID), mcptest.CallLog)))
	require.Len(t, events(t, h, s.ID, lt.EventMCPToolsListed), 1)
	checkJournal(t, h.store, s.ID)
}

// TestMCPServerThatCannotStart: a server with no listing that cannot be
// started ends the turn (sandbox_error), saying why, after bounded retries.
func TestMCPServerThatCannotStart(t *testing.T) {
	h := newHarness(t)
	s := create(t, h, spec(t, `[{"text":"never"}]`, lt.ToolSpec{Name: "gone", Type: "mcp", Command: "/nonexistent/mcp-server"}), nil)
	s = h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopSandboxError, *s.StopReason)
	failed := events(t, h, s.ID, lt.EventTurnFailed)
	require.Len(t, failed, 1)
	d := data[lt.TurnFailedData](t, failed[0])
	require.Contains(t, d.Error, "MCP server gone could not be listed")
	require.Contains(t, d.Error, "3 failed starts in a row")
}

// TestMCPSpecValidation: MCP entries are checked when the agent is defined,
// and policies may name their tools before they are listed.
func TestMCPSpecValidation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ok := lt.ToolSpec{Name: "docs", Type: "mcp", Command: "docs-server"}
	for _, tc := range []struct {
		name  string
		tools []lt.ToolSpec
		pol   []lt.Policy
		field string
		msg   string
	}{
		{"bad name", []lt.ToolSpec{{Name: "my__docs", Type: "mcp", Command: "x"}}, nil, "spec.tools[0].name", "single _"},
		{"no command or url", []lt.ToolSpec{{Name: "docs", Type: "mcp"}}, nil, "spec.tools[0].command", "required"},
		{"both", []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "x", URL: "https://docs.example.com/mcp"}}, nil, "spec.tools[0].url", "not both"},
		{"server-wide effect", []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "x", Effect: lt.EffectRead}}, nil, "spec.tools[0].effect", "effects"},
		{"bad url", []lt.ToolSpec{{Name: "docs", Type: "mcp", URL: "ftp://docs.example.com"}}, nil, "spec.tools[0].url", "http or https"},
		{"headers on stdio", []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "x", HeadersSecret: "DOCS_TOKEN"}}, nil, "spec.tools[0].headers_secret", "streamable HTTP"},
		{"no vault", []lt.ToolSpec{{Name: "docs", Type: "mcp", URL: "https://docs.example.com/mcp", HeadersSecret: "DOCS_TOKEN"}}, nil, "spec.tools[0].headers_secret", "no vault"},
		{"bad effect", []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "x", Effects: map[string]lt.EffectClass{"echo": "maybe"}}}, nil, "spec.tools[0].effects.echo", "read, idempotent or irreversible"},
		{"effect outside allowlist", []lt.ToolSpec{{Name: "docs", Type: "mcp", Command: "x", Tools: []string{"search"}, Effects: map[string]lt.EffectClass{"echo": "read"}}}, nil, "spec.tools[0].effects.echo", "not in tools"},
		{"mcp field on a built-in", []lt.ToolSpec{{Name: "shell", Command: "x"}}, nil, "spec.tools[0].command", "only to MCP servers"},
		{"name clash", []lt.ToolSpec{ok, {Name: "docs__search", Type: "function"}}, nil, "spec.tools[1].name", "namespace of MCP server docs"},
		{"policy for another server", []lt.ToolSpec{ok}, []lt.Policy{{Tool: "wiki__search", Decision: lt.PolicyDeny}}, "spec.policies[0].tool", `no tool "wiki__search"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.eng.PutAgent(ctx, &lt.PutAgentRequest{Name: "a", Spec: lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"ok"}]`)}, Tools: tc.tools, Policies: tc.pol}})
			requireInvalid(t, err, tc.field, tc.msg)
		})
	}
	_, err := h.eng.PutAgent(ctx, &lt.PutAgentRequest{Name: "a", Spec: lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"ok"}]`)},
		Tools: []lt.ToolSpec{ok, {Name: "web", Type: "mcp", URL: "https://web.example.com/mcp", Tools: []string{"fetch"}, Effects: map[string]lt.EffectClass{"fetch": "read"}}},
		Policies: []lt.Policy{
			{Tool: "docs__*", Decision: lt.PolicyAsk},
			{Tool: "docs__delete_page", Decision: lt.PolicyDeny},
			{Tool: "web__fetch", When: `args.url.startsWith("https://")`, Decision: lt.PolicyAllow},
		},
	}})
	require.NoError(t, err)
}

// requireInvalid requires a 400 naming field, with msg in its message.
func requireInvalid(t *testing.T, err error, field, msg string) {
	t.Helper()
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, field, ae.Field, err.Error())
	require.Contains(t, ae.Message, msg)
}

// TestMCPOverHTTP: a streamable HTTP server is reached through the
// session's network allowlist (the decisions journaled, via "mcp"), with
// the vault secret of headers_secret added outside the sandbox and never
// journaled.
func TestMCPOverHTTP(t *testing.T) {
	const token = "mcp-secret-token-42"
	var mu sync.Mutex
	var auths []string
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server {
		return mcptest.NewServer(mcptest.Options{Dir: t.TempDir()})
	}, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()

	h := newHarness(t)
	h.vault = &fakeVault{secrets: map[string]struct{ value, host string }{"DOCS_TOKEN": {token, "127.0.0.1"}}}
	h.restart("node-a")
	sp := spec(t, `[{"tool_calls":[{"name":"docs__echo","arguments":{"text":"over http"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "docs", Type: "mcp", URL: srv.URL + "/mcp", HeadersSecret: "DOCS_TOKEN", Tools: []string{"echo"}, Effects: map[string]lt.EffectClass{"echo": lt.EffectRead}})
	sp.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"127.0.0.1"}, Ports: []int{srvPort(t, srv.URL)}}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status, "stop reason %v", s.StopReason)

	done := events(t, h, s.ID, lt.EventToolCompleted)
	require.Len(t, done, 1)
	require.Contains(t, string(done[0].Data), "echo: over http")
	l := data[lt.MCPToolsListedData](t, events(t, h, s.ID, lt.EventMCPToolsListed)[0])
	require.Len(t, l.Tools, 1, "the allowlist hides the others")
	require.NotEmpty(t, l.Hidden)

	conns := events(t, h, s.ID, lt.EventNetworkConnection)
	require.NotEmpty(t, conns)
	for _, ev := range conns {
		d := data[lt.NetworkConnectionData](t, ev)
		require.Equal(t, "mcp", d.Via)
		require.True(t, d.Allowed)
	}
	mu.Lock()
	require.NotEmpty(t, auths)
	for _, a := range auths {
		require.Equal(t, "Bearer "+token, a)
	}
	mu.Unlock()
	for _, ev := range events(t, h, s.ID) {
		require.NotContains(t, string(ev.Data), token, "event %s", ev.Type)
	}

	// Not on the allowlist: the server cannot be listed, and the turn says why.
	sp2 := spec(t, `[{"text":"never"}]`, lt.ToolSpec{Name: "docs", Type: "mcp", URL: srv.URL + "/mcp"})
	sp2.Environment = &lt.Environment{Network: &lt.NetworkSpec{Allow: []string{"api.example.com"}}}
	s2 := create(t, h, sp2, nil)
	s2 = h.waitStatus(s2.ID, lt.SessionFailed)
	require.Equal(t, lt.StopSandboxError, *s2.StopReason)
	refused := events(t, h, s2.ID, lt.EventNetworkConnection)
	require.NotEmpty(t, refused)
	require.False(t, data[lt.NetworkConnectionData](t, refused[0]).Allowed)
}

// TestMCPServerNameIsNoTool: an MCP server's own name is not a tool the
// model can call (only "<server>__<tool>" are): a call of it fails as an
// unknown tool, before anything starts, and the turn goes on.
func TestMCPServerNameIsNoTool(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"tool_calls":[{"name":"t","arguments":{}}]},{"text":"done"}]`, testMCPServer(t, "t"))
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 1)
	d := data[lt.ToolFailedData](t, failed[0])
	require.Equal(t, "t", d.Tool)
	require.Equal(t, `unknown tool "t"`, d.Error)
	require.Empty(t, d.Server)
	requested := data[lt.ToolRequestedData](t, events(t, h, s.ID, lt.EventToolRequested)[0])
	require.Equal(t, lt.CallInvalid, requested.Kind)
	require.Empty(t, events(t, h, s.ID, lt.EventToolStarted))
	checkJournal(t, h.store, s.ID)
}

// TestMCPCallOfAStoppedWorkerRunsAgain: the worker running an idempotent
// MCP call stops mid-call (its engine stops; the lease expires), and the
// node that resumes the session runs the call again through the tool's
// server, with the same effect and key, as a built-in would be: the turn
// does not fail for a tool that is not built in.
func TestMCPCallOfAStoppedWorkerRunsAgain(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"tool_calls":[{"name":"t__hang","arguments":{}}]},{"text":"done"}]`,
		testMCPServer(t, "t", func(s *lt.ToolSpec) { s.Effects = map[string]lt.EffectClass{"hang": lt.EffectIdempotent} }))
	sp.Policies = []lt.Policy{{Tool: "t__*", Decision: lt.PolicyAllow}}
	s := create(t, h, sp, nil)
	waitEvent(t, h, s.ID, lt.EventToolStarted)
	h.restart("node-b")
	h.clock.Advance(31 * time.Second) // past the stopped worker's lease
	started := waitEvents(t, h, s.ID, lt.EventToolStarted, 2)
	first, again := data[lt.ToolStartedData](t, started[0]), data[lt.ToolStartedData](t, started[1])
	require.Equal(t, 2, again.Attempt)
	require.Equal(t, first.EffectID, again.EffectID, "the same effect")
	require.Equal(t, first.IdempotencyKey, again.IdempotencyKey, "the same key")
	require.Empty(t, events(t, h, s.ID, lt.EventTurnFailed), "the journal:\n%s", journalText(t, h, s.ID))
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(readLines(t, filepath.Join(h.workspace(s.ID), mcptest.CallLog)), "hang "+again.IdempotencyKey+" started") {
		require.True(t, time.Now().Before(deadline), "the server was not called again")
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}

	cancelNow(t, h, s.ID)
	s = h.waitStatus(s.ID, lt.SessionCancelled)
	effects, err := h.eng.ListEffects(context.Background(), s.ID)
	require.NoError(t, err)
	require.Len(t, effects, 1, "one effect for the call, whatever its attempts")
	checkJournal(t, h.store, s.ID)
}

// TestStartedCallKeepsItsJournaledEffectID: a call started by a release
// that formed effect ids otherwise (here, the first start of each call is
// written with its effect id changed) keeps that id when the node that
// resumes it after its worker stopped runs it again: one effect in the
// ledger for the call, whatever its attempts, so a release may change the
// form of effect ids while nodes of the one before it still run.
func TestStartedCallKeepsItsJournaledEffectID(t *testing.T) {
	h := newHarnessConfigured(t, scripted.New(nil), func(h *harness) store.Store { return otherEffectIDs{h.store} }, func(*engine.Config) {})
	sp := spec(t, `[{"tool_calls":[{"name":"t__hang","arguments":{}}]},{"text":"done"}]`,
		testMCPServer(t, "t", func(s *lt.ToolSpec) { s.Effects = map[string]lt.EffectClass{"hang": lt.EffectIdempotent} }))
	sp.Policies = []lt.Policy{{Tool: "t__*", Decision: lt.PolicyAllow}}
	s := create(t, h, sp, nil)
	waitEvent(t, h, s.ID, lt.EventToolStarted)
	h.restart("node-b") // this release, writing what it derives
	h.clock.Advance(31 * time.Second)
	started := waitEvents(t, h, s.ID, lt.EventToolStarted, 2)
	first, again := data[lt.ToolStartedData](t, started[0]), data[lt.ToolStartedData](t, started[1])
	require.True(t, strings.HasPrefix(first.EffectID, otherEffectPrefix), first.EffectID)
	require.Equal(t, first.EffectID, again.EffectID, "the id the journal gave the call; the journal:\n%s", journalText(t, h, s.ID))
	require.Equal(t, 2, again.Attempt)

	cancelNow(t, h, s.ID)
	s = h.waitStatus(s.ID, lt.SessionCancelled)
	effects, err := h.eng.ListEffects(context.Background(), s.ID)
	require.NoError(t, err)
	require.Len(t, effects, 1, "one effect for the call")
	require.Equal(t, first.EffectID, effects[0].ID)
	checkJournal(t, h.store, s.ID)
}

// otherEffectPrefix begins the effect ids otherEffectIDs writes.
const otherEffectPrefix = "eff_0ther"

// otherEffectIDs writes the first start of each call, the effect it opens
// and the session's projection with an effect id of another form, as
// another release would.
type otherEffectIDs struct{ store.Store }

func (s otherEffectIDs) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	q := *p
	q.Events, q.Docs = slices.Clone(p.Events), slices.Clone(p.Docs)
	for i, ev := range q.Events {
		var d lt.ToolStartedData
		if ev.Type != lt.EventToolStarted || json.Unmarshal(ev.Data, &d) != nil || d.Attempt != 1 {
			continue
		}
		other := otherEffectPrefix + strings.TrimPrefix(d.EffectID, "eff_")
		q.Events[i].Data = bytes.ReplaceAll(ev.Data, []byte(d.EffectID), []byte(other))
		q.State = bytes.ReplaceAll(q.State, []byte(d.EffectID), []byte(other)) // the projection a resume reads
		for j, doc := range q.Docs {
			if doc.ID == d.EffectID {
				q.Docs[j].ID, q.Docs[j].Doc = other, bytes.ReplaceAll(doc.Doc, []byte(d.EffectID), []byte(other))
			}
		}
	}
	return s.Store.EventAppend(ctx, &q)
}

// TestMCPCallAPersonsStopLeftUnrunNamesItsServer: a person stops the turn
// at the approval of a step's first call (the API writes the turn's end,
// with no catalog of the session's tools); the step's MCP call left unrun
// is journaled as not run with its server's name, as the runner journals
// it.
func TestMCPCallAPersonsStopLeftUnrunNamesItsServer(t *testing.T) {
	h := newHarness(t)
	sp := spec(t, `[{"tool_calls":[{"name":"shell","arguments":{"command":"true"}},{"name":"t__echo","arguments":{"text":"x"}}]},{"text":"never"}]`,
		lt.ToolSpec{Name: "shell"}, testMCPServer(t, "t"))
	sp.Policies = []lt.Policy{{Name: "commands", Tool: "shell", Decision: lt.PolicyAsk}, {Tool: "t__*", Decision: lt.PolicyAllow}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	_, err := h.eng.DecideAction(context.Background(), s.ID, s.RequiredActions[0].ID, &lt.Decision{Decision: lt.DecisionStop, Reason: "not today"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionFailed)
	require.Equal(t, lt.StopStopped, *s.StopReason)
	failed := events(t, h, s.ID, lt.EventToolFailed)
	require.Len(t, failed, 2)
	d := data[lt.ToolFailedData](t, failed[1])
	require.Equal(t, "t__echo", d.Tool)
	require.Equal(t, "not run: stopped by a person: not today", d.Error)
	require.Equal(t, lt.RefusedTurnEnded, d.Refused)
	require.Equal(t, "t", d.Server)
	require.Empty(t, readLines(t, filepath.Join(h.workspace(s.ID), mcptest.CallLog)), "the MCP call never reached the server")
	checkJournal(t, h.store, s.ID)
}
