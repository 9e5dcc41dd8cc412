package server_test

import (
	"net/http"
	"testing"
)

// A backend without webhooks answers their endpoints with 501.
func TestWebhooksWithoutBackendAre501(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	requireError(t, h.post("/v1/webhooks/endpoints", `{"url":"https://hooks.example.com/"}`),
		http.StatusNotImplemented, "not_implemented", "")
	requireError(t, h.get("/v1/webhooks/endpoints"), http.StatusNotImplemented, "not_implemented", "")
	requireError(t, h.do(http.MethodDelete, "/v1/webhooks/endpoints/whe_x", nil, nil),
		http.StatusNotImplemented, "not_implemented", "")
	requireError(t, h.get("/v1/webhooks/deliveries"), http.StatusNotImplemented, "not_implemented", "")
}
