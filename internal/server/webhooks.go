package server

import (
	"net/http"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The outgoing webhooks' endpoints (API.md "Webhooks").

// errNoWebhooks answers the webhooks' endpoints on a server whose backend
// does not send webhooks (a 501, which clients do not retry).
func errNoWebhooks() *apierror.Error {
	return &apierror.Error{Status: http.StatusNotImplemented, Code: "not_implemented",
		Message: "this server does not send webhooks"}
}

// createWebhookEndpoint is POST /v1/webhooks/endpoints: 201 with the
// endpoint and its secret, the only response that shows it.
func (s *Server) createWebhookEndpoint(w http.ResponseWriter, r *http.Request) error {
	if s.webhooks == nil {
		return errNoWebhooks()
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req lt.CreateWebhookEndpointRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	ep, err := s.webhooks.CreateWebhookEndpoint(r.Context(), &req)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusCreated, ep)
}

// listWebhookEndpoints is GET /v1/webhooks/endpoints: every endpoint, in
// one page (a server has few), without secrets.
func (s *Server) listWebhookEndpoints(w http.ResponseWriter, r *http.Request) error {
	if s.webhooks == nil {
		return errNoWebhooks()
	}
	eps, err := s.webhooks.ListWebhookEndpoints(r.Context())
	if err != nil {
		return err
	}
	return writeList(w, eps)
}

// deleteWebhookEndpoint is DELETE /v1/webhooks/endpoints/{id}: 204, or 404.
func (s *Server) deleteWebhookEndpoint(w http.ResponseWriter, r *http.Request) error {
	if s.webhooks == nil {
		return errNoWebhooks()
	}
	if err := s.webhooks.DeleteWebhookEndpoint(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listWebhookDeliveries is GET /v1/webhooks/deliveries?limit=&cursor=:
// deliveries newest first, each with its attempts.
func (s *Server) listWebhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	if s.webhooks == nil {
		return errNoWebhooks()
	}
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	cursor, err := queryString(r, "cursor")
	if err != nil {
		return err
	}
	page, err := s.webhooks.ListWebhookDeliveries(r.Context(), cursor, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}
