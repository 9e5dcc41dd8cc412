package longhaul

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The API's operations, in-process. Each method has the name, the
// parameters and the results of the client.Client method that calls the
// same endpoint over HTTP, so code written against one works against the
// other. An error the caller caused (a bad request, an unknown id, a
// conflict) is a *client.APIError, as over HTTP: client.IsNotFound,
// client.IsConflict, client.HasCode and errors.As work on it alike.
//
// Every operation is the application service's (internal/app, the one the
// HTTP API serves too), so the library and the API cannot drift. What is
// left here is the library's own: the checks the Go client also makes
// before sending anything (an empty id, a nil request, a negative seq or
// version), and the error's type and context ("get session ses_x: ...").

// apiError turns the service's user-facing errors into *client.APIError, the
// type callers of the API already handle. Internal failures are returned as
// they are: in-process, their cause is the caller's to see.
func apiError(err error) error {
	var ae *apierror.Error
	if err == nil || !errors.As(err, &ae) || ae.Status >= 500 && ae.Code == lt.CodeInternal {
		return err
	}
	return &client.APIError{Status: ae.Status, Code: ae.Code, Message: ae.Message, Field: ae.Field}
}

func requireID(field, value string) error {
	if value == "" {
		return fmt.Errorf("%s is empty", field)
	}
	return nil
}

// CreateSession creates a session and starts its first turn. With a
// WebhookURL, the answer carries the secret that signs its notifications
// (shown only here).
func (rt *Runtime) CreateSession(ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error) {
	if req == nil {
		return nil, errors.New("create session: req is nil")
	}
	s, err := rt.svc.CreateSession(asLibrary(ctx), req)
	if err != nil {
		return nil, fmt.Errorf("create session: %w", apiError(err))
	}
	return s, nil
}

// GetSession returns one session, with its pending required actions.
func (rt *Runtime) GetSession(ctx context.Context, id string) (*lt.Session, error) {
	if err := requireID("id", id); err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	s, err := rt.svc.GetSession(asLibrary(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, apiError(err))
	}
	return s, nil
}

// ListSessions returns one page of sessions, newest first.
func (rt *Runtime) ListSessions(ctx context.Context, p client.ListSessionsParams) (*lt.List[lt.Session], error) {
	l, err := rt.svc.ListSessions(asLibrary(ctx), p)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", apiError(err))
	}
	return l, nil
}

// CreateTurn sends a follow-up turn; it is queued if a turn is running.
func (rt *Runtime) CreateTurn(ctx context.Context, sessionID string, req *lt.CreateTurnRequest) (*lt.Turn, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("create turn: %w", err)
	}
	if req == nil {
		return nil, errors.New("create turn: req is nil")
	}
	t, err := rt.svc.CreateTurn(asLibrary(ctx), sessionID, req)
	if err != nil {
		return nil, fmt.Errorf("create turn in %s: %w", sessionID, apiError(err))
	}
	return t, nil
}

// ListTurns returns the session's turns, oldest first.
func (rt *Runtime) ListTurns(ctx context.Context, sessionID string) (*lt.List[lt.Turn], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list turns: %w", err)
	}
	l, err := rt.svc.ListTurns(asLibrary(ctx), sessionID)
	if err != nil {
		return nil, fmt.Errorf("list turns of %s: %w", sessionID, apiError(err))
	}
	return l, nil
}

// GetTurn returns one turn.
func (rt *Runtime) GetTurn(ctx context.Context, sessionID, turnID string) (*lt.Turn, error) {
	if err := errors.Join(requireID("sessionID", sessionID), requireID("turnID", turnID)); err != nil {
		return nil, fmt.Errorf("get turn: %w", err)
	}
	t, err := rt.svc.GetTurn(asLibrary(ctx), sessionID, turnID)
	if err != nil {
		return nil, fmt.Errorf("get turn %s of %s: %w", turnID, sessionID, apiError(err))
	}
	return t, nil
}

// Cancel stops the session's running turn at the next safe point. req may
// be nil (no reason).
func (rt *Runtime) Cancel(ctx context.Context, sessionID string, req *lt.CancelRequest) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("cancel session: %w", err)
	}
	s, err := rt.svc.Cancel(asLibrary(ctx), sessionID, req)
	if err != nil {
		return nil, fmt.Errorf("cancel session %s: %w", sessionID, apiError(err))
	}
	return s, nil
}

// SendSignal delivers a signal: it wakes a wait_for_signal of that name,
// or is kept until one waits.
func (rt *Runtime) SendSignal(ctx context.Context, sessionID string, req *lt.SignalRequest) (*lt.Signal, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("send signal: %w", err)
	}
	if req == nil {
		return nil, errors.New("send signal: req is nil")
	}
	s, err := rt.svc.SendSignal(asLibrary(ctx), sessionID, req)
	if err != nil {
		return nil, fmt.Errorf("send signal to session %s: %w", sessionID, apiError(err))
	}
	return s, nil
}

// Fork creates a session from one of the session's checkpoints.
func (rt *Runtime) Fork(ctx context.Context, sessionID string, req *lt.ForkRequest) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("fork session: %w", err)
	}
	if req == nil {
		return nil, errors.New("fork session: req is nil")
	}
	s, err := rt.svc.Fork(asLibrary(ctx), sessionID, req)
	if err != nil {
		return nil, fmt.Errorf("fork session %s: %w", sessionID, apiError(err))
	}
	return s, nil
}

// Review records a verdict on the session's final artifact.
func (rt *Runtime) Review(ctx context.Context, sessionID string, req *lt.ReviewRequest) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("review session: %w", err)
	}
	if req == nil {
		return nil, errors.New("review session: req is nil")
	}
	s, err := rt.svc.Review(asLibrary(ctx), sessionID, req)
	if err != nil {
		return nil, fmt.Errorf("review session %s: %w", sessionID, apiError(err))
	}
	return s, nil
}

// AddConstraint pins a constraint mid-session: every later model context
// carries it verbatim.
func (rt *Runtime) AddConstraint(ctx context.Context, sessionID, constraint string) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("add constraint: %w", err)
	}
	s, err := rt.svc.AddConstraint(asLibrary(ctx), sessionID, constraint)
	if err != nil {
		return nil, fmt.Errorf("add constraint to session %s: %w", sessionID, apiError(err))
	}
	return s, nil
}

// UpdateBudget replaces the limits that p sets and keeps the others (a
// limit set to 0 is removed), and returns the session with its new budget.
func (rt *Runtime) UpdateBudget(ctx context.Context, sessionID string, p *lt.BudgetPatch) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("update budget: %w", err)
	}
	if p == nil {
		return nil, fmt.Errorf("update budget of %s: patch is nil", sessionID)
	}
	s, err := rt.svc.UpdateBudget(asLibrary(ctx), sessionID, p)
	if err != nil {
		return nil, fmt.Errorf("update budget of %s: %w", sessionID, apiError(err))
	}
	return s, nil
}

// ListEvents returns up to limit journal events with seq > after, in
// order; limit 0 means 50. NextCursor is the last seq of a full page.
func (rt *Runtime) ListEvents(ctx context.Context, sessionID string, after int64, limit int) (*lt.List[lt.Event], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	if after < 0 {
		return nil, fmt.Errorf("list events of %s: after %d is negative", sessionID, after)
	}
	if limit < 0 || limit > client.MaxListLimit {
		return nil, fmt.Errorf("list events of %s: limit %d is outside 0..%d", sessionID, limit, client.MaxListLimit)
	}
	l, err := rt.svc.ListEvents(asLibrary(ctx), sessionID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", sessionID, apiError(err))
	}
	return l, nil
}

// ListActions returns the session's required actions, only those with
// status when it is not empty.
func (rt *Runtime) ListActions(ctx context.Context, sessionID string, status lt.ActionStatus) (*lt.List[lt.Action], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	l, err := rt.svc.ListActions(asLibrary(ctx), sessionID, status)
	if err != nil {
		return nil, fmt.Errorf("list actions of %s: %w", sessionID, apiError(err))
	}
	return l, nil
}

// ListAllActions returns one page of the inbox: required actions across
// sessions, oldest first.
func (rt *Runtime) ListAllActions(ctx context.Context, p lt.ListActionsParams) (*lt.List[lt.Action], error) {
	l, err := rt.svc.ListAllActions(asLibrary(ctx), p)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", apiError(err))
	}
	return l, nil
}

// AllActions yields every action that p's filters select, oldest first,
// following the pages' cursors. The error is non-nil only once, as the
// last value.
func (rt *Runtime) AllActions(ctx context.Context, p lt.ListActionsParams) iter.Seq2[lt.Action, error] {
	return client.Pages(p.Cursor, func(cursor string) (*lt.List[lt.Action], error) {
		p.Cursor = cursor
		return rt.ListAllActions(ctx, p)
	})
}

// GetAction returns a required action by its id alone, in any status.
func (rt *Runtime) GetAction(ctx context.Context, actionID string) (*lt.Action, error) {
	if err := requireID("actionID", actionID); err != nil {
		return nil, fmt.Errorf("get action: %w", err)
	}
	a, err := rt.svc.GetAction(asLibrary(ctx), actionID)
	if err != nil {
		return nil, fmt.Errorf("get action %s: %w", actionID, apiError(err))
	}
	return a, nil
}

// DecideAction resolves a required action and returns it resolved. Which
// fields of d apply depends on the action's type (API.md "Required
// actions"). Repeating the same decision returns the first result; a
// different decision on a resolved action is a conflict.
func (rt *Runtime) DecideAction(ctx context.Context, sessionID, actionID string, d *lt.Decision) (*lt.Action, error) {
	if err := errors.Join(requireID("sessionID", sessionID), requireID("actionID", actionID)); err != nil {
		return nil, fmt.Errorf("decide action: %w", err)
	}
	if d == nil {
		return nil, fmt.Errorf("decide action %s: decision is nil", actionID)
	}
	a, err := rt.svc.DecideAction(asLibrary(ctx), sessionID, actionID, d)
	if err != nil {
		return nil, fmt.Errorf("decide action %s of %s: %w", actionID, sessionID, apiError(err))
	}
	return a, nil
}

// ListEffects returns the session's side-effect ledger.
func (rt *Runtime) ListEffects(ctx context.Context, sessionID string) (*lt.List[lt.Effect], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list effects: %w", err)
	}
	l, err := rt.svc.ListEffects(asLibrary(ctx), sessionID)
	if err != nil {
		return nil, fmt.Errorf("list effects of %s: %w", sessionID, apiError(err))
	}
	return l, nil
}

// GetEffect returns one row of the ledger with its whole arguments and
// output.
func (rt *Runtime) GetEffect(ctx context.Context, sessionID, effectID string) (*lt.Effect, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("get effect: %w", err)
	}
	if err := requireID("effectID", effectID); err != nil {
		return nil, fmt.Errorf("get effect: %w", err)
	}
	e, err := rt.svc.GetEffect(asLibrary(ctx), sessionID, effectID)
	if err != nil {
		return nil, fmt.Errorf("get effect %s of %s: %w", effectID, sessionID, apiError(err))
	}
	return e, nil
}

// ListCheckpoints returns the session's checkpoints, oldest first.
func (rt *Runtime) ListCheckpoints(ctx context.Context, sessionID string) (*lt.List[lt.Checkpoint], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	l, err := rt.svc.ListCheckpoints(asLibrary(ctx), sessionID)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", sessionID, apiError(err))
	}
	return l, nil
}

// ListArtifacts returns the session's artifacts.
func (rt *Runtime) ListArtifacts(ctx context.Context, sessionID string) (*lt.List[lt.Artifact], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	l, err := rt.svc.ListArtifacts(asLibrary(ctx), sessionID)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of %s: %w", sessionID, apiError(err))
	}
	return l, nil
}

// GetArtifact returns an artifact's metadata.
func (rt *Runtime) GetArtifact(ctx context.Context, id string) (*lt.Artifact, error) {
	if err := requireID("id", id); err != nil {
		return nil, fmt.Errorf("get artifact: %w", err)
	}
	a, err := rt.svc.GetArtifact(asLibrary(ctx), id)
	if err != nil {
		return nil, fmt.Errorf("get artifact %s: %w", id, apiError(err))
	}
	return a, nil
}

// ArtifactContent returns an artifact's bytes and their content type.
func (rt *Runtime) ArtifactContent(ctx context.Context, id string) (data []byte, contentType string, err error) {
	if err := requireID("id", id); err != nil {
		return nil, "", fmt.Errorf("artifact content: %w", err)
	}
	a, data, err := rt.svc.ArtifactContent(asLibrary(ctx), id)
	if err != nil {
		return nil, "", fmt.Errorf("artifact content %s: %w", id, apiError(err))
	}
	return data, a.ContentType, nil
}

// GetBlob returns the content-addressed blob with that sha256 (an event
// whose payload was too large to inline points at one).
func (rt *Runtime) GetBlob(ctx context.Context, sha256Hex string) ([]byte, error) {
	data, err := rt.svc.GetBlob(asLibrary(ctx), sha256Hex)
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", sha256Hex, apiError(err))
	}
	return data, nil
}

// SessionTrace returns the session's trace: its turns as trees of spans
// with durations, tokens and cost. With includeSubagents, each sub-agent's
// own trace is nested under its subagent span.
func (rt *Runtime) SessionTrace(ctx context.Context, id string, includeSubagents bool) (*lt.Trace, error) {
	if err := requireID("id", id); err != nil {
		return nil, fmt.Errorf("get trace: %w", err)
	}
	tr, err := rt.svc.SessionTrace(asLibrary(ctx), id, includeSubagents)
	if err != nil {
		return nil, fmt.Errorf("get trace of %s: %w", id, apiError(err))
	}
	return tr, nil
}

// PutAgent creates an agent, or adds a new version of it.
func (rt *Runtime) PutAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, error) {
	if req == nil {
		return nil, errors.New("put agent: req is nil")
	}
	a, err := rt.svc.PutAgent(asLibrary(ctx), req)
	if err != nil {
		return nil, fmt.Errorf("put agent %s: %w", req.Name, apiError(err))
	}
	return a, nil
}

// EnsureAgent defines an agent the way a program that starts again and
// again wants it: it creates the agent, or adds a version only when req's
// spec differs from the latest version's (lt.SameAgentSpec: compared as
// canonical JSON). It reports whether it wrote a version. Its error is
// the put's (the definition was not stored), a *client.APIError naming the
// spec's field when the definition is refused.
func (rt *Runtime) EnsureAgent(ctx context.Context, req *lt.PutAgentRequest) (*lt.Agent, bool, error) {
	if req == nil {
		return nil, false, errors.New("ensure agent: req is nil")
	}
	a, wrote, err := rt.svc.EnsureAgent(asLibrary(ctx), req)
	if err != nil {
		return nil, false, fmt.Errorf("put agent %s: %w", req.Name, apiError(err))
	}
	return a, wrote, nil
}

// ListAgents returns the latest version of every agent of project ("": of
// every project), by project and name.
func (rt *Runtime) ListAgents(ctx context.Context, project string) (*lt.List[lt.Agent], error) {
	l, err := rt.svc.ListAgents(asLibrary(ctx), project)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", apiError(err))
	}
	return l, nil
}

// ListAgentVersions returns every version of the agent name of project
// ("": the default project), the latest first.
func (rt *Runtime) ListAgentVersions(ctx context.Context, project, name string) (*lt.List[lt.Agent], error) {
	if err := requireID("name", name); err != nil {
		return nil, fmt.Errorf("list agent versions: %w", err)
	}
	l, err := rt.svc.ListAgentVersions(asLibrary(ctx), project, name)
	if err != nil {
		return nil, fmt.Errorf("list versions of agent %s: %w", name, apiError(err))
	}
	return l, nil
}

// GetAgent returns one version of the agent name of project ("": the
// default project), the latest when version is 0.
func (rt *Runtime) GetAgent(ctx context.Context, project, name string, version int) (*lt.Agent, error) {
	if err := requireID("name", name); err != nil {
		return nil, fmt.Errorf("get agent: %w", err)
	}
	if version < 0 {
		return nil, fmt.Errorf("get agent %s: version %d is negative", name, version)
	}
	a, err := rt.svc.GetAgent(asLibrary(ctx), project, name, version)
	if err != nil {
		return nil, fmt.Errorf("get agent %s: %w", name, apiError(err))
	}
	return a, nil
}

// PutSecret creates the vault secret name of req.Project ("": the default
// project), or replaces its value, hosts and injection. It returns the
// secret's metadata (never the value) and whether it was created. Only
// the sessions of that project may use it.
func (rt *Runtime) PutSecret(ctx context.Context, name string, req *lt.PutSecretRequest) (*lt.Secret, bool, error) {
	if err := requireID("name", name); err != nil {
		return nil, false, fmt.Errorf("put secret: %w", err)
	}
	if req == nil {
		return nil, false, fmt.Errorf("put secret %s: req is nil", name)
	}
	s, created, err := rt.svc.PutSecret(asLibrary(ctx), name, req)
	if err != nil {
		return nil, false, fmt.Errorf("put secret %s: %w", name, apiError(err))
	}
	return s, created, nil
}

// ListSecrets returns the metadata of the vault secrets of project ("": of
// every project), by project and name.
func (rt *Runtime) ListSecrets(ctx context.Context, project string) (*lt.List[lt.Secret], error) {
	l, err := rt.svc.ListSecrets(asLibrary(ctx), project)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", apiError(err))
	}
	return l, nil
}

// DeleteSecret removes the vault secret name of project ("": the default
// project).
func (rt *Runtime) DeleteSecret(ctx context.Context, project, name string) error {
	if err := requireID("name", name); err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	if err := rt.svc.DeleteSecret(asLibrary(ctx), project, name); err != nil {
		return fmt.Errorf("delete secret %s: %w", name, apiError(err))
	}
	return nil
}

// CreateWebhookEndpoint registers a webhook endpoint; the returned
// endpoint's Secret is shown only here.
func (rt *Runtime) CreateWebhookEndpoint(ctx context.Context, req *lt.CreateWebhookEndpointRequest) (*lt.WebhookEndpoint, error) {
	if req == nil {
		return nil, errors.New("create webhook endpoint: req is nil")
	}
	ep, err := rt.svc.CreateWebhookEndpoint(asLibrary(ctx), req)
	if err != nil {
		return nil, fmt.Errorf("create webhook endpoint: %w", apiError(err))
	}
	return ep, nil
}

// ListWebhookEndpoints returns the webhook endpoints of project ("": of
// every project), without secrets.
func (rt *Runtime) ListWebhookEndpoints(ctx context.Context, project string) (*lt.List[lt.WebhookEndpoint], error) {
	l, err := rt.svc.ListWebhookEndpoints(asLibrary(ctx), project)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", apiError(err))
	}
	return l, nil
}

// DeleteWebhookEndpoint removes a webhook endpoint.
func (rt *Runtime) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	if err := requireID("id", id); err != nil {
		return fmt.Errorf("delete webhook endpoint: %w", err)
	}
	if err := rt.svc.DeleteWebhookEndpoint(asLibrary(ctx), id); err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, apiError(err))
	}
	return nil
}

// ListWebhookDeliveries returns one page of webhook deliveries, newest
// first, each with its attempts; p.Limit 0 means 50.
func (rt *Runtime) ListWebhookDeliveries(ctx context.Context, p client.ListWebhookDeliveriesParams) (*lt.List[lt.WebhookDelivery], error) {
	if p.Limit < 0 || p.Limit > client.MaxListLimit {
		return nil, fmt.Errorf("list webhook deliveries: ListWebhookDeliveriesParams.Limit %d is outside 0..%d", p.Limit, client.MaxListLimit)
	}
	l, err := rt.svc.ListWebhookDeliveries(asLibrary(ctx), p)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", apiError(err))
	}
	return l, nil
}

// AllWebhookDeliveries yields every webhook delivery, newest first,
// following the pages' cursors from p.Cursor. The error is non-nil only
// once, as the last value.
func (rt *Runtime) AllWebhookDeliveries(ctx context.Context, p client.ListWebhookDeliveriesParams) iter.Seq2[lt.WebhookDelivery, error] {
	return client.Pages(p.Cursor, func(cursor string) (*lt.List[lt.WebhookDelivery], error) {
		p.Cursor = cursor
		return rt.ListWebhookDeliveries(ctx, p)
	})
}

// TaskReport returns one page of the task report of a window, with the
// totals and the time series of the whole window.
func (rt *Runtime) TaskReport(ctx context.Context, p lt.TaskReportParams) (*lt.TaskReport, error) {
	r, err := rt.svc.TaskReport(asLibrary(ctx), p)
	if err != nil {
		return nil, fmt.Errorf("task report: %w", apiError(err))
	}
	return r, nil
}

// Ready reports whether the store is reachable and migrated: nil when it
// is (the in-process counterpart of client.Ready and GET /readyz).
func (rt *Runtime) Ready(ctx context.Context) error {
	if err := rt.svc.Ready(asLibrary(ctx)); err != nil {
		return fmt.Errorf("ready: %w", apiError(err))
	}
	return nil
}
