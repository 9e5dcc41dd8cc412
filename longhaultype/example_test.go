package longhaultype_test

import (
	"encoding/json"
	"fmt"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Events from the Go client (client.StreamEvents) or the library
// (Runtime.Subscribe) decode to their payload types.
func ExampleEvent_DecodeData() {
	events := []lt.Event{
		{Seq: 7, Type: lt.EventToolFailed, Data: json.RawMessage(`{"step":2,"index":0,"call_id":"c1","tool":"shell","error":"denied","duration_ms":0,"refused":"policy_denied"}`)},
		{Seq: 8, Type: lt.EventTurnCompleted, Data: json.RawMessage(`{"turn_id":"turn_1","output":"done"}`)},
		{Seq: 9, Type: lt.EventToolCompleted, Data: json.RawMessage(`{"blob":{"sha256":"9f86d0","size":70000},"preview":"{\"step\":3"}`)},
	}
	for _, ev := range events {
		d, err := ev.DecodeData()
		if err != nil {
			fmt.Println(err)
			continue
		}
		switch d := d.(type) {
		case *lt.ToolFailedData:
			fmt.Println(ev.Seq, d.Tool, "refused:", d.Refused == lt.RefusedPolicy)
		case *lt.TurnCompletedData:
			fmt.Println(ev.Seq, d.TurnID, d.Output)
		case *lt.BlobData:
			fmt.Println(ev.Seq, "in blob", d.Blob.SHA256, d.Blob.Size)
		}
	}
	// Output:
	// 7 shell refused: true
	// 8 turn_1 done
	// 9 in blob 9f86d0 70000
}
