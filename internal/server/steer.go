package server

import (
	"net/http"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// steerSession is POST /v1/sessions/{id}/steer: 200 with the session, once
// the message is journaled (turn.steered); it reaches the model at the
// turn's next call. 409 when the session has no turn to steer.
func (s *Server) steerSession(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req lt.SteerRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	sess, err := s.b.Steer(r.Context(), r.PathValue("id"), &req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sess)
}
