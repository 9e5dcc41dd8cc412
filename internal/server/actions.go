package server

import (
	"net/http"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// actionStatuses are the values ?status= may take on the actions list.
var actionStatuses = []string{string(lt.ActionPending), string(lt.ActionResolved), string(lt.ActionCancelled)}

// listActions is GET /v1/sessions/{id}/actions?status=: the session's
// required actions, all of them without a status.
func (s *Server) listActions(w http.ResponseWriter, r *http.Request) error {
	status, err := queryEnum(r, "status", actionStatuses...)
	if err != nil {
		return err
	}
	actions, err := s.b.ListActions(r.Context(), r.PathValue("id"), status)
	if err != nil {
		return err
	}
	return writeList(w, actions)
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
	return writeList(w, effects)
}

// listCheckpoints is GET /v1/sessions/{id}/checkpoints.
func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request) error {
	checkpoints, err := s.b.ListCheckpoints(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeList(w, checkpoints)
}
