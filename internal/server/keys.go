package server

import (
	"net/http"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The API keys' endpoints (admin only), and who the caller is.

// me is GET /v1/me: the caller's identity and the methods its role may
// call (any role). It is not cached: the same URL answers another key
// differently.
func (s *Server) me(w http.ResponseWriter, r *http.Request) error {
	me, err := s.b.Me(r.Context())
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, me)
}

// version is GET /v1/version: the build of the node that answers (any
// role but a runner).
func (s *Server) version(w http.ResponseWriter, r *http.Request) error {
	v, err := s.b.Version(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

// createKey is POST /v1/keys: 201 with the key's metadata and its token,
// the only response that ever shows it. It takes no Idempotency-Key: a
// replay would have to keep the token to answer with it, and the token is
// stored nowhere but in its holder's hands (a retried create makes a
// second key; the first one can be revoked).
func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req lt.CreateKeyRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	key, err := s.b.CreateKey(r.Context(), &req)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, key)
}

// listKeys is GET /v1/keys: every key's metadata, revoked ones included,
// oldest first, in one page (a server holds few keys), never a token.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.b.ListKeys(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, keys)
}

// revokeKey is DELETE /v1/keys/{id}: 204 (again 204 for a revoked key), or
// 404.
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	if err := s.b.RevokeKey(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
