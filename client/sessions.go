package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// MaxListLimit is the largest page the API serves (API.md "Conventions").
const MaxListLimit = 500

// ListSessionsParams filters and pages GET /v1/sessions. Zero fields are not
// sent: no filter, the first page, the server's default page size.
type ListSessionsParams = lt.ListSessionsParams

// get performs a GET and decodes the JSON response into a new T.
func get[T any](ctx context.Context, c *Client, u string) (*T, error) {
	out := new(T)
	if err := c.doJSON(ctx, &call{method: http.MethodGet, url: u}, out); err != nil {
		return nil, err
	}
	return out, nil
}

// post performs a POST of in and decodes the JSON response into a new T.
func post[T any](ctx context.Context, c *Client, u string, in any) (*T, error) {
	out := new(T)
	if err := c.doJSON(ctx, &call{method: http.MethodPost, url: u, body: in}, out); err != nil {
		return nil, err
	}
	return out, nil
}

func checkLimit(field string, limit int) error {
	if limit < 0 || limit > MaxListLimit {
		return fmt.Errorf("%s %d is outside 0..%d", field, limit, MaxListLimit)
	}
	return nil
}

// CreateSession creates a session and starts its first turn
// (POST /v1/sessions).
func (c *Client) CreateSession(ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error) {
	if req == nil {
		return nil, fmt.Errorf("create session: req is nil")
	}
	s, err := post[lt.Session](ctx, c, c.endpoint(nil, "v1", "sessions"), req)
	if err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	return s, nil
}

// GetSession returns one session, with its pending required actions
// (GET /v1/sessions/{id}).
func (c *Client) GetSession(ctx context.Context, id string) (*lt.Session, error) {
	if err := requireID("id", id); err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	s, err := get[lt.Session](ctx, c, c.endpoint(nil, "v1", "sessions", id))
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	return s, nil
}

// GetSessionTree returns a session with its sub-agents, recursively: each
// session of the tree in Subagents of its parent, oldest first, each with
// its pending required actions (GET /v1/sessions/{id}?include=subagents).
// The server refuses a tree of more than 1,000 sessions (an APIError naming
// the field include).
func (c *Client) GetSessionTree(ctx context.Context, id string) (*lt.Session, error) {
	if err := requireID("id", id); err != nil {
		return nil, fmt.Errorf("get session tree: %w", err)
	}
	q := url.Values{}
	q.Set("include", "subagents")
	s, err := get[lt.Session](ctx, c, c.endpoint(q, "v1", "sessions", id))
	if err != nil {
		return nil, fmt.Errorf("get session tree %s: %w", id, err)
	}
	return s, nil
}

// ListSessions returns one page of sessions (GET /v1/sessions); pass the
// page's NextCursor as p.Cursor for the next one.
func (c *Client) ListSessions(ctx context.Context, p ListSessionsParams) (*lt.List[lt.Session], error) {
	if err := checkLimit("ListSessionsParams.Limit", p.Limit); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	q := url.Values{}
	setIf(q, "status", string(p.Status))
	setIf(q, "agent", p.Agent)
	setIf(q, "parent_id", p.ParentID)
	setIf(q, "project", p.Project)
	setIf(q, "cursor", p.Cursor)
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	l, err := get[lt.List[lt.Session]](ctx, c, c.endpoint(q, "v1", "sessions"))
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return l, nil
}

func setIf(q url.Values, key, value string) {
	if value != "" {
		q.Set(key, value)
	}
}

// CreateTurn sends a follow-up turn; it is queued if a turn is running
// (POST /v1/sessions/{id}/turns).
func (c *Client) CreateTurn(ctx context.Context, sessionID string, req *lt.CreateTurnRequest) (*lt.Turn, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("create turn: %w", err)
	}
	if req == nil {
		return nil, fmt.Errorf("create turn: req is nil")
	}
	t, err := post[lt.Turn](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "turns"), req)
	if err != nil {
		return nil, fmt.Errorf("create turn in %s: %w", sessionID, err)
	}
	return t, nil
}

// ListTurns returns the session's turns (GET /v1/sessions/{id}/turns).
func (c *Client) ListTurns(ctx context.Context, sessionID string) (*lt.List[lt.Turn], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list turns: %w", err)
	}
	l, err := get[lt.List[lt.Turn]](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "turns"))
	if err != nil {
		return nil, fmt.Errorf("list turns of %s: %w", sessionID, err)
	}
	return l, nil
}

// GetTurn returns one turn (GET /v1/sessions/{id}/turns/{turn_id}).
func (c *Client) GetTurn(ctx context.Context, sessionID, turnID string) (*lt.Turn, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("get turn: %w", err)
	}
	if err := requireID("turnID", turnID); err != nil {
		return nil, fmt.Errorf("get turn: %w", err)
	}
	t, err := get[lt.Turn](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "turns", turnID))
	if err != nil {
		return nil, fmt.Errorf("get turn %s of %s: %w", turnID, sessionID, err)
	}
	return t, nil
}

// Cancel stops the session's running turn at the next safe point
// (POST /v1/sessions/{id}/cancel). req may be nil (no reason).
func (c *Client) Cancel(ctx context.Context, sessionID string, req *lt.CancelRequest) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("cancel session: %w", err)
	}
	if req == nil {
		req = &lt.CancelRequest{}
	}
	s, err := post[lt.Session](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "cancel"), req)
	if err != nil {
		return nil, fmt.Errorf("cancel session %s: %w", sessionID, err)
	}
	return s, nil
}

// SendSignal delivers a signal (POST /v1/sessions/{id}/signals): it wakes
// a wait_for_signal of that name, or is kept until one waits.
func (c *Client) SendSignal(ctx context.Context, sessionID string, req *lt.SignalRequest) (*lt.Signal, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("send signal: %w", err)
	}
	s, err := post[lt.Signal](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "signals"), req)
	if err != nil {
		return nil, fmt.Errorf("send signal to session %s: %w", sessionID, err)
	}
	return s, nil
}

// Fork creates a session from one of the session's checkpoints
// (POST /v1/sessions/{id}/fork).
func (c *Client) Fork(ctx context.Context, sessionID string, req *lt.ForkRequest) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("fork session: %w", err)
	}
	s, err := post[lt.Session](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "fork"), req)
	if err != nil {
		return nil, fmt.Errorf("fork session %s: %w", sessionID, err)
	}
	return s, nil
}

// Review records a verdict on the session's final artifact
// (POST /v1/sessions/{id}/review).
func (c *Client) Review(ctx context.Context, sessionID string, req *lt.ReviewRequest) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("review session: %w", err)
	}
	s, err := post[lt.Session](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "review"), req)
	if err != nil {
		return nil, fmt.Errorf("review session %s: %w", sessionID, err)
	}
	return s, nil
}

// AddConstraint pins a constraint mid-session
// (POST /v1/sessions/{id}/constraints): every later model context carries
// it verbatim.
func (c *Client) AddConstraint(ctx context.Context, sessionID, constraint string) (*lt.Session, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("add constraint: %w", err)
	}
	s, err := post[lt.Session](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "constraints"), &lt.AddConstraintRequest{Constraint: constraint})
	if err != nil {
		return nil, fmt.Errorf("add constraint to session %s: %w", sessionID, err)
	}
	return s, nil
}

// ListEffects returns the session's side-effect ledger
// (GET /v1/sessions/{id}/effects).
func (c *Client) ListEffects(ctx context.Context, sessionID string) (*lt.List[lt.Effect], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list effects: %w", err)
	}
	l, err := get[lt.List[lt.Effect]](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "effects"))
	if err != nil {
		return nil, fmt.Errorf("list effects of %s: %w", sessionID, err)
	}
	return l, nil
}

// GetEffect returns one row of the ledger with its whole arguments and
// output (GET /v1/sessions/{id}/effects/{effect_id}).
func (c *Client) GetEffect(ctx context.Context, sessionID, effectID string) (*lt.Effect, error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("get effect: %w", err)
	}
	if err := requireID("effectID", effectID); err != nil {
		return nil, fmt.Errorf("get effect: %w", err)
	}
	e, err := get[lt.Effect](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "effects", effectID))
	if err != nil {
		return nil, fmt.Errorf("get effect %s of %s: %w", effectID, sessionID, err)
	}
	return e, nil
}

// ListCheckpoints returns the session's checkpoints
// (GET /v1/sessions/{id}/checkpoints).
func (c *Client) ListCheckpoints(ctx context.Context, sessionID string) (*lt.List[lt.Checkpoint], error) {
	if err := requireID("sessionID", sessionID); err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	l, err := get[lt.List[lt.Checkpoint]](ctx, c, c.endpoint(nil, "v1", "sessions", sessionID, "checkpoints"))
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", sessionID, err)
	}
	return l, nil
}
