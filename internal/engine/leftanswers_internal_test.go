package engine

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func journalEvent(t *testing.T, typ string, d any) lt.Event {
	t.Helper()
	b, err := json.Marshal(d)
	require.NoError(t, err)
	return lt.Event{Type: typ, Data: b}
}

func callsOne(id string) lt.ModelRespondedData {
	return lt.ModelRespondedData{ToolCalls: []lt.ToolCall{{ID: id, Name: "list_files", Arguments: json.RawMessage(`{}`)}}}
}

// requireWellFormed fails unless every call of msgs is answered by the
// tool messages right after it and every tool message answers a call
// before it, as providers require.
func requireWellFormed(t *testing.T, msgs []model.Message) {
	t.Helper()
	open := map[string]bool{}
	for i, m := range msgs {
		switch {
		case m.Role == model.RoleTool:
			require.True(t, open[m.CallID], "item %d answers %s, which no call before it asked", i, m.CallID)
			delete(open, m.CallID)
		default:
			require.Empty(t, open, "item %d (%s) comes before calls are answered", i, m.Role)
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		}
	}
}

// TestLeftAnswersKeepTheJournalsNumbering: a journal written before calls
// left by an ended turn were answered: turn 1's call_a has no result, turn
// 2 runs, and a compaction summarises its first five items (the count of
// that journal). The context keeps exactly the items after the cut (the
// answers are added to what is sent, not to the items a cut counts), and
// answers the left call while it is in the context.
func TestLeftAnswersKeepTheJournalsNumbering(t *testing.T) {
	tx := newTranscript(&lt.AgentSpec{Instructions: "i"})
	evs := []lt.Event{
		journalEvent(t, lt.EventSessionCreated, lt.SessionCreatedData{}),
		journalEvent(t, lt.EventTurnCreated, lt.TurnCreatedData{TurnID: "t1", Input: "do"}),
		journalEvent(t, lt.EventTurnStarted, lt.TurnStartedData{TurnID: "t1"}),
		journalEvent(t, lt.EventModelResponded, callsOne("call_a")),
		journalEvent(t, lt.EventTurnCreated, lt.TurnCreatedData{TurnID: "t2", Input: "go on"}),
		journalEvent(t, lt.EventTurnStarted, lt.TurnStartedData{TurnID: "t2"}),
		journalEvent(t, lt.EventModelResponded, callsOne("call_x")),
		journalEvent(t, lt.EventToolCompleted, lt.ToolCompletedData{CallID: "call_x", Output: json.RawMessage(`"x"`)}),
		journalEvent(t, lt.EventModelResponded, callsOne("call_y")),
		journalEvent(t, lt.EventToolCompleted, lt.ToolCompletedData{CallID: "call_y", Output: json.RawMessage(`"y"`)}),
	}
	for _, ev := range evs {
		tx.observe(ev)
	}
	before := tx.messages()
	requireWellFormed(t, before)
	require.Len(t, before, 9, "system, the seven items and one answer")
	require.Equal(t, model.Message{Role: model.RoleTool, CallID: "call_a", Text: leftCallNote, IsError: true}, before[3])
	require.Equal(t, 7, tx.end(), "the answer is no item")
	for _, c := range []model.Counter{model.CounterFor("openai", "gpt-4o"), model.CounterFor("anthropic", "claude-sonnet"), nil} {
		require.Equal(t, model.CountMessages(c, before, nil), tx.contextTokens(c, nil), "the answer is counted")
	}

	tx.observe(journalEvent(t, lt.EventContextCompacted, lt.ContextCompactedData{Items: 5, Summary: "s"}))
	after := tx.messages()
	requireWellFormed(t, after)
	require.Equal(t, []string{"call_y"}, []string{after[2].ToolCalls[0].ID}, "the kept items start at the cut the journal counted")
	require.Len(t, after, 4, "system, the note that the conversation goes on, call_y and its result")
}

// TestLeftAnswersInTheMiddle: a context snapshot of a journal written
// before left calls were answered can hold one mid-conversation: it is
// answered where it is, after the results the step did get.
func TestLeftAnswersInTheMiddle(t *testing.T) {
	items := []model.Message{
		{Role: model.RoleUser, Text: "do"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "a"}, {ID: "b"}, {ID: "c"}}},
		{Role: model.RoleTool, CallID: "a", Text: "ok"},
		{Role: model.RoleUser, Text: "go on"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "d"}}},
		{Role: model.RoleTool, CallID: "d", Text: "ok"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "e"}}},
	}
	got := withAnswers(nil, items, leftAnswers(items))
	requireWellFormed(t, got[:len(got)-1]) // the last call's step runs
	require.Len(t, got, len(items)+2)
	require.Equal(t, "b", got[3].CallID)
	require.Equal(t, "c", got[4].CallID)
	require.Equal(t, "go on", got[5].Text)
	require.Nil(t, leftAnswers(items[3:]), "nothing left: the last call's step is the one that runs")
}

// TestCallsWithoutAProvidersIDAreAnswered: a provider that names no call
// (the journal then names it by its step and index, requestCall): the
// context's copy of the answer names its calls the same way, so their
// results answer them and no note is added. It named them "" before, and
// every such call looked unanswered.
func TestCallsWithoutAProvidersIDAreAnswered(t *testing.T) {
	tx := newTranscript(&lt.AgentSpec{Instructions: "i"})
	calls := lt.ModelRespondedData{Step: 3, ToolCalls: []lt.ToolCall{
		{Name: "list_files", Arguments: json.RawMessage(`{}`)},
		{Name: "list_files", Arguments: json.RawMessage(`{"path":"."}`)},
	}}
	for _, ev := range []lt.Event{
		journalEvent(t, lt.EventTurnCreated, lt.TurnCreatedData{TurnID: "t1", Input: "do"}),
		journalEvent(t, lt.EventTurnStarted, lt.TurnStartedData{TurnID: "t1"}),
		journalEvent(t, lt.EventModelResponded, calls),
		journalEvent(t, lt.EventToolCompleted, lt.ToolCompletedData{CallID: callIDOf("", 3, 0), Output: json.RawMessage(`"a"`)}),
		journalEvent(t, lt.EventToolCompleted, lt.ToolCompletedData{CallID: callIDOf("", 3, 1), Output: json.RawMessage(`"b"`)}),
		journalEvent(t, lt.EventModelResponded, lt.ModelRespondedData{Step: 4, Text: "done"}),
		journalEvent(t, lt.EventTurnCreated, lt.TurnCreatedData{TurnID: "t2", Input: "go on"}),
		journalEvent(t, lt.EventTurnStarted, lt.TurnStartedData{TurnID: "t2"}),
	} {
		tx.observe(ev)
	}
	msgs := tx.messages()
	requireWellFormed(t, msgs)
	require.Len(t, msgs, 1+tx.end()-tx.base, "no note added")
	require.Equal(t, []string{"call_3_0", "call_3_1"}, []string{msgs[2].ToolCalls[0].ID, msgs[2].ToolCalls[1].ID})
}

// leftCallTranscript is a transcript whose turn 1 left call_a without a
// result, and whose turn 2 ran call_x: five items.
func leftCallTranscript(t *testing.T) *transcript {
	tx := newTranscript(&lt.AgentSpec{Instructions: "i"})
	for _, ev := range []lt.Event{
		journalEvent(t, lt.EventSessionCreated, lt.SessionCreatedData{}),
		journalEvent(t, lt.EventTurnCreated, lt.TurnCreatedData{TurnID: "t1", Input: "do"}),
		journalEvent(t, lt.EventTurnStarted, lt.TurnStartedData{TurnID: "t1"}),
		journalEvent(t, lt.EventModelResponded, callsOne("call_a")),
		journalEvent(t, lt.EventTurnCreated, lt.TurnCreatedData{TurnID: "t2", Input: "go on"}),
		journalEvent(t, lt.EventTurnStarted, lt.TurnStartedData{TurnID: "t2"}),
		journalEvent(t, lt.EventModelResponded, callsOne("call_x")),
		journalEvent(t, lt.EventToolCompleted, lt.ToolCompletedData{CallID: "call_x", Output: json.RawMessage(`"x"`)}),
	} {
		tx.observe(ev)
	}
	return tx
}

// TestCompactionCountsTheAnswersOfLeftCalls: a compaction keeps the latest
// items that fit in its target, and a kept model answer whose call turn 1
// left without a result brings the answer the context adds for it. With
// room for the items alone, that model answer is summarised; with room
// for its answer too, it is kept.
func TestCompactionCountsTheAnswersOfLeftCalls(t *testing.T) {
	tx := leftCallTranscript(t)
	require.Equal(t, 5, tx.end(), "do, call_a, go on, call_x and its result")
	for _, c := range []model.Counter{model.CounterFor("openai", "gpt-4o"), nil} {
		items := 0 // as the cut counts the items from number 1 on
		for _, m := range tx.from(1) {
			items += model.CountMessages(c, []model.Message{m}, nil)
		}
		answers := leftAnswers(tx.from(0))
		require.Len(t, answers, 1)
		answer := model.MessageTokens(c, &answers[0].msg)
		require.Positive(t, answer)
		require.Equal(t, 2, tx.chooseCut(c, items), "call_a's answer does not fit: call_a is summarised")
		require.Equal(t, 2, tx.chooseCut(c, items+answer-1))
		require.Equal(t, 1, tx.chooseCut(c, items+answer), "call_a and its answer fit")
	}
}

// TestSummaryRequestSaysACallHadNoResult: the conversation a compaction
// summarises tells a call left without a result as the context does, so
// the summary does not present it as done.
func TestSummaryRequestSaysACallHadNoResult(t *testing.T) {
	tx := leftCallTranscript(t)
	for _, cut := range []int{2, 3} { // call_a last of the summarised items, or followed by turn 2's input
		msgs := tx.summaryRequest(cut)
		text := msgs[len(msgs)-1].Text
		require.Contains(t, text, "[agent calls list_files] {}\n[tool error] "+leftCallNote+"\n", "cut %d", cut)
	}
	require.NotContains(t, tx.summaryRequest(1)[1].Text, leftCallNote, "call_a is not summarised")
}
