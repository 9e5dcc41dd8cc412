package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// fixture is the real stack under the App: a SQLite store and a running
// engine in t.TempDir(), with the scripted model provider.
type fixture struct {
	t   *testing.T
	ctx context.Context
	st  *sqlite.Store
	eng *engine.Engine
	app *app.App
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, eng := apptest.Engine(t, nil)
	a := apptest.New(t, st, eng, nil)
	// The tests call the App as the library does.
	return &fixture{t: t, ctx: app.WithCaller(t.Context(), app.LibraryCaller), st: st, eng: eng, app: a}
}

// create starts a session of an inline scripted agent.
func (f *fixture) create(spec, input string) *lt.Session {
	f.t.Helper()
	var req lt.CreateSessionRequest
	require.NoError(f.t, json.Unmarshal([]byte(`{"agent_spec": `+spec+`, "input": "`+input+`"}`), &req))
	s, err := f.app.CreateSession(f.ctx, &req)
	require.NoError(f.t, err)
	return s
}

// waitIdle polls the session until it is idle and returns it.
func (f *fixture) waitIdle(id string) *lt.Session {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, err := f.app.GetSession(f.ctx, id)
		require.NoError(f.t, err)
		if s.Status == lt.SessionIdle {
			return s
		}
		require.False(f.t, s.Status.Terminal(), "session %s ended as %s", id, s.Status)
		require.True(f.t, time.Now().Before(deadline), "session %s still %s", id, s.Status)
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an event
	}
}

// journal reads the session's whole journal.
func (f *fixture) journal(id string) []lt.Event {
	f.t.Helper()
	page, err := f.app.ListEvents(f.ctx, id, 0, app.MaxListLimit)
	require.NoError(f.t, err)
	require.Nil(f.t, page.NextCursor, "a journal of one page")
	return page.Data
}

// spawnedChildren returns the children a session's subagent.spawned events
// name, in journal order.
func (f *fixture) spawnedChildren(id string) []string {
	f.t.Helper()
	var kids []string
	for _, ev := range f.journal(id) {
		if ev.Type != lt.EventSubagentSpawned {
			continue
		}
		var d struct {
			ChildID string `json:"child_id"`
		}
		require.NoError(f.t, json.Unmarshal(ev.Data, &d))
		kids = append(kids, d.ChildID)
	}
	return kids
}

// leafSpec is an agent that answers at once.
const leafSpec = `{"model": {"provider": "scripted", "script": [{"text": "done"}]}, "instructions": "Answer."}`

// spawnerSpec is an agent that spawns one sub-agent per spec, in order,
// waits for them, then answers.
func spawnerSpec(children ...string) string {
	script := ""
	for _, c := range children {
		script += `{"tool_calls": [{"name": "spawn_agent", "arguments": {"agent_spec": ` + c + `, "input": "sub-task"}}]},`
	}
	script += `{"tool_calls": [{"name": "wait_agents", "arguments": {}}]}, {"text": "all done"}`
	return `{"model": {"provider": "scripted", "script": [` + script + `]},
	  "instructions": "Delegate.", "tools": [{"name": "spawn_agent"}, {"name": "wait_agents"}]}`
}
