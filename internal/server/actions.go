package server

import (
	"errors"
	"net/http"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// actionStatuses are the values ?status= may take on the actions list.
var actionStatuses = []string{string(lt.ActionPending), string(lt.ActionResolved), string(lt.ActionCancelled)}

// actionTypes are the values ?type= may take on the inbox.
var actionTypes = []string{
	string(lt.ActionApproval), string(lt.ActionFunctionCall), string(lt.ActionInput),
	string(lt.ActionInDoubt), string(lt.ActionBudget), string(lt.ActionEnvironmentConnection),
	string(lt.ActionBrowserPermission), string(lt.ActionMonitor),
}

// listAllActions is GET /v1/actions?project=&status=&type=&session_id=&cursor=&limit=:
// the inbox of required actions across sessions, oldest first.
func (s *Server) listAllActions(w http.ResponseWriter, r *http.Request) error {
	var p lt.ListActionsParams
	var err error
	if p.Status, err = queryEnum(r, "status", actionStatuses...); err != nil {
		return err
	}
	if p.Type, err = queryEnum(r, "type", actionTypes...); err != nil {
		return err
	}
	if p.SessionID, err = queryString(r, "session_id"); err != nil {
		return err
	}
	if p.Project, err = queryString(r, "project"); err != nil {
		return err
	}
	if p.Cursor, err = queryString(r, "cursor"); err != nil {
		return err
	}
	if p.Limit, err = queryLimit(r); err != nil {
		return err
	}
	list, err := s.b.ListAllActions(r.Context(), p)
	if err != nil {
		return err
	}
	if list == nil {
		return errors.New("list actions: backend returned no list")
	}
	if list.Data == nil {
		list.Data = []lt.Action{}
	}
	return writeJSON(w, http.StatusOK, list)
}

// getAction is GET /v1/actions/{action_id}: one action, whatever its
// session and status, so an inbox entry can be shown from its id alone.
func (s *Server) getAction(w http.ResponseWriter, r *http.Request) error {
	a, err := s.b.GetAction(r.Context(), r.PathValue("action_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a)
}

// listActions is GET /v1/sessions/{id}/actions?status=&include=: the
// session's required actions, all of them without a status. With
// include=subagents, the actions of every session below it too (each action
// names its session_id, where it is decided), ordered by created_at.
func (s *Server) listActions(w http.ResponseWriter, r *http.Request) error {
	status, err := queryEnum(r, "status", actionStatuses...)
	if err != nil {
		return err
	}
	inc, err := queryInclude(r)
	if err != nil {
		return err
	}
	list := s.b.ListActions
	if inc.subagents {
		list = s.b.ListTreeActions
	}
	actions, err := list(r.Context(), r.PathValue("id"), lt.ActionStatus(status))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, actions)
}

// decideAction is POST /v1/sessions/{id}/actions/{action_id}: 200 with the
// resolved action. Which fields of the decision apply depends on the
// action's type; the backend checks them (it knows the type).
func (s *Server) decideAction(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	d, err := decodeDecision(body)
	if err != nil {
		return err
	}
	action, err := s.b.DecideAction(r.Context(), r.PathValue("id"), r.PathValue("action_id"), d)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, action)
}

// listEffects is GET /v1/sessions/{id}/effects: the side-effect ledger.
func (s *Server) listEffects(w http.ResponseWriter, r *http.Request) error {
	effects, err := s.b.ListEffects(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, effects)
}

// getEffect is GET /v1/sessions/{id}/effects/{effect_id}: one ledger row
// with its whole arguments and output.
func (s *Server) getEffect(w http.ResponseWriter, r *http.Request) error {
	effect, err := s.b.GetEffect(r.Context(), r.PathValue("id"), r.PathValue("effect_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, effect)
}

// listCheckpoints is GET /v1/sessions/{id}/checkpoints.
func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request) error {
	checkpoints, err := s.b.ListCheckpoints(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, checkpoints)
}
