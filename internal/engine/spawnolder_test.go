package engine_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestSpawnJournaledByAnOlderBinaryIsReadOneWay: a spawn_agent call that
// an older binary journaled without reading it strictly (its canonical
// arguments holding "Tools" beside "tools", which encoding/json folds into
// one field) and had not run when this binary claims the session: runSpawn
// reads the journaled arguments strictly too, refuses the call, and makes
// no child.
func TestSpawnJournaledByAnOlderBinaryIsReadOneWay(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// This binary's journal of such a session, up to the spawn's request,
	// is the model of the older one's.
	kid := childSpec(script(t, map[string]any{"text": "kid done"}), "read_file")
	s := create(t, h, spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": kid, "input": "go"})}},
		map[string]any{"text": "root done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "read_file"}, lt.ToolSpec{Name: "write_file"}), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	require.NoError(t, h.eng.Stop(stopCtx))
	cancel()

	const older = "ses_journaled-by-an-older-binary"
	journaled, err := h.store.EventList(ctx, s.ID, 0, 1000)
	require.NoError(t, err)
	st := &journal.State{}
	var prefix []store.NewEvent
	turn := journaled[1].TurnID // turn.created: ids of the session's own are its own
	for _, ev := range journaled {
		ev.SessionID, ev.Data = older, bytes.ReplaceAll(ev.Data, []byte(s.ID), []byte(older))
		ev.Data = bytes.ReplaceAll(ev.Data, []byte(turn), []byte("turn_of-the-older-binary"))
		if ev.TurnID == turn {
			ev.TurnID = "turn_of-the-older-binary"
		}
		if ev.Type == lt.EventToolRequested {
			var req lt.ToolRequestedData
			require.NoError(t, json.Unmarshal(ev.Data, &req))
			require.Equal(t, "spawn_agent", req.Tool)
			var args map[string]any
			require.NoError(t, json.Unmarshal(req.Arguments, &args))
			args["agent_spec"].(map[string]any)["Tools"] = []any{map[string]any{"name": "write_file"}}
			req.Arguments, err = json.Marshal(args) // keys sorted: "Tools" before "tools", as canonical
			require.NoError(t, err)
			sum := sha256.Sum256(req.Arguments)
			req.ArgumentsSHA256 = hex.EncodeToString(sum[:])
			ev.Data, err = json.Marshal(req)
			require.NoError(t, err)
		}
		require.NoError(t, journal.Apply(st, lt.Event{Seq: ev.Seq, Type: ev.Type, Time: ev.Time, SessionID: older,
			TurnID: ev.TurnID, Step: ev.Step, WorkerID: ev.WorkerID, Data: ev.Data}, &journal.Changes{}))
		prefix = append(prefix, store.NewEvent{Type: ev.Type, Time: ev.Time, TurnID: ev.TurnID, Step: ev.Step, WorkerID: ev.WorkerID, Data: ev.Data})
		if ev.Type == lt.EventToolRequested {
			break // the older binary stopped before the call ran
		}
	}
	row, err := h.store.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	state, err := json.Marshal(st)
	require.NoError(t, err)
	_, err = h.store.SessionCreate(ctx, &store.SessionCreateParams{
		Session: store.SessionRow{ID: older, Project: row.Project, AgentName: row.AgentName, AgentVersion: row.AgentVersion,
			Status: string(st.Session.Status), Spec: row.Spec, State: state, Runnable: true, CreatedAt: row.CreatedAt},
		Events: prefix,
	})
	require.NoError(t, err)

	h.start("node-a")
	h.waitStatus(older, lt.SessionIdle)
	require.Empty(t, children(t, h, older), "no child of a spec read two ways")
	failed := events(t, h, older, lt.EventToolFailed)
	require.Len(t, failed, 1)
	require.Contains(t, string(failed[0].Data), `key \"agent_spec.Tools\" names the field \"tools\" in another case`)
}
