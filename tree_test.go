package longhaul_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul"
	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// spawnTree starts a root whose sub-agent asks a person a question, and
// returns the root's and the child's ids once the child waits for the
// answer.
func spawnTree(t *testing.T, rt *longhaul.Runtime) (root, child string) {
	t.Helper()
	ctx := t.Context()
	childSpec := scripted(`[{"tool_calls":[{"name":"ask_human","arguments":{"question":"Which city?"}}]},{"text":"Paris it is"}]`, lt.ToolSpec{Name: "ask_human"})
	spawn, err := json.Marshal(map[string]any{"tool_calls": []any{
		map[string]any{"name": "spawn_agent", "arguments": map[string]any{"agent_spec": childSpec, "input": "ask for the city"}},
	}})
	require.NoError(t, err)
	rootSpec := scripted(`[`+string(spawn)+`,{"tool_calls":[{"name":"wait_agents","arguments":{}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	s, err := rt.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &rootSpec, Input: "go"})
	require.NoError(t, err)
	var kids *lt.List[lt.Session]
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) { // polling with a deadline
		kids, err = rt.ListSessions(ctx, client.ListSessionsParams{ParentID: s.ID})
		require.NoError(t, err)
		if len(kids.Data) == 1 {
			break
		}
		require.False(t, time.Now().After(deadline), "the root spawned no sub-agent")
	}
	waitStatus(t, rt, kids.Data[0].ID, lt.SessionRequiresAction)
	return s.ID, kids.Data[0].ID
}

// TestRuntimeSessionTree: the tree calls the client has, in-process: the
// session with its sub-agent nested, and the actions of the whole tree.
// (Pending the application service's tree: it fails on placeholders.)
func TestRuntimeSessionTree(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	ctx := t.Context()
	root, child := spawnTree(t, rt)

	tree, err := rt.GetSessionTree(ctx, root)
	require.NoError(t, err)
	require.Equal(t, root, tree.ID)
	require.Len(t, tree.Subagents, 1)
	kid := tree.Subagents[0]
	require.Equal(t, child, kid.ID)
	require.Equal(t, root, *kid.ParentID)
	require.Len(t, kid.RequiredActions, 1)
	require.Equal(t, "Which city?", kid.RequiredActions[0].Question)

	own, err := rt.ListActions(ctx, root, lt.ActionPending)
	require.NoError(t, err)
	require.Empty(t, own.Data, "the question is the sub-agent's")
	all, err := rt.ListTreeActions(ctx, root, lt.ActionPending)
	require.NoError(t, err)
	require.Len(t, all.Data, 1)
	require.Equal(t, kid.RequiredActions[0].ID, all.Data[0].ID)
	require.Equal(t, child, all.Data[0].SessionID, "the session to decide it on")

	_, err = rt.GetSessionTree(ctx, "ses_nope")
	require.True(t, client.IsNotFound(err), "%v", err)
	require.ErrorContains(t, err, "get session tree ses_nope: ")
	_, err = rt.GetSessionTree(ctx, "")
	require.EqualError(t, err, "get session tree: id is empty")
	_, err = rt.ListTreeActions(ctx, "", "")
	require.EqualError(t, err, "list tree actions: sessionID is empty")
}

// seenEvent reports whether evs holds an event of type typ of session.
func seenEvent(evs []lt.TreeEvent, session, typ string) bool {
	for _, ev := range evs {
		if ev.SessionID == session && ev.Type == typ {
			return true
		}
	}
	return false
}

// TestRuntimeStreamTreeEvents: the merged stream of a tree's journals
// holds the root's events and the sub-agent's, ends with ctx's error when
// ctx ends (as the client's does), and resumes after a cursor it gave.
// (Pending the application service's tree: it fails on placeholders.)
func TestRuntimeStreamTreeEvents(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	root, child := spawnTree(t, rt)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		got  []lt.TreeEvent
		errs []error
	)
	for ev, err := range rt.StreamTreeEvents(ctx, root, "") {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		require.NotEmpty(t, ev.Cursor)
		got = append(got, ev)
		// The sub-agent's question and the root's record of the spawn:
		// all that comes until a person answers. The two journals are
		// written independently (the child can ask before the root's
		// subagent.spawned is appended), so wait for both.
		if seenEvent(got, child, lt.EventActionRequired) && seenEvent(got, root, lt.EventSubagentSpawned) {
			cancel()
		}
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], context.Canceled)
	seen := map[string]bool{}
	for _, ev := range got {
		seen[ev.SessionID+" "+ev.Type] = true
	}
	require.True(t, seen[root+" "+lt.EventSubagentSpawned], "%v", seen)
	require.True(t, seen[child+" "+lt.EventActionRequired], "%v", seen)

	// Resumed after the first event, the stream goes on with the second.
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	for ev, err := range rt.StreamTreeEvents(ctx2, root, got[0].Cursor) {
		require.NoError(t, err)
		require.Equal(t, got[1].Event, ev.Event)
		break
	}

	for _, err := range rt.StreamTreeEvents(t.Context(), "ses_nope", "") {
		require.True(t, client.IsNotFound(err), "%v", err)
	}
	for _, err := range rt.StreamTreeEvents(t.Context(), "", "") {
		require.EqualError(t, err, "stream events of tree: sessionID is empty")
	}
}

// TestRuntimeStreamTreeEventsAfterSeq: a plain seq as the cursor is the
// root's, as client.StreamTreeEvents takes it: the root's events come
// from the next seq on, the sub-agent's from its start.
func TestRuntimeStreamTreeEventsAfterSeq(t *testing.T) {
	t.Parallel()
	rt := open(t, longhaul.Options{DataDir: t.TempDir()})
	root, child := spawnTree(t, rt)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	first := map[string]int64{}
	var errs []error
	for ev, err := range rt.StreamTreeEvents(ctx, root, "3") {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, ok := first[ev.SessionID]; !ok {
			first[ev.SessionID] = ev.Seq
		}
		if ev.SessionID == child && ev.Type == lt.EventActionRequired {
			cancel()
		}
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], context.Canceled)
	require.Equal(t, map[string]int64{root: 4, child: 1}, first)
}
