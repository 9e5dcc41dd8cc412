package server

import (
	"net/http"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The outgoing webhooks' endpoints (API.md "Webhooks").

// createWebhookEndpoint is POST /v1/webhooks/endpoints: 201 with the
// endpoint and its secret, the only response that shows it.
func (s *Server) createWebhookEndpoint(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req lt.CreateWebhookEndpointRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	ep, err := s.b.CreateWebhookEndpoint(r.Context(), &req)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, ep)
}

// listWebhookEndpoints is GET /v1/webhooks/endpoints?project=: the
// endpoints of the caller's project (an admin's: of every project, or of
// ?project=), in one page (a server has few), without secrets.
func (s *Server) listWebhookEndpoints(w http.ResponseWriter, r *http.Request) error {
	project, err := queryString(r, "project")
	if err != nil {
		return err
	}
	eps, err := s.b.ListWebhookEndpoints(r.Context(), project)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, eps)
}

// deleteWebhookEndpoint is DELETE /v1/webhooks/endpoints/{id}: 204, or 404.
func (s *Server) deleteWebhookEndpoint(w http.ResponseWriter, r *http.Request) error {
	if err := s.b.DeleteWebhookEndpoint(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listWebhookDeliveries is GET /v1/webhooks/deliveries?limit=&cursor=&project=:
// the deliveries of the caller's project's sessions (an admin's: of every
// project, or of ?project=), newest first, each with its attempts.
func (s *Server) listWebhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	cursor, err := queryString(r, "cursor")
	if err != nil {
		return err
	}
	project, err := queryString(r, "project")
	if err != nil {
		return err
	}
	page, err := s.b.ListWebhookDeliveries(r.Context(), lt.ListWebhookDeliveriesParams{Cursor: cursor, Limit: limit, Project: project})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}
