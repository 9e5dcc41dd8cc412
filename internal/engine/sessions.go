package engine

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// maxInputBytes bounds one turn's input (the request body limit is larger).
const maxInputBytes = 512 << 10

// CreateSession validates the request, pins the agent version, and appends
// session.created and turn.created in one transaction.
func (e *Engine) CreateSession(ctx context.Context, req *lt.CreateSessionRequest) (*lt.Session, error) {
	return e.CreateSessionSigned(ctx, req, "")
}

// CreateSessionSigned is CreateSession writing, with a session that has a
// webhook_url, the secret that signs its notifications, webhookSecret, in
// the creation's transaction (returned in WebhookSecret): no write after
// the commit can then fail the answer, which a client would retry by
// creating again. Without webhookSecret the dispatcher makes the secret
// later (a test's session, the benchmark's).
func (e *Engine) CreateSessionSigned(ctx context.Context, req *lt.CreateSessionRequest, webhookSecret string) (*lt.Session, error) {
	id, seeded, err := creationID(ctx, "ses_", e.clock.Now())
	if err != nil {
		return nil, err
	}
	if seeded && IsRerun(ctx) {
		// Made by an earlier run of the same request: answered as made,
		// before anything of the request is checked again (what was
		// allowed then may be refused now, and the session runs), the
		// space left on the disk included.
		if v, err := e.GetSession(ctx, id); !isNotFound(err) {
			return v, err
		}
	}
	if err := e.refuseWhenLow(); err != nil {
		return nil, err
	}
	spec, ref, err := e.resolveAgent(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := validateInput(req.Input, "input"); err != nil {
		return nil, err
	}
	budget := lt.Budget{}
	if spec.Budget != nil {
		budget = *spec.Budget
	}
	if req.Budget != nil {
		if err := validateBudget(*req.Budget, "budget"); err != nil {
			return nil, err
		}
		budget = *req.Budget
	}
	if len(req.Metadata) > 0 && string(req.Metadata) != "null" {
		var m map[string]any
		if err := json.Unmarshal(req.Metadata, &m); err != nil {
			return nil, apierror.Invalid("metadata", "must be a JSON object")
		}
	}
	if err := checkWebhookURL(req.WebhookURL); err != nil {
		return nil, err
	}
	for i, c := range req.Constraints {
		if strings.TrimSpace(c) == "" {
			return nil, apierror.Invalid("constraints["+strconv.Itoa(i)+"]", "must not be empty")
		}
	}
	for i, c := range req.AcceptanceCriteria {
		if strings.TrimSpace(c) == "" {
			return nil, apierror.Invalid("acceptance_criteria["+strconv.Itoa(i)+"]", "must not be empty")
		}
	}
	project := req.Project
	if project == "" {
		project = lt.DefaultProject
	}
	if req.WebhookURL == "" {
		webhookSecret = ""
	}
	st, err := e.createSession(ctx, &newSession{
		ID: id, Spec: spec, Ref: ref, WebhookSecret: webhookSecret,
		Created: lt.SessionCreatedData{
			Agent: ref, Input: req.Input, Goal: req.Goal, Constraints: req.Constraints,
			AcceptanceCriteria: req.AcceptanceCriteria, Budget: budget, Metadata: req.Metadata, WebhookURL: req.WebhookURL,
			Project: project,
			Actor:   actorOf(ctx),
		},
	})
	if seeded && errors.Is(err, store.ErrConflict) {
		// Made by a run of the same request at the same time.
		return e.seededMade(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	v := st.View()
	v.WebhookSecret = webhookSecret
	return &v, nil
}

// seededMade is the session id that a run of the same request made at the
// same time as this one (its creation conflicted). On SQLite a conflict is
// answered before the batch that holds the other run's write commits, so
// the session may not be readable yet: that is a 503 to retry, never a 404,
// which would tell the client that nothing was made.
func (e *Engine) seededMade(ctx context.Context, id string) (*lt.Session, error) {
	v, err := e.GetSession(ctx, id)
	if isNotFound(err) {
		return nil, apierror.Unavailable("session %s is being made by another run of this request: retry it", id)
	}
	return v, err
}

// newSession is a session to create: through the API, or a sub-agent.
type newSession struct {
	ID      string
	Spec    *lt.AgentSpec
	Ref     lt.AgentRef
	Created lt.SessionCreatedData
	// ParentAt, for a sub-agent, is its parent's journal as the spawning
	// runner knows it: the child is made only if it still is
	// (store.SessionCreateParams.ParentAt).
	ParentAt *store.JournalAt
	// WebhookSecret, when set, is written as the session's webhook state
	// in its creation's transaction (notifications from its first event).
	WebhookSecret string
}

// createSession appends session.created and the first turn.created in one
// transaction. store.ErrConflict: a session with that id exists.
func (e *Engine) createSession(ctx context.Context, ns *newSession) (*journal.State, error) {
	specJSON, err := json.Marshal(ns.Spec)
	if err != nil {
		return nil, err
	}
	if ns.Created.Workspace == "" && ns.Spec.Environment != nil {
		// A sub-agent works in its root's workspace: only a root stops it.
		ns.Created.IdleStopSeconds = ns.Spec.Environment.IdleStopSeconds
	}
	now := e.clock.Now()
	st := &journal.State{}
	st.Session.ID = ns.ID
	b := e.newBatch(ctx, st, "")
	if err := b.add(lt.EventSessionCreated, "", 0, ns.Created); err != nil {
		return nil, err
	}
	turnID := newID("turn_", now)
	if err := b.add(lt.EventTurnCreated, turnID, 0, lt.TurnCreatedData{TurnID: turnID, Index: 1, Input: ns.Created.Input}); err != nil {
		return nil, err
	}
	p, err := b.appendParams(0, nil, false)
	if err != nil {
		return nil, err
	}
	params := &store.SessionCreateParams{
		Session: store.SessionRow{
			ID: st.Session.ID, Project: st.Project(), AgentName: ns.Ref.Name, AgentVersion: ns.Ref.Version, ParentID: ns.Created.ParentID,
			Status: string(st.Session.Status), Spec: specJSON, State: p.State, Runnable: p.Runnable, CreatedAt: now, UpdatedAt: now,
		},
		Events: p.Events, Docs: p.Docs, Blobs: p.Blobs, ParentAt: ns.ParentAt,
	}
	if ns.WebhookSecret != "" {
		params.Webhook = &store.WebhookSessionRow{Secret: ns.WebhookSecret}
	}
	// With a worker free here and no older session known to wait for
	// one (reserveWorker), the session is created leased to this node
	// and runs at once, without a claim (a write, and on SQLite an fsync,
	// of its own).
	claimed := p.Runnable && e.reserveWorker()
	var claim *claimWatch
	if claimed {
		params.Claim = &store.SessionClaim{Owner: e.cfg.NodeID, ExpiresAt: now.Add(e.cfg.LeaseTTL)}
		// Subscribed before the creation, which is what its runner
		// reads first (created).
		claim = e.watchClaim(st.Session.ID)
	}
	if claimed && joinsFirstAppend(ns, params) {
		// Written by its runner, with its first append (createjoin.go).
		pc := newPendingCreation(params)
		row := params.Session
		row.LastSeq = st.Session.LastEventSeq
		events := store.Numbered(row.ID, 0, params.Events)
		e.handOff(ctx, job{lease: params.Claim.Lease(st.Session.ID), created: &created{row: row, events: events, claim: claim, pending: pc}})
		if err := e.awaitCreation(ctx, pc); err != nil {
			return nil, err
		}
		return st, nil
	}
	events, err := e.store.SessionCreate(ctx, params)
	if err != nil {
		if claimed {
			claim.stop()
			e.releaseWorker()
		}
		return nil, err
	}
	if claimed {
		row := params.Session
		row.LastSeq = st.Session.LastEventSeq
		e.handOff(ctx, job{lease: params.Claim.Lease(st.Session.ID), created: &created{row: row, events: events, claim: claim}})
	}
	return st, nil
}

// joinsFirstAppend reports whether a session created leased to this node is
// written with its runner's first append (createjoin.go): a root session
// without MCP servers (whose first listing starts them before the first
// request), not on a runner (whose connection its first tick waits for or
// journals, after a look), whose creation carries no blob (its runner
// would read the blob back from the store before it wrote the creation).
func joinsFirstAppend(ns *newSession, p *store.SessionCreateParams) bool {
	onRunner := ns.Spec.Environment != nil && ns.Spec.Environment.Runner != nil
	return ns.Created.ParentID == "" && !onRunner && len(mcpSpecs(ns.Spec)) == 0 && len(p.Blobs) == 0 && len(p.BlobRefs) == 0
}

func (e *Engine) resolveAgent(ctx context.Context, req *lt.CreateSessionRequest) (*lt.AgentSpec, lt.AgentRef, error) {
	switch {
	case req.Agent != "" && req.AgentSpec != nil:
		return nil, lt.AgentRef{}, apierror.Invalid("agent_spec", "give either agent or agent_spec, not both")
	case req.AgentSpec != nil:
		if err := e.validateSpec(ctx, req.Project, req.AgentSpec, "agent_spec"); err != nil {
			return nil, lt.AgentRef{}, err
		}
		return req.AgentSpec, lt.AgentRef{Name: inlineAgent, Version: 1}, nil
	case req.Agent != "":
		// The session's project's agent: the same name in another
		// project is another agent.
		a, err := e.GetAgent(ctx, req.Project, req.Agent, 0)
		if err != nil {
			var ae *apierror.Error
			if errors.As(err, &ae) && ae.Code == lt.CodeNotFound {
				return nil, lt.AgentRef{}, apierror.Invalid("agent", "no agent named %q", req.Agent)
			}
			return nil, lt.AgentRef{}, err
		}
		return &a.Spec, lt.AgentRef{Name: a.Name, Version: a.Version}, nil
	default:
		return nil, lt.AgentRef{}, apierror.Invalid("agent", "give agent (a configured agent's name) or agent_spec")
	}
}

func validateInput(s, field string) error {
	if strings.TrimSpace(s) == "" {
		return apierror.Invalid(field, "required")
	}
	if len(s) > maxInputBytes {
		return apierror.Invalid(field, "longer than %d bytes", maxInputBytes)
	}
	return nil
}

// GetSession returns a session's projection.
func (e *Engine) GetSession(ctx context.Context, id string) (*lt.Session, error) {
	_, st, err := e.loadState(ctx, id)
	if err != nil {
		return nil, notFound(err, "session", id)
	}
	v := st.View()
	return &v, nil
}

// ListSessions lists sessions newest first.
func (e *Engine) ListSessions(ctx context.Context, p lt.ListSessionsParams) (*lt.List[lt.Session], error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := e.store.SessionList(ctx, &store.SessionListParams{Project: p.Project, Status: string(p.Status), Agent: p.Agent, ParentID: p.ParentID, Cursor: p.Cursor, Limit: limit + 1})
	if errors.Is(err, store.ErrNotFound) && p.Cursor != "" {
		return nil, apierror.Invalid("cursor", "unknown cursor %q", p.Cursor)
	}
	if err != nil {
		return nil, err
	}
	out := &lt.List[lt.Session]{Data: []lt.Session{}}
	for i, r := range rows {
		if i == limit {
			c := rows[i-1].ID
			out.NextCursor = &c
			break
		}
		var st journal.State
		if err := json.Unmarshal(r.State, &st); err != nil {
			return nil, err
		}
		out.Data = append(out.Data, st.View())
	}
	return out, nil
}

// CreateTurn queues a follow-up turn; it starts when the running one ends.
func (e *Engine) CreateTurn(ctx context.Context, sessionID string, req *lt.CreateTurnRequest) (*lt.Turn, error) {
	if err := validateInput(req.Input, "input"); err != nil {
		return nil, err
	}
	id, seeded, err := creationID(ctx, "turn_", e.clock.Now())
	if err != nil {
		return nil, err
	}
	turn, err := mutate(ctx, e, sessionID, func(b *batch) (*lt.Turn, error) {
		st := b.st
		if seeded {
			// Queued by an earlier run of the same request (perhaps ended
			// since), or by one that overlapped this one (its claim taken
			// over while it still ran): its turn is read committed, or its
			// write moved the journal's end and this change is made again.
			if t, err := e.GetTurn(ctx, sessionID, id); err == nil {
				return t, nil
			} else if !isNotFound(err) {
				return nil, err
			}
		}
		if err := e.refuseWhenLow(); err != nil {
			return nil, err
		}
		if st.Cancel != nil {
			return nil, apierror.Conflict("session %s is being cancelled", sessionID)
		}
		if p := st.Session.ParentID; p != nil && st.Pause == nil {
			// A sub-agent works in its tree's workspace: a turn would
			// start it under a paused ancestor (pause.go). One paused
			// itself queues the turn, which starts after its resume.
			if err := e.ancestorPaused(ctx, sessionID, *p); err != nil {
				return nil, err
			}
		}
		if err := b.add(lt.EventTurnCreated, id, 0, lt.TurnCreatedData{TurnID: id, Index: st.TurnCount + 1, Input: req.Input}); err != nil {
			return nil, err
		}
		if st.Session.Status.Terminal() {
			if err := b.status(lt.SessionQueued, ""); err != nil {
				return nil, err
			}
		}
		t := st.Turns[len(st.Turns)-1]
		return &t, nil
	})
	if err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	return turn, nil
}

// ListTurns returns every turn of a session in order.
func (e *Engine) ListTurns(ctx context.Context, sessionID string) ([]lt.Turn, error) {
	live, err := e.liveTurns(ctx, sessionID)
	if err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	rows, err := e.store.TurnList(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	turns, err := decodeDocs[lt.Turn](rows)
	if err != nil {
		return nil, err
	}
	for i := range turns {
		turns[i] = withLiveFigures(turns[i], live)
	}
	// Turns are numbered in the order they were queued; creation times can tie.
	slices.SortFunc(turns, func(a, b lt.Turn) int { return a.Index - b.Index })
	return turns, nil
}

// GetTurn returns one turn.
func (e *Engine) GetTurn(ctx context.Context, sessionID, turnID string) (*lt.Turn, error) {
	live, err := e.liveTurns(ctx, sessionID)
	if err != nil {
		return nil, notFound(err, "turn", turnID)
	}
	row, err := e.store.TurnGet(ctx, sessionID, turnID)
	if err != nil {
		return nil, notFound(err, "turn", turnID)
	}
	var t lt.Turn
	if err := json.Unmarshal(row.Doc, &t); err != nil {
		return nil, err
	}
	t = withLiveFigures(t, live)
	return &t, nil
}

// liveTurns returns the unfinished turns of a session's state, whose
// figures (steps, usage) are live there: a turn's row is written only when
// its status changes (journal.putTurnFigures). The state must be read
// before the rows, as the callers do: a row read after it is as new or
// newer, so one whose status is still the state's turn's has not been
// written since that status began, and the state's figures are the later
// ones; a turn that ended or started in between has a row with another
// status, read as it is (withLiveFigures).
func (e *Engine) liveTurns(ctx context.Context, sessionID string) ([]lt.Turn, error) {
	_, st, err := e.loadState(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return st.Turns, nil
}

// withLiveFigures returns t, the turn as its row holds it, or its state's
// copy when the state holds the turn with the same status (liveTurns).
func withLiveFigures(t lt.Turn, live []lt.Turn) lt.Turn {
	for _, l := range live {
		if l.ID == t.ID && l.Status == t.Status {
			return l
		}
	}
	return t
}

// CancelSession asks the running turn (and queued ones) to stop at the next
// safe point. A worker carries it out: effects already started are recorded
// as such. Cancelling a session with nothing to cancel is a no-op. A run
// of a request an earlier run of which journaled its cancel (creationseed.go)
// answers with the session as it is: it does not cancel a turn queued since.
func (e *Engine) CancelSession(ctx context.Context, id string, req *lt.CancelRequest) (*lt.Session, error) {
	return e.journalControl(ctx, id, lt.EventSessionCancelRequested, func(b *batch, request string) error {
		if len(b.st.Turns) == 0 || b.st.Cancel != nil {
			return nil
		}
		return b.add(lt.EventSessionCancelRequested, "", 0, lt.SessionCancelRequestedData{Reason: req.Reason, Actor: b.actor(), Request: request})
	})
}

// maxConstraintBytes bounds one constraint: it is placed in every context.
const maxConstraintBytes = 4 << 10

// AddConstraint pins a constraint mid-session (session.constraint_added):
// every later model context carries it verbatim in the pinned block, and
// compaction never summarises it.
func (e *Engine) AddConstraint(ctx context.Context, id string, req *lt.AddConstraintRequest) (*lt.Session, error) {
	c := strings.TrimSpace(req.Constraint)
	switch {
	case c == "":
		return nil, apierror.Invalid("constraint", "required: the constraint to pin")
	case len(c) > maxConstraintBytes:
		return nil, apierror.Invalid("constraint", "must be at most %d bytes", maxConstraintBytes)
	}
	return e.journalControl(ctx, id, lt.EventConstraintAdded, func(b *batch, request string) error {
		return b.add(lt.EventConstraintAdded, "", 0, lt.ConstraintAddedData{Constraint: c, Actor: b.actor(), Request: request})
	})
}

func decodeDocs[T any](rows []*store.DocRow) ([]T, error) {
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		var v T
		if err := json.Unmarshal(r.Doc, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// notFound maps the store's ErrNotFound to a 404 naming what was missing.
func notFound(err error, what, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return apierror.NotFound("%s %s not found", what, id)
	}
	return err
}

// checkWebhookURL refuses a session's webhook_url that is not an absolute
// http(s) URL ("" is none).
func checkWebhookURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return apierror.Invalid("webhook_url", "must be an absolute http(s) URL")
	}
	return nil
}
