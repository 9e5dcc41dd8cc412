package server

import (
	"net/http"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The vault's endpoints. A request body carries a secret's value, so
// nothing here echoes a body: decoding errors name a field or a byte
// offset, and the backend's errors never contain the value.

// putSecret is PUT /v1/secrets/{name}: 201 with the metadata of a new
// secret, 200 with that of a replaced one. PUT is idempotent by nature, so
// it needs no Idempotency-Key.
func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req lt.PutSecretRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	secret, created, err := s.b.PutSecret(r.Context(), r.PathValue("name"), &req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return writeJSON(w, status, secret)
}

// listSecrets is GET /v1/secrets?project=: every secret's metadata (of
// every project, or of ?project=), by project and name, in one page (a
// server holds few secrets).
func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	project, err := queryString(r, "project")
	if err != nil {
		return err
	}
	secrets, err := s.b.ListSecrets(r.Context(), project)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, secrets)
}

// deleteSecret is DELETE /v1/secrets/{name}?project=: 204, or 404. The
// secret is of the project ?project= names, else of the admin key's own
// project, else of the default one.
func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	project, err := queryString(r, "project")
	if err != nil {
		return err
	}
	if err := s.b.DeleteSecret(r.Context(), project, r.PathValue("name")); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}
