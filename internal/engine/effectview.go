package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// GetEffect returns one row of the session's side-effect ledger with its
// whole arguments and output, read from the journal events the row points
// at (ArgumentsEventSeq, ResultEventSeq). The ledger's rows carry only a
// summary of each, so that a long session's ledger stays small to list and
// to write.
func (e *Engine) GetEffect(ctx context.Context, sessionID, effectID string) (*lt.Effect, error) {
	effects, err := e.ListEffects(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	var eff *lt.Effect
	for i := range effects {
		if effects[i].ID == effectID {
			eff = &effects[i]
			break
		}
	}
	if eff == nil {
		return nil, apierror.NotFound("effect %s not found in session %s", effectID, sessionID)
	}
	if eff.Arguments, err = e.eventField(ctx, sessionID, eff.ArgumentsEventSeq, "arguments"); err != nil {
		return nil, err
	}
	if eff.Output, err = e.eventField(ctx, sessionID, eff.ResultEventSeq, "output"); err != nil {
		return nil, err
	}
	return eff, nil
}

// eventField is one field of the payload of the session's event seq (a
// large payload read back from its blob); nothing for seq 0.
func (e *Engine) eventField(ctx context.Context, sessionID string, seq int64, field string) (json.RawMessage, error) {
	if seq == 0 {
		return nil, nil
	}
	raw, err := e.eventData(ctx, sessionID, seq)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("decode event %d of session %s: %w", seq, sessionID, err)
	}
	return fields[field], nil
}

// eventData is the payload of the session's event seq, with a large one
// read back from its blob.
func (e *Engine) eventData(ctx context.Context, sessionID string, seq int64) (json.RawMessage, error) {
	rows, err := e.store.EventList(ctx, sessionID, seq-1, 1)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || rows[0].Seq != seq {
		return nil, fmt.Errorf("event %d of session %s is missing", seq, sessionID)
	}
	var stub lt.BlobData
	if json.Unmarshal(rows[0].Data, &stub) == nil && stub.Blob.SHA256 != "" {
		return e.GetBlob(ctx, stub.Blob.SHA256)
	}
	return rows[0].Data, nil
}
