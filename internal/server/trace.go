package server

import (
	"net/http"
)

// sessionTrace is GET /v1/sessions/{id}/trace[?include=subagents]: the
// session's spans (turn → steps → model calls, tool calls, sub-agents),
// derived from its journal.
func (s *Server) sessionTrace(w http.ResponseWriter, r *http.Request) error {
	include, err := queryEnum(r, "include", "subagents")
	if err != nil {
		return err
	}
	tr, err := s.b.SessionTrace(r.Context(), r.PathValue("id"), include == "subagents")
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, tr)
}
