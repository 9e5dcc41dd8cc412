package storeutil

import (
	"context"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// DocTables maps each projection kind to its table, the same in every
// driver's schema. The names are constants, so building SQL from them is
// safe.
var DocTables = map[store.DocKind]string{
	store.DocTurn:       "turns",
	store.DocAction:     "actions",
	store.DocEffect:     "effects",
	store.DocArtifact:   "artifacts",
	store.DocCheckpoint: "checkpoints",
}

// NormalizeDocs fills an empty SessionID with the written session's id. A doc
// of another session is refused: a write changes one session only.
func NormalizeDocs(sessionID string, docs []store.DocWrite) ([]store.DocWrite, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	out := make([]store.DocWrite, len(docs))
	for i, d := range docs {
		switch d.SessionID {
		case "":
			d.SessionID = sessionID
		case sessionID:
		default:
			return nil, fmt.Errorf("docs[%d].session_id %q is not the written session %q", i, d.SessionID, sessionID)
		}
		out[i] = d
	}
	return out, nil
}

// Projections serves the projection reads of store.Store (TurnList,
// ActionGet, ArtifactGet...) over three queries a driver supplies: the
// checks of the ids, the error wrapping and telling an empty list from an
// unknown session are the same for every driver, so they live here. A driver
// embeds it and fills it in when it opens.
type Projections struct {
	// Checks are the driver's (its StrictText decides what an id may hold).
	Checks Checks
	// QueryList returns the kind's rows of the session, those with status
	// only unless status is "", in creation order (created_at, then id).
	QueryList func(ctx context.Context, kind store.DocKind, sessionID, status string) ([]*store.DocRow, error)
	// QueryGet returns one row by id, and only if it belongs to sessionID
	// when sessionID is not empty; an error wrapping store.ErrNotFound when
	// there is none.
	QueryGet func(ctx context.Context, kind store.DocKind, sessionID, id string) (*store.DocRow, error)
	// SessionExists returns an error wrapping store.ErrNotFound for an
	// unknown session.
	SessionExists func(ctx context.Context, id string) error
}

// Lists are in creation order (created_at, then id) and return
// store.ErrNotFound for an unknown session; gets return store.ErrNotFound for
// an unknown id (or one of another session).

func (p *Projections) list(ctx context.Context, kind store.DocKind, sessionID, status string) ([]*store.DocRow, error) {
	if err := p.Checks.ID("session_id", sessionID); err != nil {
		return nil, fmt.Errorf("list %ss: %w", kind, err)
	}
	out, err := p.QueryList(ctx, kind, sessionID, status)
	if err != nil {
		return nil, fmt.Errorf("list %ss of session %s: %w", kind, sessionID, err)
	}
	if len(out) == 0 {
		if err := p.SessionExists(ctx, sessionID); err != nil {
			return nil, fmt.Errorf("list %ss: %w", kind, err)
		}
	}
	return out, nil
}

// get returns one row by id, and only if it belongs to sessionID when
// sessionID is not empty.
func (p *Projections) get(ctx context.Context, kind store.DocKind, sessionID, id string) (*store.DocRow, error) {
	if err := p.Checks.ID("id", id); err != nil {
		return nil, fmt.Errorf("get %s: %w", kind, err)
	}
	d, err := p.QueryGet(ctx, kind, sessionID, id)
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", kind, id, err)
	}
	return d, nil
}

// getOfSession is get with a session id that must be set.
func (p *Projections) getOfSession(ctx context.Context, kind store.DocKind, sessionID, id string) (*store.DocRow, error) {
	if err := p.Checks.ID("session_id", sessionID); err != nil {
		return nil, fmt.Errorf("get %s: %w", kind, err)
	}
	return p.get(ctx, kind, sessionID, id)
}

// TurnList returns a session's turns.
func (p *Projections) TurnList(ctx context.Context, sessionID string) ([]*store.DocRow, error) {
	return p.list(ctx, store.DocTurn, sessionID, "")
}

// TurnGet returns one turn of a session.
func (p *Projections) TurnGet(ctx context.Context, sessionID, turnID string) (*store.DocRow, error) {
	return p.getOfSession(ctx, store.DocTurn, sessionID, turnID)
}

// ActionList returns a session's required actions, those with status only
// unless status is "".
func (p *Projections) ActionList(ctx context.Context, sessionID string, status string) ([]*store.DocRow, error) {
	return p.list(ctx, store.DocAction, sessionID, status)
}

// ActionGet returns one required action of a session.
func (p *Projections) ActionGet(ctx context.Context, sessionID, actionID string) (*store.DocRow, error) {
	return p.getOfSession(ctx, store.DocAction, sessionID, actionID)
}

// ActionGetByID returns a required action by its id alone.
func (p *Projections) ActionGetByID(ctx context.Context, actionID string) (*store.DocRow, error) {
	return p.get(ctx, store.DocAction, "", actionID)
}

// EffectList returns a session's effect ledger.
func (p *Projections) EffectList(ctx context.Context, sessionID string) ([]*store.DocRow, error) {
	return p.list(ctx, store.DocEffect, sessionID, "")
}

// ArtifactList returns a session's artifacts.
func (p *Projections) ArtifactList(ctx context.Context, sessionID string) ([]*store.DocRow, error) {
	return p.list(ctx, store.DocArtifact, sessionID, "")
}

// ArtifactGet returns an artifact by its id alone.
func (p *Projections) ArtifactGet(ctx context.Context, artifactID string) (*store.DocRow, error) {
	return p.get(ctx, store.DocArtifact, "", artifactID)
}

// CheckpointList returns a session's checkpoints.
func (p *Projections) CheckpointList(ctx context.Context, sessionID string) ([]*store.DocRow, error) {
	return p.list(ctx, store.DocCheckpoint, sessionID, "")
}
