package server

import (
	"math"
	"net/http"
	"strconv"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// listEvents is GET /v1/sessions/{id}/events?after=SEQ&limit=N: up to limit
// events with seq > after. next_cursor is the last seq of a full page (pass
// it back as ?after= or ?cursor=), null when the journal has no more now.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
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
	events, err := s.b.ListEvents(r.Context(), r.PathValue("id"), after, limit)
	if err != nil {
		return err
	}
	if events == nil {
		events = []lt.Event{}
	}
	page := lt.List[lt.Event]{Data: events}
	if len(events) == limit {
		next := strconv.FormatInt(events[len(events)-1].Seq, 10)
		page.NextCursor = &next
	}
	return writeJSON(w, http.StatusOK, page)
}
