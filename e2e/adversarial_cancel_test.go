package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAdversarialCancel_NothingStartsAfterTheCancel: a hostile tree keeps
// every session busy (the root runs 300 shell commands back to back, its
// model answering at once, so that the cancel meets it between its look
// and a call's start; its two sub-agents run theirs in the shared
// workspace) when a person cancels the root through the CLI. Met from the outside: each session starts no model or
// tool call after its cancel is in its journal (the root's from the
// request, the sub-agents' from their parent's walk), every session ends
// cancelled, and the workspace holds the output of every command whose
// run completed and of none whose start was never journaled.
func TestAdversarialCancel_NothingStartsAfterTheCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	srv := startServer(t, "--sandbox", "local")

	var own []any
	for i := range 300 {
		own = append(own, map[string]any{"tool_calls": []any{toolCall("shell", map[string]any{"command": fmt.Sprintf("echo root %d >> ticks.txt", i)})}})
	}
	r, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: busyRoot(t, append(own, toolCalls(toolCall("wait_agents", map[string]any{})), finalText("all done"))...),
		Input:     "split the work",
		Budget:    &lt.Budget{MaxModelCalls: 400, MaxToolCalls: 400},
	})
	require.NoError(t, err)
	root := r.ID
	kids := busyKids(ctx, t, srv, root)
	waitFor(t, 30*time.Second, "the root to run its own commands", func() (bool, error) {
		return len(eventsOf(ctx, t, srv.api, root, lt.EventToolCompleted)) >= 3, nil
	})

	require.Contains(t, longhaulCLI(t, srv, "cancel", root, "--reason", "stop everything"), root)
	sessions := []string{root}
	for _, k := range kids {
		sessions = append(sessions, k.ID)
	}
	var started, completed int
	for _, id := range sessions {
		requireStatus(ctx, t, srv, waitTerminal(ctx, t, srv, id, 90*time.Second), lt.SessionCancelled)
		evs := journal(ctx, t, srv.api, id)
		requireGapFree(t, id, evs)
		at := -1
		for i, ev := range evs {
			if ev.Type == lt.EventSessionCancelRequested {
				at = i
				break
			}
		}
		require.Positive(t, at, "%s has its cancel in its journal", id)
		for _, ev := range evs[at:] {
			require.NotContains(t, []string{lt.EventModelRequested, lt.EventToolStarted}, ev.Type,
				"%s started a call after its cancel (seq %d, cancel at seq %d)", id, ev.Seq, evs[at].Seq)
		}
		for _, ev := range evs {
			var call struct {
				Tool string `json:"tool"`
			}
			if ev.Type != lt.EventToolStarted && ev.Type != lt.EventToolCompleted {
				continue
			}
			require.NoError(t, json.Unmarshal(ev.Data, &call), "%s seq %d", id, ev.Seq)
			if call.Tool != "shell" {
				continue
			}
			if ev.Type == lt.EventToolStarted {
				started++
			} else {
				completed++
			}
		}
	}
	// The shell tool is idempotent here, so each call's start is durable
	// before it runs: a line without one ran unrecorded.
	data, err := srv.api.GetFile(ctx, root, "", "ticks.txt")
	require.NoError(t, err)
	lines := strings.Count(string(data), "\n")
	require.GreaterOrEqual(t, lines, completed, "every completed command left its line")
	require.LessOrEqual(t, lines, started, "no command ran without its start journaled")
}
