package client

import (
	"context"
	"fmt"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Pause pauses the session at its next safe point (POST
// /v1/sessions/{id}/pause): at once when no worker runs it, else once the
// call in flight has finished (the session shows PauseRequested until
// then). A paused session holds no worker; its pending actions stay
// pending. Pausing again changes nothing. req may be nil (no reason).
func (c *Client) Pause(ctx context.Context, sessionID string, req *lt.PauseRequest) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("pause session: %w", err)
	}
	if req == nil {
		req = &lt.PauseRequest{}
	}
	s, err := post[lt.Session](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "pause"), req)
	if err != nil {
		return nil, fmt.Errorf("pause session %s: %w", sessionID, err)
	}
	return s, nil
}

// Resume ends the session's pause (POST /v1/sessions/{id}/resume): it goes
// on where it stopped. A session that is not paused is a 409.
func (c *Client) Resume(ctx context.Context, sessionID string) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("resume session: %w", err)
	}
	s, err := post[lt.Session](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "resume"), &lt.ResumeRequest{})
	if err != nil {
		return nil, fmt.Errorf("resume session %s: %w", sessionID, err)
	}
	return s, nil
}
