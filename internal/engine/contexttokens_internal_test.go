package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestContextTokensAsCountMessages: the transcript's count of a step's
// context, which remembers its items' counts, is model.CountMessages of the
// context itself after every kind of change to the items (appends that move
// the slice, compactions that replace it, a restore from a snapshot, pending
// changes and held steers at its end), for every kind of counter; and once
// a transcript is counted with another counter than the last.
func TestContextTokensAsCountMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		counters []model.Counter // used in turn, one a check
	}{
		{"tiktoken", []model.Counter{model.CounterFor("openai", "gpt-4o")}},
		{"estimate", []model.Counter{model.CounterFor("anthropic", "claude-sonnet")}},
		{"default", []model.Counter{nil}},
		{"counters in turn", []model.Counter{model.CounterFor("openai", "gpt-4o"), model.CounterFor("ollama", "llama"), model.CounterFor("anthropic", "claude-sonnet")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkContextTokens(t, tc.counters)
		})
	}
}

func checkContextTokens(t *testing.T, counters []model.Counter) {
	tools := []model.ToolDef{{Name: "echo", Description: "Repeats.", Parameters: json.RawMessage(`{ "type": "object" }`)}}
	rng := rand.New(rand.NewPCG(18, 5))
	var seq int64
	ev := func(typ string, data any) lt.Event {
		raw, err := json.Marshal(data)
		require.NoError(t, err)
		seq++
		return lt.Event{Seq: seq, Type: typ, Data: raw}
	}
	text := func() string {
		letters := []rune("abc déf\n{}\" ")
		b := make([]rune, rng.IntN(300))
		for i := range b {
			b[i] = letters[rng.IntN(len(letters))]
		}
		return string(b)
	}
	tr := newTranscript(&lt.AgentSpec{Instructions: "Be brief."})
	var check func(when string)
	checks := 0
	// respond adds a step: the model's answer and its calls' results.
	respond := func(step int) {
		var calls []lt.ToolCall
		for i := range rng.IntN(3) {
			s, err := json.Marshal(text())
			require.NoError(t, err)
			args := fmt.Sprintf(`{"i":%d,"s":%s}`, i, s)
			if rng.IntN(2) == 0 {
				args = fmt.Sprintf("{ \"i\" : %d }", i) // not compact: counted compacted
			}
			calls = append(calls, lt.ToolCall{ID: fmt.Sprintf("c%d-%d", step, i), Name: "echo", Arguments: json.RawMessage(args)})
		}
		tr.observe(ev(lt.EventModelRequested, lt.ModelRequestedData{Step: step, Steers: tr.steerCount()}))
		tr.observe(ev(lt.EventModelResponded, lt.ModelRespondedData{Step: step, Text: text(), ToolCalls: calls}))
		check("responded")
		for i, c := range calls {
			if i%2 == 0 {
				tr.observe(ev(lt.EventToolCompleted, lt.ToolCompletedData{Step: step, Index: i, CallID: c.ID, Tool: c.Name, Output: json.RawMessage(`"` + fmt.Sprint(rng.IntN(1000)) + `"`)}))
			} else {
				tr.observe(ev(lt.EventToolFailed, lt.ToolFailedData{Step: step, Index: i, CallID: c.ID, Tool: c.Name, Error: text()}))
			}
		}
		check("tools done")
	}
	check = func(when string) {
		t.Helper()
		c := counters[checks%len(counters)]
		checks++
		require.Equal(t, model.CountMessages(c, tr.messages(), tools), tr.contextTokens(c, tools), when)
		require.Equal(t, model.CountMessages(c, tr.messages(), nil), tr.contextTokens(c, nil), when+", no tools")
	}
	tr.observe(ev(lt.EventSessionCreated, lt.SessionCreatedData{Goal: "count", Constraints: []string{"exactly"}}))
	check("created")
	for turn := range 3 {
		id := fmt.Sprintf("turn-%d", turn)
		tr.observe(ev(lt.EventTurnCreated, lt.TurnCreatedData{TurnID: id, Input: text()}))
		tr.observe(ev(lt.EventTurnStarted, lt.TurnStartedData{TurnID: id}))
		check("turn started")
		for step := 1; step <= 40; step++ {
			check("before the call")
			respond(step)
			switch {
			case step%13 == 0 && tr.end() > tr.cut+2:
				// A compaction keeps the last few items (the slice is replaced).
				cut := tr.end() - 1 - rng.IntN(2)
				tr.observe(ev(lt.EventContextCompacted, lt.ContextCompactedData{Step: step, Items: cut, Summary: text()}))
				check("compacted")
			case step%17 == 0:
				// A worker resumed from a snapshot of the context.
				s := tr.snapshotAt(tr.cut, tr.summary)
				raw, err := json.Marshal(s)
				require.NoError(t, err)
				var back transcriptSnapshot
				require.NoError(t, json.Unmarshal(raw, &back))
				tr.restore(&back)
				check("restored")
			}
		}
	}

	// A transcript restored from another's snapshot with more items, from
	// the same base: the same numbers, other items.
	fresh := func(steps int) *transcript {
		tr = newTranscript(&lt.AgentSpec{Instructions: "Be brief."})
		tr.observe(ev(lt.EventTurnCreated, lt.TurnCreatedData{TurnID: "t", Input: text()}))
		tr.observe(ev(lt.EventTurnStarted, lt.TurnStartedData{TurnID: "t"}))
		for step := 1; step <= steps; step++ {
			respond(step)
		}
		return tr
	}
	other := fresh(20)
	s := other.snapshotAt(0, "")
	tr = fresh(5)
	require.Greater(t, len(s.Items), len(tr.msgs))
	tr.restore(&s)
	check("restored from another transcript")
}

// BenchmarkTurnContextTokens counts the context of each step of a 60-step
// turn (a call and its result a step), with OpenAI's exact counter and with
// the estimate: "whole" counts every step's whole context, as the steps did
// before the transcript remembered its items' counts; "remembered" is what
// a step does now. The events' folding into the transcript is in both.
func BenchmarkTurnContextTokens(b *testing.B) {
	const steps = 60
	tools := []model.ToolDef{{Name: "echo", Description: "Repeats.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	var events []lt.Event
	add := func(typ string, data any) {
		raw, err := json.Marshal(data)
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, lt.Event{Seq: int64(len(events) + 1), Type: typ, Data: raw})
	}
	add(lt.EventTurnCreated, lt.TurnCreatedData{TurnID: "t", Input: "Do the work in sixty steps."})
	add(lt.EventTurnStarted, lt.TurnStartedData{TurnID: "t"})
	for step := 1; step <= steps; step++ {
		id := fmt.Sprintf("call-%d", step)
		add(lt.EventModelResponded, lt.ModelRespondedData{Step: step, Text: fmt.Sprintf("Step %d: reading the next file.", step),
			ToolCalls: []lt.ToolCall{{ID: id, Name: "echo", Arguments: json.RawMessage(fmt.Sprintf(`{"path":"src/file%d.go"}`, step))}}})
		add(lt.EventToolCompleted, lt.ToolCompletedData{Step: step, CallID: id, Tool: "echo", Output: json.RawMessage(`"package main\n\nfunc main() {}\n"`)})
	}
	counters := []struct {
		name    string
		counter model.Counter
	}{
		{"tiktoken", model.CounterFor("openai", "gpt-4o")},
		{"estimate", model.CounterFor("ollama", "llama")},
	}
	for _, bc := range []struct {
		name  string
		count func(tr *transcript, c model.Counter) int
	}{
		{"whole", func(tr *transcript, c model.Counter) int { return model.CountMessages(c, tr.messages(), tools) }},
		{"remembered", func(tr *transcript, c model.Counter) int { return tr.contextTokens(c, tools) }},
	} {
		for _, cc := range counters {
			b.Run(bc.name+"/"+cc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					tr := newTranscript(&lt.AgentSpec{Instructions: "Be brief."})
					tr.observe(events[0])
					tr.observe(events[1])
					for i := 2; i < len(events); i += 2 {
						bc.count(tr, cc.counter)
						tr.observe(events[i])
						tr.observe(events[i+1])
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
			})
		}
	}
}
