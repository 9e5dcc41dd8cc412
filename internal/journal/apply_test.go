package journal

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// builder appends events with consecutive seqs, as a writer would.
type builder struct {
	t   *testing.T
	st  State
	seq int64
	ch  Changes
}

func (b *builder) ev(typ, turn string, data any) error {
	b.t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(b.t, err)
	b.seq++
	return Apply(&b.st, lt.Event{Seq: b.seq, Type: typ, Time: time.Unix(b.seq, 0).UTC(), SessionID: "ses_1", TurnID: turn, Data: raw}, &b.ch)
}

func (b *builder) must(typ, turn string, data any) {
	b.t.Helper()
	require.NoError(b.t, b.ev(typ, turn, data))
}

// started builds a session whose turn t1 has one step with one call.
func started(t *testing.T, class lt.EffectClass) *builder {
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 1, ToolCalls: []lt.ToolCall{{ID: "c1", Name: "shell"}}, Usage: lt.Usage{InputTokens: 10, OutputTokens: 2}, CostUSD: 0.5})
	b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 0, CallID: "c1", Tool: "shell", Kind: lt.CallBuiltin, Class: class})
	b.must(lt.EventToolStarted, "t1", lt.ToolStartedData{Step: 1, Index: 0, CallID: "c1", Tool: "shell", EffectID: "e1", IdempotencyKey: "k1", Class: class, Attempt: 1})
	return b
}

func TestApplyProjection(t *testing.T) {
	t.Run("usage and the open effect", func(t *testing.T) {
		b := started(t, lt.EffectIrreversible)
		require.Equal(t, int64(6), b.st.Session.LastEventSeq)
		require.Equal(t, lt.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.5, ModelCalls: 1, ToolCalls: 1}, b.st.Session.Usage)
		require.Len(t, b.st.OpenEffects, 1)
		require.Equal(t, CallStarted, b.st.Step.Calls[0].Status)
		require.Equal(t, 1, b.st.ModelPosition)
	})
	t.Run("completion closes the effect and the turn", func(t *testing.T) {
		b := started(t, lt.EffectIdempotent)
		b.must(lt.EventToolCompleted, "t1", lt.ToolCompletedData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1", Output: json.RawMessage(`1`)})
		require.Empty(t, b.st.OpenEffects)
		require.True(t, b.st.Step.Done())
		b.must(lt.EventTurnCompleted, "t1", lt.TurnCompletedData{TurnID: "t1", Output: "ok"})
		require.Nil(t, b.st.CurrentTurn())
		require.False(t, b.st.Runnable())
		var effect lt.Effect
		for _, d := range b.ch.Docs() {
			if d.Kind == DocEffect {
				effect = d.Value.(lt.Effect)
			}
		}
		require.Equal(t, lt.EffectSucceeded, effect.Status)
	})
	t.Run("in doubt, decided did_not_happen, runs again with the same effect", func(t *testing.T) {
		b := started(t, lt.EffectIrreversible)
		b.must(lt.EventEffectInDoubt, "t1", lt.EffectInDoubtData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1", ActionID: "a1"})
		b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: lt.Action{ID: "a1", Type: lt.ActionInDoubt, TurnID: "t1", Step: 1, CallID: "c1", EffectID: "e1"}})
		require.False(t, b.st.Runnable(), "a pending action parks the session")
		b.must(lt.EventActionResolved, "t1", lt.ActionResolvedData{ActionID: "a1", Type: string(lt.ActionInDoubt), Decision: lt.Decision{Decision: lt.DecisionDidNotHappen}})
		require.True(t, b.st.Runnable())
		require.Equal(t, CallRequested, b.st.Step.Calls[0].Status)
		require.Empty(t, b.st.OpenEffects)
		b.must(lt.EventToolStarted, "t1", lt.ToolStartedData{Step: 1, Index: 0, CallID: "c1", EffectID: "e1", IdempotencyKey: "k1", Class: lt.EffectIrreversible, Attempt: 2})
		require.Equal(t, 2, b.st.OpenEffects[0].Attempts)
	})
	t.Run("cancel voids pending actions and leaves an irreversible effect in doubt", func(t *testing.T) {
		b := started(t, lt.EffectIrreversible)
		b.must(lt.EventSessionCancelRequested, "", lt.SessionCancelRequestedData{Reason: "stop"})
		require.True(t, b.st.Runnable())
		b.must(lt.EventTurnCancelled, "t1", lt.TurnCancelledData{TurnID: "t1"})
		require.Nil(t, b.st.Cancel)
		require.Empty(t, b.st.OpenEffects)
		var effect lt.Effect
		for _, d := range b.ch.Docs() {
			if d.Kind == DocEffect {
				effect = d.Value.(lt.Effect)
			}
		}
		require.Equal(t, lt.EffectInDoubt, effect.Status)
	})
	t.Run("contradictions are refused", func(t *testing.T) {
		for name, tc := range map[string]struct {
			typ  string
			data any
		}{
			"completion of an unknown call":  {lt.EventToolCompleted, lt.ToolCompletedData{Step: 1, Index: 0, CallID: "nope"}},
			"a call out of order":            {lt.EventToolRequested, lt.ToolRequestedData{Step: 1, Index: 5, CallID: "c9"}},
			"resolving a non-pending action": {lt.EventActionResolved, lt.ActionResolvedData{ActionID: "a9"}},
			"in doubt of a closed effect":    {lt.EventEffectInDoubt, lt.EffectInDoubtData{EffectID: "e9"}},
			"a response in another turn":     {lt.EventModelResponded, lt.ModelRespondedData{Step: 2}},
		} {
			t.Run(name, func(t *testing.T) {
				b := started(t, lt.EffectRead)
				turn := "t1"
				if tc.typ == lt.EventModelResponded {
					turn = "t2"
				}
				require.Error(t, b.ev(tc.typ, turn, tc.data))
			})
		}
	})
}

func validOr(d []byte) []byte {
	if json.Valid(d) {
		return d
	}
	return []byte(`{}`)
}
