package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// sessionStatuses are the values ?status= may take on GET /v1/sessions.
var sessionStatuses = []string{
	string(lt.SessionQueued), string(lt.SessionRunning), string(lt.SessionRequiresAction),
	string(lt.SessionWaiting), string(lt.SessionIdle), string(lt.SessionFailed), string(lt.SessionCancelled),
	string(lt.SessionPaused),
}

// createSession is POST /v1/sessions: 201 with the new session.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := decodeCreateSession(body)
	if err != nil {
		return err
	}
	sess, err := s.b.CreateSession(r.Context(), req)
	if err != nil {
		return err
	}
	if sess.WebhookURL != "" && s.webhooks != nil {
		// Shown once, here: the application verifies the notifications
		// its webhook_url receives with it.
		if sess.WebhookSecret, err = s.webhooks.SessionWebhookSecret(r.Context(), sess.ID); err != nil {
			return fmt.Errorf("webhook secret of session %s: %w", sess.ID, err)
		}
	}
	return writeJSON(w, http.StatusCreated, sess)
}

// listSessions is GET /v1/sessions?status=&agent=&parent_id=&cursor=&limit=,
// newest first.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	var p ListSessionsParams
	var err error
	status, err := queryEnum(r, "status", sessionStatuses...)
	if err != nil {
		return err
	}
	p.Status = lt.SessionStatus(status)
	if p.Agent, err = queryString(r, "agent"); err != nil {
		return err
	}
	if p.ParentID, err = queryString(r, "parent_id"); err != nil {
		return err
	}
	if p.Cursor, err = queryString(r, "cursor"); err != nil {
		return err
	}
	if p.Limit, err = queryLimit(r); err != nil {
		return err
	}
	list, err := s.b.ListSessions(r.Context(), p)
	if err != nil {
		return err
	}
	if list == nil {
		return errors.New("list sessions: backend returned no list")
	}
	if list.Data == nil {
		list.Data = []lt.Session{}
	}
	return writeJSON(w, http.StatusOK, list)
}

// getSession is GET /v1/sessions/{id}?include=subagents. With
// include=subagents the session's subagents are filled in, each with its
// own, down the whole tree, oldest child first; every session of the tree
// is read with GetSession, so each carries its pending required_actions.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	inc, err := queryInclude(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	sess, err := s.b.GetSession(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	if inc.subagents {
		if err := s.fillSubagents(ctx, sess); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, sess)
}

// fillSubagents sets the Subagents of root and of every session below it.
func (s *Server) fillSubagents(ctx context.Context, root *lt.Session) error {
	members, err := s.descendants(ctx, root.ID)
	if err != nil {
		return err
	}
	full := make(map[string]*lt.Session, len(members)+1)
	children := make(map[string][]string, len(members)+1)
	full[root.ID] = root
	for _, m := range members {
		sess, err := s.b.GetSession(ctx, m.id)
		if err != nil {
			return fmt.Errorf("get sub-agent %s of %s: %w", m.id, m.parent, err)
		}
		full[m.id] = sess
		children[m.parent] = append(children[m.parent], m.id)
	}
	// Subagents holds values, so a parent takes copies of its children:
	// build each child completely before copying it. descendants never
	// repeats a session, so this ends.
	var build func(id string) lt.Session
	build = func(id string) lt.Session {
		sess := full[id]
		for _, c := range children[id] {
			sess.Subagents = append(sess.Subagents, build(c))
		}
		return *sess
	}
	*root = build(root.ID)
	return nil
}

// includeOpts is what ?include= asks for.
type includeOpts struct {
	// subagents: the session's sub-agents too, recursively.
	subagents bool
}

// includeValues are the values ?include= may list.
var includeValues = []string{"subagents"}

// queryInclude parses ?include=, a comma-separated list of includeValues.
func queryInclude(r *http.Request) (includeOpts, error) {
	var inc includeOpts
	v, err := queryString(r, "include")
	if err != nil || v == "" {
		return inc, err
	}
	for item := range strings.SplitSeq(v, ",") {
		switch strings.TrimSpace(item) {
		case "subagents":
			inc.subagents = true
		default:
			return includeOpts{}, apierror.Invalid("include", "query parameter \"include\" is a comma-separated list of %s, got %s",
				strings.Join(includeValues, ", "), quoteField(item))
		}
	}
	return inc, nil
}

// maxTreeSessions bounds the sessions that one ?include=subagents request
// reads or follows, the root included. A larger tree is refused with a 400
// rather than cut silently: a client must not take a partial tree for the
// whole one.
const maxTreeSessions = 1000

// treeMember is a session below the root of a tree, with its parent.
type treeMember struct {
	id, parent string
}

// treeTooLarge is the error for a tree past maxTreeSessions.
func treeTooLarge(root string) error {
	return apierror.Invalid("include", "the session tree of %s has more than %d sessions, more than include=subagents serves; "+
		"read its sessions one by one (GET /v1/sessions?parent_id=)", root, maxTreeSessions)
}

// descendants lists every session below root, breadth first: each after its
// parent, the children of one parent oldest first. It pages through
// ListSessions fully, and fails with treeTooLarge when the tree, root
// included, has more than maxTreeSessions sessions. A session listed twice
// (a cycle, which parent links cannot form, or a page that repeats one) is
// taken once.
func (s *Server) descendants(ctx context.Context, root string) ([]treeMember, error) {
	var out []treeMember
	seen := map[string]bool{root: true}
	for i := -1; i < len(out); i++ {
		parent := root
		if i >= 0 {
			parent = out[i].id
		}
		children, err := s.children(ctx, parent, maxTreeSessions-1-len(out))
		if err != nil {
			if errors.Is(err, errTooManyChildren) {
				return nil, treeTooLarge(root)
			}
			return nil, err
		}
		for _, c := range children {
			if seen[c] {
				continue
			}
			if len(out)+1 >= maxTreeSessions {
				return nil, treeTooLarge(root)
			}
			seen[c] = true
			out = append(out, treeMember{id: c, parent: parent})
		}
	}
	return out, nil
}

// errTooManyChildren: a session has more children than children was allowed
// to return.
var errTooManyChildren = errors.New("too many children")

// children returns the ids of the sessions whose parent is id, oldest first,
// reading every page of ListSessions; errTooManyChildren once it has read
// more than room of them, so a huge fan-out is not read to its end.
func (s *Server) children(ctx context.Context, id string, room int) ([]string, error) {
	p := ListSessionsParams{ParentID: id, Limit: maxLimit}
	var kids []lt.Session
	for {
		page, err := s.b.ListSessions(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("list sub-agents of %s: %w", id, err)
		}
		if page == nil {
			return nil, fmt.Errorf("list sub-agents of %s: backend returned no list", id)
		}
		kids = append(kids, page.Data...)
		if len(kids) > room {
			return nil, errTooManyChildren
		}
		if page.NextCursor == nil || len(page.Data) == 0 {
			break
		}
		p.Cursor = *page.NextCursor
	}
	slices.SortStableFunc(kids, func(a, b lt.Session) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	ids := make([]string, len(kids))
	for i, k := range kids {
		ids[i] = k.ID
	}
	return ids, nil
}

// createTurn is POST /v1/sessions/{id}/turns: 201 with the new turn (queued
// behind a running one, if any).
func (s *Server) createTurn(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := decodeCreateTurn(body)
	if err != nil {
		return err
	}
	turn, err := s.b.CreateTurn(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, turn)
}

// listTurns is GET /v1/sessions/{id}/turns, oldest first.
func (s *Server) listTurns(w http.ResponseWriter, r *http.Request) error {
	turns, err := s.b.ListTurns(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeList(w, turns)
}

// getTurn is GET /v1/sessions/{id}/turns/{turn_id}.
func (s *Server) getTurn(w http.ResponseWriter, r *http.Request) error {
	turn, err := s.b.GetTurn(r.Context(), r.PathValue("id"), r.PathValue("turn_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, turn)
}

// cancelSession is POST /v1/sessions/{id}/cancel: 200 with the session (the
// running turn stops at its next safe point).
func (s *Server) cancelSession(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := decodeCancel(body)
	if err != nil {
		return err
	}
	sess, err := s.b.CancelSession(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sess)
}

// sendSignal is POST /v1/sessions/{id}/signals: 202 with the signal (it
// wakes a waiting session, or is kept until one waits).
func (s *Server) sendSignal(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := decodeSignal(body)
	if err != nil {
		return err
	}
	sig, err := s.b.SendSignal(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, sig)
}

// forkSession is POST /v1/sessions/{id}/fork: 201 with the new session.
func (s *Server) forkSession(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := decodeFork(body)
	if err != nil {
		return err
	}
	sess, err := s.b.ForkSession(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, sess)
}

// reviewSession is POST /v1/sessions/{id}/review: 200 with the session.
func (s *Server) reviewSession(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := decodeReview(body)
	if err != nil {
		return err
	}
	sess, err := s.b.ReviewSession(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sess)
}

// addConstraint is POST /v1/sessions/{id}/constraints: 201 with the
// session, whose constraints now end with the new one.
func (s *Server) addConstraint(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := decodeAddConstraint(body)
	if err != nil {
		return err
	}
	sess, err := s.b.AddConstraint(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, sess)
}

// updateBudget is PATCH /v1/sessions/{id}/budget: 200 with the session.
// Each limit the body names is replaced (0 removes it); the others are
// kept. A PATCH that replaces values is idempotent by itself, so it needs no
// Idempotency-Key.
func (s *Server) updateBudget(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	p, err := decodeBudgetPatch(body)
	if err != nil {
		return err
	}
	sess, err := s.b.UpdateBudget(r.Context(), r.PathValue("id"), p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sess)
}

// writeList writes items in the list envelope of an endpoint that returns
// everything at once (next_cursor is always null).
func writeList[T any](w http.ResponseWriter, items []T) error {
	if items == nil {
		items = []T{}
	}
	return writeJSON(w, http.StatusOK, lt.List[T]{Data: items})
}
