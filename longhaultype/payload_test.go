package longhaultype

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWithPayloadKeepsACopyOfItsOwnType: a payload is kept only as its
// event type's payload type (or a pointer to one), as a copy that shares no
// memory with the writer's value; an event without one decodes its Data.
// (The copy's equality with decoding, for every type, is tested by the
// journal: TestTypedPayloadsApplyAsDecoded.)
func TestWithPayloadKeepsACopyOfItsOwnType(t *testing.T) {
	t.Parallel()
	d := ModelRespondedData{Step: 2, Text: "hi", ToolCalls: []ToolCall{{ID: "c1", Name: "shell", Arguments: json.RawMessage(`{"cmd":"ls"}`)}}}
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	ev := Event{Type: EventModelResponded, Data: raw}

	kept := ev.WithPayload(d)
	got, ok := kept.Payload().(ModelRespondedData)
	require.True(t, ok)
	require.Equal(t, d, got)
	d.ToolCalls[0].ID = "changed"
	d.ToolCalls[0].Arguments[2] = 'X'
	require.Equal(t, "c1", got.ToolCalls[0].ID, "the copy shares no slice with the writer's value")
	require.JSONEq(t, `{"cmd":"ls"}`, string(got.ToolCalls[0].Arguments))

	require.NotNil(t, ev.WithPayload(&got).Payload(), "a pointer to the type")
	require.Nil(t, ev.WithPayload((*ModelRespondedData)(nil)).Payload())
	require.Nil(t, ev.WithPayload(ModelRequestedData{Step: 2}).Payload(), "another type")
	require.Nil(t, ev.WithPayload(map[string]any{"step": 2}).Payload(), "not a struct of the registry")
	require.Nil(t, Event{Type: "some.future_type", Data: raw}.WithPayload(d).Payload(), "an unknown type")
	require.Nil(t, kept.WithPayload(nil).Payload(), "dropped")

	fromData, err := DataAs[ModelRespondedData](ev)
	require.NoError(t, err)
	require.Equal(t, "c1", fromData.ToolCalls[0].ID, "decoded from Data")
	fromPayload, err := DataAs[ModelRespondedData](kept)
	require.NoError(t, err)
	require.Equal(t, got, fromPayload)

	for _, typ := range EventTypes() {
		require.True(t, PayloadCopyable(typ), "%s: its payload type is one WithPayload copies (else it is decoded: slower, not wrong)", typ)
	}
}
