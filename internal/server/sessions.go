package server

import (
	"errors"
	"net/http"
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
	// With a webhook_url, the answer carries the secret that signs its
	// notifications, shown only here.
	sess, err := s.b.CreateSession(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, sess)
}

// listSessions is GET /v1/sessions?project=&status=&agent=&parent_id=&cursor=&limit=,
// newest first.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	var p ListSessionsParams
	var err error
	status, err := queryEnum(r, "status", sessionStatuses...)
	if err != nil {
		return err
	}
	p.Status = lt.SessionStatus(status)
	if p.Project, err = queryString(r, "project"); err != nil {
		return err
	}
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
// own, down the whole tree, oldest child first (Backend.GetSessionTree).
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	inc, err := queryInclude(r)
	if err != nil {
		return err
	}
	get := s.b.GetSession
	if inc.subagents {
		get = s.b.GetSessionTree
	}
	sess, err := get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sess)
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
	return writeJSON(w, http.StatusOK, turns)
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
	sess, err := s.b.Cancel(r.Context(), r.PathValue("id"), req)
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
	sess, err := s.b.Fork(r.Context(), r.PathValue("id"), req)
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
	sess, err := s.b.Review(r.Context(), r.PathValue("id"), req)
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
	sess, err := s.b.AddConstraint(r.Context(), r.PathValue("id"), req.Constraint)
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
