package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// checkPayloads, set by LONGHAUL_CHECK_PAYLOADS=1 (a switch for test runs,
// off by default), makes Apply fold every event that carries a typed
// payload both ways: the payload on the state, and its Data decoded on a
// copy of the state as the store hands it back. A difference in the
// payload, the state or the projection rows panics: the writer kept a
// payload that is not what a replay of the journal reads.
var checkPayloads = os.Getenv("LONGHAUL_CHECK_PAYLOADS") == "1"

func applyBothWays(s *State, e lt.Event, ch *Changes) error {
	before, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("check payload of %s: encode state: %w", e.Type, err)
	}
	var replay State
	if err := json.Unmarshal(before, &replay); err != nil {
		return fmt.Errorf("check payload of %s: decode state: %w", e.Type, err)
	}
	var typedCh, decodedCh Changes
	typedErr := applyEvent(s, e, &typedCh)
	decodedErr := applyEvent(&replay, e.WithPayload(nil), &decodedCh)
	if diff := payloadDiff(e, s, &replay, typedErr, decodedErr, &typedCh, &decodedCh); diff != "" {
		panic(fmt.Sprintf("journal: event %d (%s) applies differently from its typed payload and from its data: %s", e.Seq, e.Type, diff))
	}
	for _, d := range typedCh.Docs() {
		ch.put(d)
	}
	return typedErr
}

// payloadDiff says how applying e's typed payload (on typed, into typedCh)
// and its decoded Data (on decoded, into decodedCh) differ, or "".
func payloadDiff(e lt.Event, typed, decoded *State, typedErr, decodedErr error, typedCh, decodedCh *Changes) string {
	v, ok := lt.NewEventData(e.Type)
	if !ok {
		return "an unknown type carries a payload"
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Sprintf("its data does not decode: %v", err)
	}
	if want := reflect.ValueOf(v).Elem().Interface(); !reflect.DeepEqual(e.Payload(), want) {
		return fmt.Sprintf("payload %#v, data decoded %#v", e.Payload(), want)
	}
	if fmt.Sprint(typedErr) != fmt.Sprint(decodedErr) {
		return fmt.Sprintf("error %v, from data %v", typedErr, decodedErr)
	}
	a, errA := json.Marshal(typed)
	b, errB := json.Marshal(decoded)
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		return fmt.Sprintf("state %s, from data %s", a, b)
	}
	a, errA = json.Marshal(typedCh.Docs())
	b, errB = json.Marshal(decodedCh.Docs())
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		return fmt.Sprintf("rows %s, from data %s", a, b)
	}
	return ""
}
