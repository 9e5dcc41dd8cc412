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
	if eff.ArgumentsEventSeq > 0 {
		raw, err := e.eventData(ctx, sessionID, eff.ArgumentsEventSeq)
		if err != nil {
			return nil, err
		}
		var d struct {
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("decode the arguments of effect %s (event %d): %w", effectID, eff.ArgumentsEventSeq, err)
		}
		eff.Arguments = d.Arguments
	}
	if eff.ResultEventSeq > 0 {
		raw, err := e.eventData(ctx, sessionID, eff.ResultEventSeq)
		if err != nil {
			return nil, err
		}
		var d struct {
			Output json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("decode the output of effect %s (event %d): %w", effectID, eff.ResultEventSeq, err)
		}
		eff.Output = d.Output
	}
	return eff, nil
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
