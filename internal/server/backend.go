package server

import (
	"context"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Backend is what the HTTP API serves. The engine implements it; errors that a
// client caused are *apierror.Error values (anything else is a 500).
type Backend interface {
	CreateSession(ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error)
	GetSession(ctx context.Context, id string) (*lt.Session, error)
	ListSessions(ctx context.Context, p ListSessionsParams) (*lt.List[lt.Session], error)
	CreateTurn(ctx context.Context, sessionID string, req *lt.CreateTurnRequest) (*lt.Turn, error)
	ListTurns(ctx context.Context, sessionID string) ([]lt.Turn, error)
	GetTurn(ctx context.Context, sessionID, turnID string) (*lt.Turn, error)
	CancelSession(ctx context.Context, id string, req *lt.CancelRequest) (*lt.Session, error)
	// SendSignal delivers a signal to a session.
	SendSignal(ctx context.Context, id string, req *lt.SignalRequest) (*lt.Signal, error)
	// ForkSession creates a session from a checkpoint of another.
	ForkSession(ctx context.Context, id string, req *lt.ForkRequest) (*lt.Session, error)
	// ReviewSession records a person's verdict on the final artifact.
	ReviewSession(ctx context.Context, id string, req *lt.ReviewRequest) (*lt.Session, error)
	// AddConstraint pins a constraint a person adds mid-session.
	AddConstraint(ctx context.Context, id string, req *lt.AddConstraintRequest) (*lt.Session, error)
	// UpdateBudget replaces the limits the patch names and returns the
	// session (400 naming the field of an invalid merged budget).
	UpdateBudget(ctx context.Context, sessionID string, p *lt.BudgetPatch) (*lt.Session, error)
	// SteerSession sends a person's message to the session's current turn
	// (400 naming input, 409 when no turn runs).
	SteerSession(ctx context.Context, id string, req *lt.SteerRequest) (*lt.Session, error)

	// ListEvents returns up to limit events with seq > after (404 for an
	// unknown session).
	ListEvents(ctx context.Context, sessionID string, after int64, limit int) ([]lt.Event, error)
	// WatchSession returns a channel that receives the session's last seq
	// whenever its journal grows (a hint: re-read with ListEvents), until
	// stop is called or ctx ends.
	WatchSession(ctx context.Context, sessionID string) (updates <-chan int64, stop func())

	ListActions(ctx context.Context, sessionID, status string) ([]lt.Action, error)
	// ListAllActions is the inbox: required actions across sessions in
	// creation order, filtered and paged by p (400 naming status, type,
	// limit or cursor; 404 for an unknown session_id).
	ListAllActions(ctx context.Context, p lt.ListActionsParams) (*lt.List[lt.Action], error)
	// GetAction returns an action by its id alone, in any status (404 for
	// an unknown id).
	GetAction(ctx context.Context, actionID string) (*lt.Action, error)
	// DecideAction resolves a required action. Deciding again with the same
	// decision returns the first result; a different one is a 409.
	DecideAction(ctx context.Context, sessionID, actionID string, d *lt.Decision) (*lt.Action, error)

	// SessionTrace derives the session's trace from its journal (404 for
	// an unknown session); includeSubagents nests each sub-agent's own
	// trace under its subagent span.
	SessionTrace(ctx context.Context, id string, includeSubagents bool) (*lt.Trace, error)

	ListEffects(ctx context.Context, sessionID string) ([]lt.Effect, error)
	ListCheckpoints(ctx context.Context, sessionID string) ([]lt.Checkpoint, error)
	ListArtifacts(ctx context.Context, sessionID string) ([]lt.Artifact, error)
	GetArtifact(ctx context.Context, artifactID string) (*lt.Artifact, error)
	ArtifactContent(ctx context.Context, artifactID string) (*lt.Artifact, []byte, error)
	GetBlob(ctx context.Context, sha256Hex string) ([]byte, error)

	PutAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, error)
	ListAgents(ctx context.Context) ([]lt.Agent, error)
	GetAgent(ctx context.Context, name string, version int) (*lt.Agent, error)

	// Ready reports whether storage is reachable and migrated.
	Ready(ctx context.Context) error
}

// ListSessionsParams filters GET /v1/sessions (an alias, so the engine need
// not import this package).
type ListSessionsParams = lt.ListSessionsParams

// SecretBackend serves the vault's endpoints (PUT, GET and DELETE
// /v1/secrets). A Backend that implements it serves them too (the engine
// embeds vault.API); otherwise they answer 501. Errors a client caused are
// *apierror.Error values, and no method ever returns a secret's value.
type SecretBackend interface {
	// PutSecret creates or replaces the secret name and returns its
	// metadata and whether it created it (400 naming the field of invalid
	// input).
	PutSecret(ctx context.Context, name string, req *lt.PutSecretRequest) (secret *lt.Secret, created bool, err error)
	// ListSecrets returns every secret's metadata, by name.
	ListSecrets(ctx context.Context) ([]lt.Secret, error)
	// DeleteSecret removes a secret (404 if there is none).
	DeleteSecret(ctx context.Context, name string) error
}

// WebhookBackend serves the outgoing webhooks' endpoints (POST, GET and
// DELETE /v1/webhooks/endpoints, GET /v1/webhooks/deliveries). A Backend
// that implements it serves them too (the node embeds webhook.API);
// otherwise they answer 501. Errors a client caused are *apierror.Error
// values.
type WebhookBackend interface {
	// CreateWebhookEndpoint creates an endpoint and returns it with its
	// secret (400 naming the field of invalid input).
	CreateWebhookEndpoint(ctx context.Context, req *lt.CreateWebhookEndpointRequest) (*lt.WebhookEndpoint, error)
	// ListWebhookEndpoints returns every endpoint, without secrets.
	ListWebhookEndpoints(ctx context.Context) ([]lt.WebhookEndpoint, error)
	// DeleteWebhookEndpoint removes an endpoint (404 if there is none).
	DeleteWebhookEndpoint(ctx context.Context, id string) error
	// ListWebhookDeliveries pages deliveries newest first, with their
	// attempts.
	ListWebhookDeliveries(ctx context.Context, cursor string, limit int) (*lt.List[lt.WebhookDelivery], error)
	// SessionWebhookSecret returns (creating it on first use) the signing
	// secret of a session's own webhook_url.
	SessionWebhookSecret(ctx context.Context, sessionID string) (string, error)
}

// ReportBackend serves GET /v1/reports/tasks. A Backend that implements it
// serves the reports too (the node embeds report.Service); otherwise the
// endpoint answers 501. Errors a client caused are *apierror.Error values.
type ReportBackend interface {
	// TaskReport reports the tasks created in the window p selects (400
	// naming since, until, bucket, limit or cursor when invalid).
	TaskReport(ctx context.Context, p lt.TaskReportParams) (*lt.TaskReport, error)
}
