package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

const (
	subagentParents  = 4
	subagentChildren = 3
	subagentKills    = 15
)

// TestSubagentsSurviveKills SIGKILLs the server at random moments while
// parent sessions spawn sub-agents that work in parallel in the parents'
// workspaces. Afterwards every parent has exactly its children (none
// duplicated, none lost, none orphaned), every child reported once, the
// parents' wait_agents results hold every child's answer, the usage of
// each tree rolled up into its root, and a tree event stream that followed
// the whole run through every restart saw every event of every session
// exactly once, in order.
func TestSubagentsSurviveKills(t *testing.T) {
	t.Parallel()
	seed1, seed2 := rand.Uint64(), rand.Uint64()
	t.Logf("kill-point seed: %d %d (the assertions hold for any seed)", seed1, seed2)
	rng := rand.New(rand.NewPCG(seed1, seed2))
	ctx := t.Context()
	srv := startServer(t, "--sandbox", "local")

	parents := make([]string, 0, subagentParents)
	for p := range subagentParents {
		s, err := srv.api.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: parentAgent(p), Input: "split the work", Budget: &lt.Budget{MaxModelCalls: 200}})
		require.NoError(t, err)
		parents = append(parents, s.ID)
	}
	streams := make([]*treeFollower, len(parents))
	for i, id := range parents {
		streams[i] = followTree(ctx, t, srv.url, id)
	}

	done := func() bool {
		for _, id := range parents {
			s, err := srv.api.GetSession(ctx, id)
			if err != nil || !s.Status.Terminal() {
				return false
			}
		}
		return true
	}
	kills := 0
	for kills < subagentKills && !done() {
		deadline := time.Now().Add(time.Duration(20+rng.IntN(250)) * time.Millisecond)
		for time.Now().Before(deadline) && !done() {
			time.Sleep(pollInterval)
		}
		srv.restart()
		kills++
	}
	for _, id := range parents {
		s := waitTerminal(ctx, t, srv, id, 90*time.Second)
		require.Equal(t, lt.SessionIdle, s.Status, "parent %s: stop reason %v", id, s.StopReason)
	}
	t.Logf("sub-agents: %d kills, %d parents with %d children each", kills, subagentParents, subagentChildren)

	all := map[string]bool{}
	for p, id := range parents {
		verifyTree(ctx, t, srv, p, id, all)
	}
	// No session exists but the parents and their children.
	var listed int
	for cursor := ""; ; {
		l, err := srv.api.ListSessions(ctx, client.ListSessionsParams{Cursor: cursor, Limit: 100})
		require.NoError(t, err)
		for _, s := range l.Data {
			require.True(t, all[s.ID], "session %s belongs to no tree: an orphan or a duplicate", s.ID)
			listed++
		}
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	require.Equal(t, subagentParents*(1+subagentChildren), listed)

	// Each stream followed its tree across every restart: it has each
	// session's whole journal, once, in order.
	for i, id := range parents {
		f := streams[i]
		want := map[string][]lt.Event{id: journal(ctx, t, srv.api, id)}
		kids, err := srv.api.ListSessions(ctx, client.ListSessionsParams{ParentID: id, Limit: 100})
		require.NoError(t, err)
		for _, k := range kids.Data {
			want[k.ID] = journal(ctx, t, srv.api, k.ID)
		}
		waitFor(t, 30*time.Second, "the tree stream of "+id+" to catch up", func() (bool, error) {
			got := f.snapshot()
			for sid, evs := range want {
				if len(got[sid]) < len(evs) {
					return false, f.failure()
				}
			}
			return true, f.failure()
		})
		got := f.snapshot()
		require.Len(t, got, len(want), "the stream of %s followed every session of its tree", id)
		for sid, evs := range want {
			requireSameEvents(t, evs, got[sid], "tree stream of "+id+", session "+sid)
		}
	}
}

// parentAgent spawns subagentChildren children in one step, waits for all
// of them, lists the files they wrote in its workspace and answers.
func parentAgent(p int) *lt.AgentSpec {
	var spawns []any
	for c := range subagentChildren {
		spawns = append(spawns, map[string]any{"name": "spawn_agent", "arguments": map[string]any{
			"agent_spec": childAgent(p, c), "input": fmt.Sprintf("part %d", c),
		}})
	}
	steps := []any{
		map[string]any{"tool_calls": spawns, "delay_ms": 60},
		map[string]any{"tool_calls": []any{map[string]any{"name": "wait_agents", "arguments": map[string]any{"mode": "all"}}}},
		map[string]any{"tool_calls": []any{map[string]any{"name": "list_files", "arguments": map[string]any{"path": "."}}}, "delay_ms": 60},
		map[string]any{"text": fmt.Sprintf("parent %d done", p)},
	}
	raw, _ := json.Marshal(steps)
	return &lt.AgentSpec{
		Model:        lt.ModelSpec{Provider: "scripted", Script: raw},
		Instructions: "Split the work among sub-agents.",
		// The children's tools too: a child holds at most its parent's.
		Tools: []lt.ToolSpec{{Name: "spawn_agent"}, {Name: "wait_agents"}, {Name: "list_files"}, {Name: "write_file"}, {Name: "read_file"}},
	}
}

// childAgent writes a file of its own and answers in three slow steps.
func childAgent(p, c int) map[string]any {
	name := fmt.Sprintf("p%d-c%d.txt", p, c)
	steps := []any{
		map[string]any{"tool_calls": []any{map[string]any{"name": "write_file", "arguments": map[string]any{"path": name, "content": name}}}, "delay_ms": 120},
		map[string]any{"tool_calls": []any{map[string]any{"name": "read_file", "arguments": map[string]any{"path": name}}}, "delay_ms": 120},
		map[string]any{"text": "answer " + name, "delay_ms": 120},
	}
	return map[string]any{
		"model":        map[string]any{"provider": "scripted", "script": steps},
		"instructions": "Do your part.",
		"tools":        []any{map[string]any{"name": "write_file"}, map[string]any{"name": "read_file"}},
	}
}

// verifyTree checks one parent and its children after the run.
func verifyTree(ctx context.Context, t *testing.T, srv *server, p int, id string, all map[string]bool) {
	t.Helper()
	all[id] = true
	parentEvents := journal(ctx, t, srv.api, id)
	requireGapFree(t, id, parentEvents)
	kids, err := srv.api.ListSessions(ctx, client.ListSessionsParams{ParentID: id, Limit: 100})
	require.NoError(t, err)
	require.Len(t, kids.Data, subagentChildren, "parent %s has exactly its children", id)

	spawned, completed := map[string]int{}, map[string]int{}
	var waitOut, listOut string
	for _, ev := range parentEvents {
		var d struct {
			ChildID string          `json:"child_id"`
			Tool    string          `json:"tool"`
			Output  json.RawMessage `json:"output"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		switch ev.Type {
		case lt.EventSubagentSpawned:
			spawned[d.ChildID]++
		case lt.EventSubagentCompleted:
			completed[d.ChildID]++
		case lt.EventToolCompleted:
			switch d.Tool {
			case "wait_agents":
				waitOut = string(d.Output)
			case "list_files":
				listOut = string(d.Output)
			}
		}
	}
	parent, err := srv.api.GetSession(ctx, id)
	require.NoError(t, err)
	var own lt.Usage
	for _, ev := range parentEvents {
		if ev.Type == lt.EventModelResponded {
			own.ModelCalls++
		}
	}
	sum := own
	for _, k := range kids.Data {
		all[k.ID] = true
		require.Equal(t, id, *k.ParentID)
		require.Equal(t, lt.SessionIdle, k.Status, "child %s", k.ID)
		require.Equal(t, 1, spawned[k.ID], "child %s is recorded spawned once", k.ID)
		require.Equal(t, 1, completed[k.ID], "child %s reported once", k.ID)
		evs := journal(ctx, t, srv.api, k.ID)
		requireGapFree(t, k.ID, evs)
		reported := 0
		for _, ev := range evs {
			if ev.Type == lt.EventSubagentReported {
				reported++
			}
		}
		require.Equal(t, 1, reported, "child %s journaled its report once", k.ID)
		sum.ModelCalls += k.Usage.ModelCalls
	}
	for c := range subagentChildren {
		name := fmt.Sprintf("p%d-c%d.txt", p, c)
		require.Contains(t, waitOut, "answer "+name, "wait_agents of %s returned every answer", id)
		require.Contains(t, listOut, name, "the child wrote in the parent's workspace")
	}
	require.NotContains(t, waitOut, `"running"`)
	require.Equal(t, sum.ModelCalls, parent.Usage.ModelCalls, "the children's model calls rolled up into %s", id)
}

// treeFollower follows a tree's event stream with the client, which
// reconnects by itself through restarts, and records what it yields.
type treeFollower struct {
	mu   sync.Mutex
	got  map[string][]lt.Event
	err  error
	dups []string
}

func followTree(ctx context.Context, t *testing.T, baseURL, id string) *treeFollower {
	t.Helper()
	api, err := client.New(baseURL, &client.Config{MaxRetries: 1000, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	require.NoError(t, err)
	f := &treeFollower{got: map[string][]lt.Event{}}
	go func() {
		for ev, err := range api.StreamTreeEvents(ctx, id, "") {
			f.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					f.err = err
				}
				f.mu.Unlock()
				return
			}
			evs := f.got[ev.SessionID]
			if n := len(evs); n > 0 && evs[n-1].Seq >= ev.Seq {
				f.dups = append(f.dups, fmt.Sprintf("%s seq %d after %d", ev.SessionID, ev.Seq, evs[n-1].Seq))
			} else if ev.Seq != int64(len(evs))+1 {
				f.dups = append(f.dups, fmt.Sprintf("%s gap: seq %d after %d events", ev.SessionID, ev.Seq, len(evs)))
			}
			f.got[ev.SessionID] = append(evs, ev.Event)
			f.mu.Unlock()
		}
	}()
	return f
}

func (f *treeFollower) snapshot() map[string][]lt.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]lt.Event, len(f.got))
	for k, v := range f.got {
		out[k] = slices.Clone(v)
	}
	return out
}

// failure is the stream's error, or the duplicates and gaps it saw.
func (f *treeFollower) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if len(f.dups) > 0 {
		return fmt.Errorf("the tree stream repeated or skipped events: %s", strings.Join(f.dups, "; "))
	}
	return nil
}
