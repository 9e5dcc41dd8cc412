package server

import (
	"math"
	"net/http"

	"github.com/longhaul-dev/longhaul/internal/apierror"
)

// listEvents is GET /v1/sessions/{id}/events?after=SEQ&limit=N: up to limit
// events with seq > after. next_cursor is the last seq of a full page (pass
// it back as ?after= or ?cursor=), null when the journal has no more now.
//
// ?include= is refused: a page of a tree's events would need a cursor per
// session, which only the stream (events/stream?include=subagents) keeps.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	if _, given := r.URL.Query()["include"]; given {
		return apierror.Invalid("include", "the events list serves one session's journal; "+
			"follow a session with its sub-agents on GET /v1/sessions/{id}/events/stream?include=subagents, "+
			"or list each session's events (its sub-agents are at GET /v1/sessions?parent_id=)")
	}
	after, err := queryInt(r, "after", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	if _, hasCursor := r.URL.Query()["cursor"]; hasCursor {
		if _, hasAfter := r.URL.Query()["after"]; hasAfter {
			return apierror.Invalid("cursor", "give either query parameter \"after\" or \"cursor\", not both")
		}
		if after, err = queryInt(r, "cursor", 0, 0, math.MaxInt64); err != nil {
			return err
		}
	}
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	page, err := s.b.ListEvents(r.Context(), r.PathValue("id"), after, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}
