package monitor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// BenchmarkObserveStep is the detectors' cost for one step of ordinary
// work: the events a step journals (model.responded, tool.requested,
// tool.started, tool.completed with 2 KiB of output, checkpoint.created),
// alternating a shell command, an http_request and a write_file, with the
// fragments of 20 secrets indexed. Compare with a step's time
// (engine's BenchmarkWriteFileStep step-ms).
//
// Cases: default (every detector on), all_off (a session whose spec turns
// every detector off: the detectors must do no work).
func BenchmarkObserveStep(b *testing.B) {
	off := &lt.MonitorSpec{Detectors: map[string]lt.MonitorDetectorSpec{}}
	for _, n := range Names {
		off.Detectors[n] = lt.MonitorDetectorSpec{Off: true}
	}
	for _, tc := range []struct {
		name string
		spec *lt.MonitorSpec
	}{{"default", nil}, {"all_off", off}} {
		b.Run(tc.name, func(b *testing.B) {
			actions, err := Actions(tc.spec, "monitor")
			if err != nil {
				b.Fatal(err)
			}
			benchmarkObserveStep(b, actions)
		})
	}
}

func benchmarkObserveStep(b *testing.B, actions map[string]string) {
	values := map[string]string{}
	for i := range 20 {
		values[fmt.Sprintf("SECRET_%d", i)] = fmt.Sprintf("v%02d-Zq81xVb0PmL2wR7tYc4KdN9sAe3Hf6Ju", i)
	}
	m := New(Config{Actions: actions, DataDir: "/srv/longhaul", WorkspaceRoot: "/srv/longhaul/workspaces", Secrets: NewSecretIndex(values), Tree: true})
	output, _ := json.Marshal(map[string]any{"exit_code": 0, "stdout": strings.Repeat("ok line of output\n", 110)})
	args := []json.RawMessage{
		json.RawMessage(`{"command":"go test ./internal/... 2>&1 | tail -40 && git status --short"}`),
		json.RawMessage(`{"method":"POST","url":"https://api.example.com/v1/items","headers":{"Content-Type":"application/json"},"body":"{\"name\":\"weekly report\",\"count\":42}"}`),
		json.RawMessage(`{"path":"notes/report.md","content":"# Weekly report\n\nShipped the importer; two incidents, both closed.\n"}`),
	}
	tools := []string{"shell", "http_request", "write_file"}
	evs := func(step int) []lt.Event {
		i := step % 3
		id := fmt.Sprintf("call_%d", step)
		mk := func(seq int64, typ string, v any) lt.Event {
			raw, _ := json.Marshal(v)
			return lt.Event{Seq: seq, Type: typ, TurnID: "turn_1", Step: step, Data: raw}
		}
		base := int64(step * 5)
		return []lt.Event{
			mk(base+1, lt.EventModelResponded, lt.ModelRespondedData{Step: step, ToolCalls: []lt.ToolCall{{ID: id, Name: tools[i], Arguments: args[i]}}}),
			mk(base+2, lt.EventToolRequested, lt.ToolRequestedData{Step: step, CallID: id, Tool: tools[i], Arguments: args[i], ArgumentsSHA256: "ab"}),
			mk(base+3, lt.EventToolStarted, lt.ToolStartedData{Step: step, CallID: id, Tool: tools[i]}),
			mk(base+4, lt.EventToolCompleted, lt.ToolCompletedData{Step: step, CallID: id, Tool: tools[i], Output: output}),
			mk(base+5, lt.EventCheckpointCreated, lt.CheckpointCreatedData{}),
		}
	}
	steps := make([][]lt.Event, 30)
	for i := range steps {
		steps[i] = evs(i + 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for _, ev := range steps[i%len(steps)] {
			if f := m.Observe(ev); len(f) > 0 {
				b.Fatalf("a benign step found %v", f)
			}
		}
	}
}
