package engine

import (
	"context"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// maxReviewNoteBytes bounds a review note (it may become a turn's input).
const maxReviewNoteBytes = 64 << 10

// ReviewSession records a person's verdict on the session's final
// artifact (session.reviewed): the headline of cost per accepted task. A
// session can be reviewed again (the latest review counts); a rejection
// with Continue starts a new turn whose input is the note.
func (e *Engine) ReviewSession(ctx context.Context, id string, req *lt.ReviewRequest) (*lt.Session, error) {
	switch {
	case req.Accepted == nil:
		return nil, apierror.Invalid("accepted", "required: true to accept the result, false to reject it")
	case len(req.Note) > maxReviewNoteBytes:
		return nil, apierror.Invalid("note", "must be at most %d bytes", maxReviewNoteBytes)
	case req.Continue && *req.Accepted:
		return nil, apierror.Invalid("continue", "only a rejection starts a new turn")
	case req.Continue && strings.TrimSpace(req.Note) == "":
		return nil, apierror.Invalid("note", "required with continue: it is the new turn's input")
	}
	rows, err := e.store.ArtifactList(ctx, id)
	if err != nil {
		return nil, notFound(err, "session", id)
	}
	arts, err := decodeDocs[lt.Artifact](rows)
	if err != nil {
		return nil, err
	}
	// An earlier run of the request may have reviewed the session, whose
	// turn (with continue) may be running now: it answers with the session
	// as it is.
	return e.journalControl(ctx, id, lt.EventSessionReviewed, func(b *batch, request string) error {
		if len(b.st.Turns) > 0 {
			return apierror.Conflict("session %s is still working (status %s): review it once its turn has ended", id, b.st.Session.Status)
		}
		r := lt.Review{Accepted: *req.Accepted, Note: req.Note, At: e.clock.Now()}
		if a := finalArtifact(arts); a != nil {
			r.ArtifactID, r.TurnID = a.ID, a.TurnID
		}
		if err := b.add(lt.EventSessionReviewed, r.TurnID, 0, lt.SessionReviewedData{Review: r, Actor: b.actor(), Request: request}); err != nil {
			return err
		}
		if !req.Continue {
			return nil
		}
		// Nothing is written below the free-space floor, as for any
		// other new turn.
		if err := e.refuseWhenLow(); err != nil {
			return err
		}
		turnID := newID("turn_", e.clock.Now())
		if err := b.add(lt.EventTurnCreated, turnID, 0, lt.TurnCreatedData{TurnID: turnID, Index: b.st.TurnCount + 1, Input: req.Note}); err != nil {
			return err
		}
		return b.status(lt.SessionQueued, "")
	})
}

// finalArtifact is the session's newest final artifact, or nil.
func finalArtifact(arts []lt.Artifact) *lt.Artifact {
	var best *lt.Artifact
	for i := range arts {
		a := &arts[i]
		if a.Final && (best == nil || !a.CreatedAt.Before(best.CreatedAt)) {
			best = a
		}
	}
	return best
}
