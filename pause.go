package longhaul

import (
	"context"
	"fmt"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Pause pauses the session at its next safe point: at once when no worker
// runs it, else once the call in flight has finished (the session shows
// PauseRequested until then). A paused session holds no worker; its
// pending actions stay pending, its timers wait, and its paused time counts
// toward no budget. Pausing again changes nothing. req may be nil (no
// reason).
func (rt *Runtime) Pause(ctx context.Context, sessionID string, req *lt.PauseRequest) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("pause session: %w", err)
	}
	s, err := rt.svc.Pause(asLibrary(ctx), sessionID, req)
	if err != nil {
		return nil, fmt.Errorf("pause session %s: %w", sessionID, apiError(err))
	}
	return s, nil
}

// Resume ends the session's pause: it goes on where it stopped. A session
// that is not paused is a conflict.
func (rt *Runtime) Resume(ctx context.Context, sessionID string) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("resume session: %w", err)
	}
	s, err := rt.svc.Resume(asLibrary(ctx), sessionID)
	if err != nil {
		return nil, fmt.Errorf("resume session %s: %w", sessionID, apiError(err))
	}
	return s, nil
}
