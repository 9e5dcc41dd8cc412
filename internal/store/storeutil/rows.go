package storeutil

import (
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// NonNil returns v, or an empty slice for nil: lists are stored and returned
// as [] rather than null.
func NonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// NewEvents numbers events after afterSeq, as they will be stored (times at
// microsecond precision, in UTC, as both drivers' encodings keep them).
func NewEvents(sessionID string, afterSeq int64, in []store.NewEvent) []store.Event {
	out := make([]store.Event, len(in))
	for i, e := range in {
		out[i] = store.Event{
			SessionID: sessionID,
			Seq:       afterSeq + int64(i) + 1,
			Type:      e.Type,
			Time:      time.UnixMicro(e.Time.UnixMicro()).UTC(),
			TurnID:    e.TurnID,
			Step:      e.Step,
			WorkerID:  e.WorkerID,
			Data:      e.Data,
		}
	}
	return out
}
