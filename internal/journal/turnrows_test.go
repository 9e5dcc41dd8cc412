package journal

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// turnRows returns the turn rows the changes would write.
func turnRows(ch *Changes) []lt.Turn {
	var out []lt.Turn
	for _, d := range ch.Docs() {
		if d.Kind == DocTurn {
			out = append(out, d.Value.(lt.Turn))
		}
	}
	return out
}

// TestTurnRowWrittenWhenItsStatusChanges: a batch that only adds to the
// running turn's figures (a step: model.responded, tool.started) writes no
// turn row, its state holding them; a batch that changes the turn's status
// writes the row with the latest figures of the batch, the step's that
// came after the start included; the end writes the final figures.
func TestTurnRowWrittenWhenItsStatusChanges(t *testing.T) {
	// Started and answered in one batch: the row carries the step's figures.
	b := started(t, lt.EffectRead)
	rows := turnRows(&b.ch)
	require.Len(t, rows, 1)
	require.Equal(t, lt.TurnRunning, rows[0].Status)
	require.Equal(t, 1, rows[0].Steps)
	require.Equal(t, lt.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.5, ModelCalls: 1, ToolCalls: 1}, rows[0].Usage)

	// A step of its own: no row; the state holds the figures.
	b.ch = Changes{}
	b.must(lt.EventToolCompleted, "t1", lt.ToolCompletedData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1"})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 2, ToolCalls: []lt.ToolCall{{ID: "c2", Name: "shell"}}, Usage: lt.Usage{InputTokens: 5}, CostUSD: 0.25})
	b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 2, Index: 0, CallID: "c2", Tool: "shell", Kind: lt.CallBuiltin, Class: lt.EffectRead})
	b.must(lt.EventToolStarted, "t1", lt.ToolStartedData{Step: 2, Index: 0, CallID: "c2", Tool: "shell", EffectID: "e2", Class: lt.EffectRead, Attempt: 1})
	b.must(lt.EventModelFailed, "t1", lt.ModelFailedData{Step: 3, Usage: &lt.Usage{InputTokens: 1}})
	require.Empty(t, turnRows(&b.ch), "a step wrote its turn's row")
	live := b.st.CurrentTurn()
	require.Equal(t, 2, live.Steps)
	require.Equal(t, lt.Usage{InputTokens: 16, OutputTokens: 2, CostUSD: 0.75, ModelCalls: 3, ToolCalls: 2}, live.Usage)

	// The end writes the row with every figure.
	b.must(lt.EventTurnCompleted, "t1", lt.TurnCompletedData{TurnID: "t1", Output: "ok"})
	rows = turnRows(&b.ch)
	require.Len(t, rows, 1)
	require.Equal(t, lt.TurnCompleted, rows[0].Status)
	require.Equal(t, 2, rows[0].Steps)
	require.Equal(t, live.Usage, rows[0].Usage)
}
