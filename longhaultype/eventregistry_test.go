package longhaultype_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestEventDecodeData(t *testing.T) {
	t.Parallel()
	t.Run("a payload decodes to its type", func(t *testing.T) {
		ev := lt.Event{Seq: 4, Type: lt.EventToolFailed, Data: json.RawMessage(`{"step":2,"index":1,"call_id":"c1","tool":"shell","error":"exit 1","duration_ms":12,"refused":"policy_denied"}`)}
		d, err := ev.DecodeData()
		require.NoError(t, err)
		require.Equal(t, &lt.ToolFailedData{Step: 2, Index: 1, CallID: "c1", Tool: "shell", Error: "exit 1", DurationMS: 12, Refused: lt.RefusedPolicy}, d)
	})
	t.Run("a payload moved to a blob decodes as its stub", func(t *testing.T) {
		ev := lt.Event{Seq: 5, Type: lt.EventToolCompleted, Data: json.RawMessage(`{"blob":{"sha256":"ab12","size":70000},"preview":"{\"step\":1"}`)}
		d, err := ev.DecodeData()
		require.NoError(t, err)
		require.Equal(t, &lt.BlobData{Blob: lt.BlobRef{SHA256: "ab12", Size: 70000}, Preview: `{"step":1`}, d)
	})
	t.Run("no data is the zero payload", func(t *testing.T) {
		d, err := lt.Event{Type: lt.EventTurnCancelled}.DecodeData()
		require.NoError(t, err)
		require.Equal(t, &lt.TurnCancelledData{}, d)
	})
	t.Run("an unknown type is told apart", func(t *testing.T) {
		_, err := lt.Event{Seq: 9, Type: "future.event", Data: json.RawMessage(`{}`)}.DecodeData()
		require.ErrorIs(t, err, lt.ErrUnknownEventType)
		require.ErrorContains(t, err, `"future.event"`)
	})
	t.Run("data that does not fit its type fails", func(t *testing.T) {
		_, err := lt.Event{Seq: 3, Type: lt.EventTurnCreated, Data: json.RawMessage(`{"index":"one"}`)}.DecodeData()
		require.ErrorContains(t, err, "decode data of event 3 (turn.created)")
	})
}

func TestEventTypesIsACopy(t *testing.T) {
	t.Parallel()
	a := lt.EventTypes()
	a[0] = "changed"
	require.Equal(t, lt.EventSessionCreated, lt.EventTypes()[0])
}
