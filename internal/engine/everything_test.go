package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// EverythingEnv names the installed @modelcontextprotocol/server-everything
// (the path of its mcp-server-everything program); .ci/run installs the
// pinned version and sets it.
const EverythingEnv = "LONGHAUL_TEST_MCP_EVERYTHING"

// everythingServer returns the tools entry of the reference MCP server
// "everything" over stdio, or skips the test (fails it under CI=true) when
// it is not installed.
func everythingServer(t *testing.T, trust bool) lt.ToolSpec {
	t.Helper()
	bin := os.Getenv(EverythingEnv)
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s must be set under CI=true (.ci/run installs @modelcontextprotocol/server-everything)", EverythingEnv)
		}
		t.Skipf("skipping: %s is not set; run .ci/run, or npm install @modelcontextprotocol/server-everything and set it to node_modules/.bin/mcp-server-everything", EverythingEnv)
	}
	_, err := os.Stat(bin)
	require.NoError(t, err, "%s", EverythingEnv)
	return lt.ToolSpec{Name: "everything", Type: "mcp", Command: bin, Args: []string{"stdio"}, TrustAnnotations: trust}
}

// TestMCPServerEverything: against the real reference server from npm, a
// scripted model lists its tools, calls several, reads its error, meets a
// policy's denial and the default approval of a tool that is not read-only.
func TestMCPServerEverything(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[
		{"tool_calls":[{"name":"everything__echo","arguments":{"message":"hello"}},{"name":"everything__get-sum","arguments":{"a":2,"b":3}}]},
		{"tool_calls":[{"name":"everything__get-resource-reference","arguments":{"resourceType":"Text","resourceId":0}},
		               {"name":"everything__get-tiny-image","arguments":{}}]},
		{"tool_calls":[{"name":"everything__toggle-simulated-logging","arguments":{}}]},
		{"text":"done"}]`, everythingServer(t, true))
	sp.Policies = []lt.Policy{{Name: "no images", Tool: "everything__get-tiny-image", Decision: lt.PolicyDeny, Reason: "text only"}}
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction, lt.SessionFailed)
	require.Equal(t, lt.SessionRequiresAction, s.Status, "stop reason %v", s.StopReason)
	require.Len(t, s.RequiredActions, 1)
	act := s.RequiredActions[0]
	require.Equal(t, "everything__toggle-simulated-logging", act.Tool)
	require.Equal(t, "mcp_default", act.Policy, "annotated as not read-only: a person is asked")
	_, err := h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Decision: "approve"})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	listed := events(t, h, s.ID, lt.EventMCPToolsListed)
	require.Len(t, listed, 1)
	l := data[lt.MCPToolsListedData](t, listed[0])
	byName := map[string]lt.MCPTool{}
	for _, tl := range l.Tools {
		byName[tl.Tool] = tl
	}
	for _, name := range []string{"echo", "get-sum", "get-resource-reference", "toggle-simulated-logging"} {
		require.Contains(t, byName, name)
	}
	require.Equal(t, lt.EffectRead, byName["echo"].Effect)
	require.Equal(t, "annotations", byName["echo"].EffectFrom)
	require.Equal(t, lt.EffectIrreversible, byName["toggle-simulated-logging"].Effect)

	outputs := map[string]string{}
	for _, ev := range events(t, h, s.ID, lt.EventToolCompleted, lt.EventToolFailed) {
		if ev.Type == lt.EventToolCompleted {
			d := data[lt.ToolCompletedData](t, ev)
			require.Equal(t, "everything", d.Server)
			outputs[d.Tool] = string(d.Output)
		} else {
			d := data[lt.ToolFailedData](t, ev)
			outputs[d.Tool] = "error: " + d.Error
		}
	}
	require.Contains(t, outputs["everything__echo"], "Echo: hello")
	require.Contains(t, outputs["everything__get-sum"], "The sum of 2 and 3 is 5")
	require.Contains(t, outputs["everything__get-resource-reference"], "error: ")
	require.Contains(t, outputs["everything__get-resource-reference"], "Invalid resourceId")
	require.Contains(t, outputs["everything__get-tiny-image"], "denied by policy no images: text only")
	require.NotContains(t, outputs["everything__toggle-simulated-logging"], "error: ")
	requireNoServerIn(t, h.workspace(s.ID))
	checkJournal(t, h.store, s.ID)
}

// TestMCPServerEverythingCrashMidCall: the real server is killed while a
// call runs. Declared idempotent, the call runs again, with the same key, on
// a restarted server; as irreversible (the default), it is in doubt. (A
// read call is not made durable before it runs, so a test cannot see it
// start: it is re-run the same way.)
func TestMCPServerEverythingCrashMidCall(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("finds the server's process through /proc")
	}
	for _, idempotent := range []bool{true, false} {
		t.Run("idempotent="+strconv.FormatBool(idempotent), func(t *testing.T) {
			h := newHarness(t)
			server := everythingServer(t, false)
			if idempotent {
				server.Effects = map[string]lt.EffectClass{"trigger-long-running-operation": lt.EffectIdempotent}
			}
			sp := spec(t, `[{"tool_calls":[{"name":"everything__trigger-long-running-operation","arguments":{"duration":2,"steps":2}}]},{"text":"done"}]`,
				server)
			sp.Policies = []lt.Policy{{Tool: "everything__*", Decision: lt.PolicyAllow}}
			s := create(t, h, sp, nil)
			ws := h.workspace(s.ID)
			// Once the call started, kill the server.
			deadline := time.Now().Add(30 * time.Second)
			for len(events(t, h, s.ID, lt.EventToolStarted)) == 0 {
				require.True(t, time.Now().Before(deadline), "the call never started")
				time.Sleep(5 * time.Millisecond) // polling with a deadline
			}
			killed := 0
			for killed == 0 {
				require.True(t, time.Now().Before(deadline), "the server's process was not found")
				killed = killServerIn(t, ws)
				time.Sleep(5 * time.Millisecond) // polling with a deadline
			}
			if idempotent {
				s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed, lt.SessionRequiresAction)
				require.Equal(t, lt.SessionIdle, s.Status)
				started := events(t, h, s.ID, lt.EventToolStarted)
				require.Len(t, started, 2, "re-run once")
				a, b := data[lt.ToolStartedData](t, started[0]), data[lt.ToolStartedData](t, started[1])
				require.Equal(t, a.IdempotencyKey, b.IdempotencyKey)
				require.Len(t, events(t, h, s.ID, lt.EventToolCompleted), 1)
			} else {
				s = h.waitStatus(s.ID, lt.SessionRequiresAction, lt.SessionFailed, lt.SessionIdle)
				require.Equal(t, lt.SessionRequiresAction, s.Status)
				require.Equal(t, lt.ActionInDoubt, s.RequiredActions[0].Type)
				require.Len(t, events(t, h, s.ID, lt.EventToolStarted), 1, "never re-run blindly")
			}
			require.Len(t, events(t, h, s.ID, lt.EventMCPServerLost), 1)
			requireNoServerIn(t, ws)
			checkJournal(t, h.store, s.ID)
		})
	}
}

// serverPIDs returns the processes whose working directory is ws.
func serverPIDs(t *testing.T, ws string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || cwd != ws {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmd), "server-everything") || strings.Contains(string(cmd), "node") {
			out = append(out, pid)
		}
	}
	return out
}

func killServerIn(t *testing.T, ws string) int {
	t.Helper()
	n := 0
	for _, pid := range serverPIDs(t, ws) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// requireNoServerIn waits until no server process runs in ws.
func requireNoServerIn(t *testing.T, ws string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(serverPIDs(t, ws)) > 0 {
		require.True(t, time.Now().Before(deadline), "an MCP server process still runs in %s", ws)
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}
