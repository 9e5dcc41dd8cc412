package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestCheckpointsAndLostWorkspace: every step and turn ends with a
// checkpoint holding a workspace snapshot, the agent names its own; when
// the workspace is deleted mid-session, the next tool call restores it from
// the last snapshot, journals the loss and the restore, tells the model,
// and the session completes.
func TestCheckpointsAndLostWorkspace(t *testing.T) {
	p := &planProvider{plan: []model.Response{
		call("write_file", `{"path":"notes/a.md","content":"alpha"}`),
		call("checkpoint", `{"name":"notes started","summary":"a.md exists","next_action":"ask the app"}`),
		call("lookup", `{}`),
		call("read_file", `{"path":"notes/a.md"}`),
		{Text: "done"},
	}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{
		{Name: "write_file"}, {Name: "read_file"}, {Name: "checkpoint"}, {Name: "lookup", Type: "function"},
	}}, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)

	ws := filepath.Join(h.dir, "workspaces", s.ID)
	require.FileExists(t, filepath.Join(ws, "notes", "a.md"))
	require.NoError(t, os.RemoveAll(ws)) // the environment is lost
	_, err := h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"ok"`)})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	content, err := os.ReadFile(filepath.Join(ws, "notes", "a.md"))
	require.NoError(t, err)
	require.Equal(t, "alpha", string(content))
	require.Len(t, events(t, h, s.ID, lt.EventEnvironmentLost), 1)
	restored := events(t, h, s.ID, lt.EventEnvironmentRestored)
	require.Len(t, restored, 1)
	rd := data[lt.EnvironmentRestoredData](t, restored[0])
	require.NotEmpty(t, rd.Snapshot)
	require.Equal(t, 1, rd.Files)
	// The model read the file back, and was told what happened.
	steps := p.stepRequests()
	last := steps[len(steps)-1].msgs
	require.Contains(t, last[len(last)-1].Text, "restored from checkpoint")
	require.Contains(t, last[len(last)-1].Text, "alpha")

	cps, err := h.eng.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	var kinds []string
	for _, c := range cps {
		kinds = append(kinds, c.Kind)
		require.Empty(t, c.SnapshotError)
		if c.Kind != lt.CheckpointTurn || c.Files > 0 {
			require.NotEmpty(t, c.Snapshot, "checkpoint %s", c.Name)
		}
	}
	require.Equal(t, "step,named,step,step,step,turn", strings.Join(kinds, ","))
	named := cps[1]
	require.Equal(t, "notes started", named.Name)
	require.Equal(t, "ask the app", named.NextAction)
	require.Equal(t, cps[0].Snapshot, named.Snapshot, "nothing changed between them: the same snapshot")
	view, err := h.eng.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, cps[len(cps)-1].ID, *view.LastCheckpoint)
	checkJournal(t, h.store, s.ID)
}

// TestForkDoesNotRepeatEffects: a fork from the checkpoint after an
// irreversible effect starts with that effect done (inherited, never run
// again), the workspace as the checkpoint saw it, and its own ids; it runs
// on by itself while the origin is untouched.
func TestForkDoesNotRepeatEffects(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	outside := filepath.Join(t.TempDir(), "sent.log")
	cmd := "echo sent >> " + outside
	sp := spec(t, `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"draft.md","content":"v1"}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":`+jsonString(cmd)+`}}]},
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"draft.md","content":"v2"}}]},
	  {"text":"origin done"},
	  {"text":"fork done"}]`, lt.ToolSpec{Name: "write_file"}, lt.ToolSpec{Name: "shell"})
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	cps, err := h.eng.ListCheckpoints(ctx, s.ID)
	require.NoError(t, err)
	var afterShell *lt.Checkpoint
	for i := range cps {
		if cps[i].Kind == lt.CheckpointStep && cps[i].Step == 2 {
			afterShell = &cps[i]
		}
	}
	require.NotNil(t, afterShell)

	// No worker runs while the fork is made, so its workspace can be seen
	// as the fork starts.
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()
	f, err := h.eng.ForkSession(ctx, s.ID, &lt.ForkRequest{CheckpointID: afterShell.ID}, "")
	require.NoError(t, err)
	require.NotEqual(t, s.ID, f.ID)
	require.Equal(t, &lt.ForkRef{SessionID: s.ID, CheckpointID: afterShell.ID, EventSeq: afterShell.EventSeq}, f.ForkedFrom)
	// The fork holds the workspace as it was after step 2.
	data, err := os.ReadFile(filepath.Join(h.dir, "workspaces", f.ID, "draft.md"))
	require.NoError(t, err)
	require.Equal(t, "v1", string(data))
	h.start("node-a")
	f = h.waitStatus(f.ID, lt.SessionIdle)

	sent, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "sent\n", string(sent), "the irreversible command ran once, in the origin only")
	effects, err := h.eng.ListEffects(ctx, f.ID)
	require.NoError(t, err)
	var shell []lt.Effect
	for _, e := range effects {
		require.Equal(t, f.ID, e.SessionID)
		if e.Tool == "shell" {
			shell = append(shell, e)
		}
	}
	require.Len(t, shell, 1, "inherited")
	require.Equal(t, lt.EffectSucceeded, shell[0].Status)
	originEffects, err := h.eng.ListEffects(ctx, s.ID)
	require.NoError(t, err)
	for _, e := range originEffects {
		require.NotEqual(t, shell[0].ID, e.ID, "the fork has its own ids")
	}
	turns, err := h.eng.ListTurns(ctx, f.ID)
	require.NoError(t, err)
	require.Len(t, turns, 1)
	require.Equal(t, "origin done", turns[0].Output, "the fork went on from step 2: the script's next step")
	checkJournal(t, h.store, f.ID)

	_, err = h.eng.ForkSession(ctx, s.ID, &lt.ForkRequest{CheckpointID: "ckpt_nope"}, "")
	requireAPIError(t, err, lt.CodeNotFound, "ckpt_nope")
}

func jsonString(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}

// TestForkOfASessionWithIDsOfAnotherShape: a session whose ids the engine
// did not make (imported from a store another tool wrote: an import
// accepts any lowercase prefix, capitals, '-', '_' and short ids) is
// forked with ids of its own. Its turns', effects' and checkpoints' ids
// were not renamed before, and the fork was refused, as those rows' ids
// belong to the origin. An id that equals a key of the journal's JSON (an
// import may call a turn "turn_id") renames the values, not the keys.
func TestForkOfASessionWithIDsOfAnotherShape(t *testing.T) {
	for name, scheme := range map[string]func(kind store.DocKind, i int) string{
		"capitals and dashes": func(kind store.DocKind, i int) string { return fmt.Sprintf("%s_Imported-%d", kindPrefix[kind], i) },
		"other prefixes":      func(kind store.DocKind, i int) string { return fmt.Sprintf("%c_%d", kind[0], i) },
		"keys": func(kind store.DocKind, i int) string {
			if i == 1 {
				return map[store.DocKind]string{store.DocTurn: "turn_id", store.DocEffect: "effect_id", store.DocCheckpoint: "checkpoint_id"}[kind]
			}
			return fmt.Sprintf("%s_k%d", kindPrefix[kind], i)
		},
	} {
		t.Run(name, func(t *testing.T) { forkOfImported(t, scheme) })
	}
}

var kindPrefix = map[store.DocKind]string{store.DocTurn: "turn", store.DocEffect: "eff", store.DocCheckpoint: "ckpt"}

func forkOfImported(t *testing.T, idOf func(kind store.DocKind, i int) string) {
	h := newHarness(t)
	ctx := context.Background()
	sp := spec(t, `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"draft.md","content":"v1"}}]},
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"draft.md","content":"v2"}}]},
	  {"text":"origin done"},
	  {"text":"fork done"}]`, lt.ToolSpec{Name: "write_file"})
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()

	// The session copied as an import writes it, every id of its own
	// given another shape, and its output made the imported one's.
	const imported = "ses_Imported-1"
	renames := map[string]string{s.ID: imported}
	row, err := h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	events, err := h.store.EventList(ctx, s.ID, 0, 1000)
	require.NoError(t, err)
	var docs []store.DocWrite
	for kind, list := range map[store.DocKind]func(context.Context, string) ([]*store.DocRow, error){
		store.DocTurn: h.store.TurnList, store.DocEffect: h.store.EffectList, store.DocCheckpoint: h.store.CheckpointList,
	} {
		rows, err := list(ctx, s.ID)
		require.NoError(t, err)
		require.NotEmpty(t, rows, kind)
		for i, r := range rows {
			renames[r.ID] = idOf(kind, i+1)
			docs = append(docs, store.DocWrite{Kind: kind, ID: r.ID, SessionID: r.SessionID, Status: r.Status, Doc: r.Doc, CreatedAt: r.CreatedAt})
		}
	}
	rename := func(b []byte) []byte {
		for from, to := range renames {
			b = bytes.ReplaceAll(b, []byte(`"`+from+`"`), []byte(`"`+to+`"`))
		}
		return bytes.ReplaceAll(b, []byte(`"origin done"`), []byte(`"imported done"`))
	}
	newEvents := make([]store.NewEvent, len(events))
	for i, ev := range events {
		newEvents[i] = store.NewEvent{Type: ev.Type, Time: ev.Time, TurnID: renames[ev.TurnID], Step: ev.Step, WorkerID: ev.WorkerID, Data: rename(ev.Data)}
	}
	for i := range docs {
		docs[i].ID, docs[i].SessionID, docs[i].Doc = renames[docs[i].ID], imported, rename(docs[i].Doc)
	}
	copied := *row
	copied.ID, copied.State = imported, rename(row.State)
	_, err = h.store.SessionCreate(ctx, &store.SessionCreateParams{Session: copied, Events: newEvents, Docs: docs})
	require.NoError(t, err)
	importedIDs := map[string]bool{}
	for _, to := range renames {
		importedIDs[to] = true
	}

	cps, err := h.eng.ListCheckpoints(ctx, imported)
	require.NoError(t, err)
	var afterFirst *lt.Checkpoint
	for i := range cps {
		require.True(t, importedIDs[cps[i].ID], cps[i].ID)
		if cps[i].Kind == lt.CheckpointStep && cps[i].Step == 1 {
			afterFirst = &cps[i]
		}
	}
	require.NotNil(t, afterFirst)
	originTurns, err := h.eng.ListTurns(ctx, imported)
	require.NoError(t, err)
	originEffects, err := h.eng.ListEffects(ctx, imported)
	require.NoError(t, err)

	f, err := h.eng.ForkSession(ctx, imported, &lt.ForkRequest{CheckpointID: afterFirst.ID}, "")
	require.NoError(t, err)
	require.Equal(t, &lt.ForkRef{SessionID: imported, CheckpointID: afterFirst.ID, EventSeq: afterFirst.EventSeq}, f.ForkedFrom)
	h.start("node-a")
	f = h.waitStatus(f.ID, lt.SessionIdle)

	// The fork's records are its own; the origin's are as they were.
	forkEvents, err := h.store.EventList(ctx, f.ID, 0, 1000)
	require.NoError(t, err)
	for _, ev := range forkEvents {
		require.False(t, importedIDs[ev.TurnID], "seq %d: turn %s", ev.Seq, ev.TurnID)
		if ev.Type == lt.EventSessionForked {
			continue // it names its origin
		}
		var v any
		require.NoError(t, json.Unmarshal(ev.Data, &v))
		forEachString(v, func(s string) {
			require.False(t, importedIDs[s], "seq %d (%s) names the origin's %s", ev.Seq, ev.Type, s)
		})
	}
	turns, err := h.eng.ListTurns(ctx, f.ID)
	require.NoError(t, err)
	require.Len(t, turns, 1)
	require.Equal(t, "origin done", turns[0].Output, "the fork went on from step 1: the script's next step, then its answer")
	effects, err := h.eng.ListEffects(ctx, f.ID)
	require.NoError(t, err)
	require.Len(t, effects, 2, "the first step's inherited, the second's run")
	forkCps, err := h.eng.ListCheckpoints(ctx, f.ID)
	require.NoError(t, err)
	require.NotEmpty(t, forkCps)
	for _, c := range forkCps {
		require.False(t, importedIDs[c.ID], c.ID)
	}
	turnsAfter, err := h.eng.ListTurns(ctx, imported)
	require.NoError(t, err)
	require.Equal(t, originTurns, turnsAfter)
	effectsAfter, err := h.eng.ListEffects(ctx, imported)
	require.NoError(t, err)
	require.Equal(t, originEffects, effectsAfter)
	require.Equal(t, "imported done", turnsAfter[0].Output)
	checkJournal(t, h.store, f.ID)
}

// forEachString calls fn with every string value (not key) in v, a
// decoded JSON document.
func forEachString(v any, fn func(string)) {
	switch v := v.(type) {
	case string:
		fn(v)
	case []any:
		for _, e := range v {
			forEachString(e, fn)
		}
	case map[string]any:
		for _, e := range v {
			forEachString(e, fn)
		}
	}
}
