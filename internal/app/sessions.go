package app

import (
	"context"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/webhook"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// CreateSession implements Service.
func (a *App) CreateSession(ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error) {
	if err := Allow(ctx, "CreateSession"); err != nil {
		return nil, err
	}
	if req == nil {
		return nil, apierror.Invalid("", "the request body is missing")
	}
	project, err := creationProject(ctx, req.Project)
	if err != nil {
		return nil, err
	}
	if req.WebhookURL != "" {
		// The same rules as an endpoint's: a URL every notification would
		// be refused is refused now, not at each delivery.
		if err := a.webhooks.CheckTarget("webhook_url", req.WebhookURL); err != nil {
			return nil, err
		}
	}
	in := *req
	in.Project = project
	// The secret that signs the session's notifications is shown once, in
	// the answer that creates it, and written with the session: no step
	// after its creation's commit can fail the answer (a client would
	// retry by creating again).
	s, err := a.eng.CreateSessionSigned(ctx, &in, webhook.NewSecret())
	if err != nil {
		return nil, err
	}
	return a.withSecretMadeBefore(ctx, s)
}

// withSecretMadeBefore adds to a session with a webhook_url answered
// without its secret, one an earlier run of the same request created or
// forked (WithCreationSeed, whose answer was lost), the secret it was
// written with.
func (a *App) withSecretMadeBefore(ctx context.Context, s *lt.Session) (*lt.Session, error) {
	if s.WebhookURL == "" || s.WebhookSecret != "" {
		return s, nil
	}
	secret, err := a.webhooks.SessionWebhookSecret(ctx, s.ID)
	if err != nil {
		return nil, fmt.Errorf("webhook secret of session %s: %w", s.ID, err)
	}
	s.WebhookSecret = secret
	return s, nil
}

// GetSession implements Service.
func (a *App) GetSession(ctx context.Context, id string) (*lt.Session, error) {
	if err := Allow(ctx, "GetSession"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, id); err != nil {
		return nil, err
	}
	return a.eng.GetSession(ctx, id)
}

// ListSessions implements Service.
func (a *App) ListSessions(ctx context.Context, p lt.ListSessionsParams) (*lt.List[lt.Session], error) {
	if err := Allow(ctx, "ListSessions"); err != nil {
		return nil, err
	}
	project, err := listProject(ctx, p.Project)
	if err != nil {
		return nil, err
	}
	p.Project = project
	if p.Cursor != "" {
		// A cursor names a session: one of another project is as unknown
		// as one that never existed (the engine's 400), not a position.
		ok, err := a.seesSession(ctx, p.Cursor)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, apierror.Invalid("cursor", "unknown cursor %q", p.Cursor)
		}
	}
	return a.eng.ListSessions(ctx, p)
}

// CreateTurn implements Service.
func (a *App) CreateTurn(ctx context.Context, sessionID string, req *lt.CreateTurnRequest) (*lt.Turn, error) {
	if err := Allow(ctx, "CreateTurn"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.CreateTurn(ctx, sessionID, req)
}

// ListTurns implements Service.
func (a *App) ListTurns(ctx context.Context, sessionID string) (*lt.List[lt.Turn], error) {
	if err := Allow(ctx, "ListTurns"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	turns, err := a.eng.ListTurns(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return list(turns), nil
}

// GetTurn implements Service.
func (a *App) GetTurn(ctx context.Context, sessionID, turnID string) (*lt.Turn, error) {
	if err := Allow(ctx, "GetTurn"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.GetTurn(ctx, sessionID, turnID)
}

// Cancel implements Service.
func (a *App) Cancel(ctx context.Context, sessionID string, req *lt.CancelRequest) (*lt.Session, error) {
	if err := Allow(ctx, "Cancel"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	if req == nil {
		req = &lt.CancelRequest{}
	}
	return a.eng.CancelSession(ctx, sessionID, req)
}

// SendSignal implements Service.
func (a *App) SendSignal(ctx context.Context, sessionID string, req *lt.SignalRequest) (*lt.Signal, error) {
	if err := Allow(ctx, "SendSignal"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.SendSignal(ctx, sessionID, req)
}

// Fork implements Service.
func (a *App) Fork(ctx context.Context, sessionID string, req *lt.ForkRequest) (*lt.Session, error) {
	if err := Allow(ctx, "Fork"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	if req != nil && req.WebhookURL != nil && *req.WebhookURL != "" {
		if err := a.webhooks.CheckTarget("webhook_url", *req.WebhookURL); err != nil {
			return nil, err
		}
	}
	// A fork's notifications are signed with a secret of its own, not its
	// origin's, which the forker may never have been given: written with
	// the fork, so that no step after its creation can fail the answer
	// (a retry would fork again).
	s, err := a.eng.ForkSession(ctx, sessionID, req, webhook.NewSecret())
	if err != nil {
		return nil, err
	}
	return a.withSecretMadeBefore(ctx, s)
}

// Review implements Service.
func (a *App) Review(ctx context.Context, sessionID string, req *lt.ReviewRequest) (*lt.Session, error) {
	if err := Allow(ctx, "Review"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.ReviewSession(ctx, sessionID, req)
}

// AddConstraint implements Service.
func (a *App) AddConstraint(ctx context.Context, sessionID, constraint string) (*lt.Session, error) {
	if err := Allow(ctx, "AddConstraint"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.AddConstraint(ctx, sessionID, &lt.AddConstraintRequest{Constraint: constraint})
}

// UpdateBudget implements Service.
func (a *App) UpdateBudget(ctx context.Context, sessionID string, p *lt.BudgetPatch) (*lt.Session, error) {
	if err := Allow(ctx, "UpdateBudget"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.UpdateBudget(ctx, sessionID, p)
}

// Steer implements Service.
func (a *App) Steer(ctx context.Context, sessionID string, req *lt.SteerRequest) (*lt.Session, error) {
	if err := Allow(ctx, "Steer"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.SteerSession(ctx, sessionID, req)
}

// Pause implements Service.
func (a *App) Pause(ctx context.Context, sessionID string, req *lt.PauseRequest) (*lt.Session, error) {
	if err := Allow(ctx, "Pause"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	if req == nil {
		req = &lt.PauseRequest{}
	}
	return a.eng.PauseSession(ctx, sessionID, req)
}

// Resume implements Service.
func (a *App) Resume(ctx context.Context, sessionID string) (*lt.Session, error) {
	if err := Allow(ctx, "Resume"); err != nil {
		return nil, err
	}
	if err := a.visibleSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return a.eng.ResumeSession(ctx, sessionID, &lt.ResumeRequest{})
}
