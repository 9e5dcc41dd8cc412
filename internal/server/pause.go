package server

import (
	"bytes"
	"net/http"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// pauseSession is POST /v1/sessions/{id}/pause: 200 with the session,
// paused at once when no worker runs it, else "pause_requested" until its
// next safe point (the call in flight finishes).
func (s *Server) pauseSession(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req lt.PauseRequest
	if err := decodeOptional(body, &req); err != nil {
		return err
	}
	sess, err := s.b.Pause(r.Context(), r.PathValue("id"), &req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sess)
}

// resumeSession is POST /v1/sessions/{id}/resume: 200 with the session,
// back to what it was doing.
func (s *Server) resumeSession(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	// The body has no fields yet, but it is checked as one that may.
	var req lt.ResumeRequest
	if err := decodeOptional(body, &req); err != nil {
		return err
	}
	sess, err := s.b.Resume(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sess)
}

// decodeOptional decodes a body whose fields are all optional: an empty
// body means none, as `curl -X POST .../pause` would send.
func decodeOptional(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	return decodeJSON(data, v)
}
