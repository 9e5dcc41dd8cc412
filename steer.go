package longhaul

import (
	"context"
	"fmt"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Steer sends a message to the session's running turn: it reaches the
// model verbatim at its next call; with req.Interrupt a model call in
// flight is abandoned and made again with it. A session with no running
// turn is a conflict (send a follow-up turn with CreateTurn instead).
func (rt *Runtime) Steer(ctx context.Context, sessionID string, req *lt.SteerRequest) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("steer session: %w", err)
	}
	if req == nil {
		return nil, fmt.Errorf("steer session %s: req is nil", sessionID)
	}
	s, err := rt.svc.Steer(asLibrary(ctx), sessionID, req)
	if err != nil {
		return nil, fmt.Errorf("steer session %s: %w", sessionID, apiError(err))
	}
	return s, nil
}
