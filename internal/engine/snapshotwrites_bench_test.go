package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// BenchmarkWriteFileStep is a write_file agent step (model call, tool call,
// checkpoint, all journaled in SQLite) in an empty workspace and in one
// holding a copy of the Go toolchain's source tree (GOROOT/src, as issue 18
// measured). It reports step-ms: the mean time between the steps'
// checkpoints, the first left out (a runner's first checkpoint walks the
// workspace; the large tree's first snapshot is timed by the snapshot
// package's BenchmarkFirstSnapshotLargeTree). Run it with a fixed count,
// e.g. -benchtime 30x.
func BenchmarkWriteFileStep(b *testing.B) {
	src := filepath.Join(runtime.GOROOT(), "src")
	for _, large := range []bool{false, true} {
		name := "empty"
		if large {
			name = "goroot-src"
		}
		b.Run(name, func(b *testing.B) {
			if _, err := os.Stat(src); large && err != nil {
				b.Skip("no GOROOT/src to copy")
			}
			steps := max(b.N, 2) + 1
			eng, workspaces := startBenchEngine(b)
			ctx := context.Background()
			var script strings.Builder
			script.WriteString(`[{"tool_calls":[{"name":"lookup","arguments":{}}]}`)
			for i := range steps {
				fmt.Fprintf(&script, `,{"tool_calls":[{"name":"write_file","arguments":{"path":"notes/step%d.md","content":"step %d"}}]}`, i%30, i)
			}
			script.WriteString(`,{"text":"done"}]`)
			s, err := eng.CreateSession(ctx, &lt.CreateSessionRequest{Input: "write", AgentSpec: &lt.AgentSpec{
				Model:    lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(script.String())},
				Tools:    []lt.ToolSpec{{Name: "write_file"}, {Name: "lookup", Type: "function", Effect: lt.EffectRead}},
				MaxSteps: steps + 10,
			}})
			require.NoError(b, err)
			s = waitBenchStatus(b, eng, s.ID, lt.SessionRequiresAction)
			if large {
				// The workspace exists once the session has run a step.
				ws := filepath.Join(workspaces, s.ID)
				require.NoError(b, os.MkdirAll(ws, 0o700))
				require.NoError(b, os.CopyFS(filepath.Join(ws, "goroot"), os.DirFS(src)))
			}
			b.ResetTimer()
			_, err = eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"ok"`)})
			require.NoError(b, err)
			waitBenchStatus(b, eng, s.ID, lt.SessionIdle)
			b.StopTimer()
			cps, err := eng.ListCheckpoints(ctx, s.ID)
			require.NoError(b, err)
			var times []time.Time
			b.ReportMetric(float64(cps[len(cps)-1].Files), "files")
			for _, c := range cps {
				if c.Kind == lt.CheckpointStep && c.Step > 1 { // step 1 is the lookup
					times = append(times, c.CreatedAt)
				}
			}
			require.Len(b, times, steps)
			per := times[len(times)-1].Sub(times[0]) / time.Duration(len(times)-1)
			b.ReportMetric(float64(per.Microseconds())/1000, "step-ms")
		})
	}
}

// startBenchEngine starts an engine on a SQLite store under TMPDIR with the
// scripted model and the real clock, and returns it with the directory of
// its workspaces.
func startBenchEngine(b *testing.B) (*engine.Engine, string) {
	b.Helper()
	dir := b.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "longhaul.db"), nil)
	require.NoError(b, err)
	b.Cleanup(func() { st.Close() })
	require.NoError(b, st.Migrate(context.Background()))
	workspaces := filepath.Join(dir, "workspaces")
	eng := startEngine(b, st, &engine.Config{
		WorkspaceRoot: workspaces, NodeID: "node-a",
		Providers:    map[string]model.Provider{"scripted": scripted.New(nil)},
		PollInterval: 10 * time.Millisecond,
	})
	return eng, workspaces
}

// waitBenchStatus polls, with a deadline, until session id has a status of
// want.
func waitBenchStatus(b *testing.B, eng *engine.Engine, id string, want lt.SessionStatus) *lt.Session {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		s, err := eng.GetSession(context.Background(), id)
		require.NoError(b, err)
		if s.Status == want {
			return s
		}
		if s.Status.Terminal() || time.Now().After(deadline) {
			b.Fatalf("session %s: status %s, want %s", id, s.Status, want)
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}
