package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/longhaul-dev/longhaul/internal/server"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/webhook"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
	"github.com/stretchr/testify/require"
)

// webhookService serves the webhooks' API as the application service
// does (internal/app's adaptation of webhook.API). The embedded Backend
// is nil: only the webhooks' routes are exercised.
type webhookService struct {
	server.Backend
	api *webhook.API
}

func (s webhookService) CreateWebhookEndpoint(ctx context.Context, req *lt.CreateWebhookEndpointRequest) (*lt.WebhookEndpoint, error) {
	return s.api.CreateWebhookEndpoint(ctx, req)
}

func (s webhookService) ListWebhookEndpoints(ctx context.Context, project string) (*lt.List[lt.WebhookEndpoint], error) {
	eps, err := s.api.ListWebhookEndpoints(ctx, project)
	if err != nil {
		return nil, err
	}
	return &lt.List[lt.WebhookEndpoint]{Data: append([]lt.WebhookEndpoint{}, eps...)}, nil
}

func (s webhookService) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	return s.api.DeleteWebhookEndpoint(ctx, "", id)
}

func (s webhookService) ListWebhookDeliveries(ctx context.Context, p lt.ListWebhookDeliveriesParams) (*lt.List[lt.WebhookDelivery], error) {
	return s.api.ListWebhookDeliveries(ctx, p.Project, p.Cursor, p.Limit)
}

// apiServer serves d's API through the real HTTP server.
func apiServer(t *testing.T, e *webhook.Env, d *webhook.Dispatcher) *httptest.Server {
	srv := server.New(webhookService{api: webhook.NewAPI(d)}, e.Store(), nil)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

func call(t *testing.T, method, url, body string) (int, []byte) {
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func requireField(t *testing.T, body []byte, field string) {
	t.Helper()
	var er lt.ErrorResponse
	require.NoError(t, json.Unmarshal(body, &er), string(body))
	require.Equal(t, lt.CodeInvalidRequest, er.Error.Code)
	require.Equal(t, field, er.Error.Field, er.Error.Message)
}

func TestEndpointsAPI(t *testing.T) {
	e := webhook.NewEnv(t)
	d, err := webhook.New(e.Store(), e.Config())
	require.NoError(t, err)
	ts := apiServer(t, e, d)

	code, body := call(t, "POST", ts.URL+"/v1/webhooks/endpoints",
		`{"url": "https://hooks.example.com/in", "events": ["session.requires_action", "session.idle"]}`)
	require.Equal(t, http.StatusCreated, code, string(body))
	var created lt.WebhookEndpoint
	require.NoError(t, json.Unmarshal(body, &created))
	require.True(t, strings.HasPrefix(created.ID, "whe_"))
	require.True(t, strings.HasPrefix(created.Secret, "whsec_"))
	require.Equal(t, "https://hooks.example.com/in", created.URL)
	require.Equal(t, []string{"session.requires_action", "session.idle"}, created.Events)
	require.Equal(t, webhook.T0, created.CreatedAt)

	code, body = call(t, "GET", ts.URL+"/v1/webhooks/endpoints", "")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, string(body), created.Secret, "the secret is shown only once")
	var list lt.List[lt.WebhookEndpoint]
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Data, 1)
	require.Equal(t, created.ID, list.Data[0].ID)
	require.Empty(t, list.Data[0].Secret)

	for body, field := range map[string]string{
		`{"url": "ftp://x.example.com/"}`:                             "url",
		`{"url": "/relative"}`:                                        "url",
		`{"events": ["session.idle"]}`:                                "url",
		`{"url": "https://x.example.com/", "events": ["bogus"]}`:      "events[0]",
		`{"url": "https://x.example.com/", "events": "session.idle"}`: "events",
		`{"url": "https://x.example.com/", "secret": "whsec_x"}`:      "secret",
		`{"url": "https://user:pw@x.example.com/"}`:                   "url",
	} {
		code, resp := call(t, "POST", ts.URL+"/v1/webhooks/endpoints", body)
		require.Equal(t, http.StatusBadRequest, code, body)
		requireField(t, resp, field)
	}

	// A target every delivery would be refused is refused at creation,
	// with the rule; nothing is created.
	for url, rule := range map[string]string{
		"http://hooks.example.com:8080/in": "port 8080 is not allowed (allowed: 80, 443)",
		"https://127.0.0.1/in":             "127.0.0.1 is a loopback address",
		"https://[::1]:443/in":             "::1 is a loopback address",
		"http://10.1.2.3/in":               "10.1.2.3 is a private address",
		"http://169.254.169.254/latest":    "169.254.169.254 is a",
		"https://bad_host!.example/in":     "invalid host name",
		"https://hooks.example.com:99999/": "invalid port",
	} {
		code, resp := call(t, "POST", ts.URL+"/v1/webhooks/endpoints", `{"url": "`+url+`"}`)
		require.Equal(t, http.StatusBadRequest, code, url)
		requireField(t, resp, "url")
		require.Contains(t, string(resp), rule, url)
	}
	code, body = call(t, "GET", ts.URL+"/v1/webhooks/endpoints", "")
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Data, 1, "no refused endpoint was created")

	// What the operator allows is accepted: a listed private address and
	// an allowed port.
	allowed := e.Config()
	allowed.AllowPrivate, allowed.Ports = []string{"127.0.0.1"}, []int{8080}
	d2, err := webhook.New(e.Store(), allowed)
	require.NoError(t, err)
	ts2 := apiServer(t, e, d2)
	code, body = call(t, "POST", ts2.URL+"/v1/webhooks/endpoints", `{"url": "http://127.0.0.1:8080/in"}`)
	require.Equal(t, http.StatusCreated, code, string(body))

	code, _ = call(t, "DELETE", ts.URL+"/v1/webhooks/endpoints/"+created.ID, "")
	require.Equal(t, http.StatusNoContent, code)
	code, _ = call(t, "DELETE", ts.URL+"/v1/webhooks/endpoints/"+created.ID, "")
	require.Equal(t, http.StatusNotFound, code)
}

func TestDeliveriesAPI(t *testing.T) {
	e := webhook.NewEnv(t)
	url, cfg := webhook.NewReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	e.CreateSession("s1", url)
	d, _ := e.Start(cfg)
	ts := apiServer(t, e, d)
	e.Status("s1", lt.SessionRequiresAction)
	e.Status("s1", lt.SessionIdle)
	webhook.Eventually(t, func() bool {
		rows := e.Deliveries()
		return len(rows) == 2 && rows[0].Attempts > 0 && rows[1].Attempts > 0
	}, "both attempted")
	e.Advance(webhook.DefaultSchedule[1])
	webhook.Eventually(t, func() bool {
		rows := e.Deliveries()
		return rows[0].Status == store.WebhookDelivered && rows[1].Status == store.WebhookDelivered
	}, "both delivered")

	var all []lt.WebhookDelivery
	url = ts.URL + "/v1/webhooks/deliveries?limit=1"
	for range 3 {
		code, body := call(t, "GET", url, "")
		require.Equal(t, http.StatusOK, code, string(body))
		var page lt.List[lt.WebhookDelivery]
		require.NoError(t, json.NewDecoder(bytes.NewReader(body)).Decode(&page))
		all = append(all, page.Data...)
		if page.NextCursor == nil {
			break
		}
		url = ts.URL + "/v1/webhooks/deliveries?limit=1&cursor=" + *page.NextCursor
	}
	require.Len(t, all, 2)
	var attempts []int
	for _, dl := range all {
		require.Equal(t, "s1", dl.SessionID)
		require.Equal(t, store.WebhookDelivered, dl.Status)
		var codes []int
		for _, a := range dl.Attempts {
			codes = append(codes, a.StatusCode)
		}
		attempts = append(attempts, len(codes))
		require.Equal(t, 200, codes[len(codes)-1])
	}
	require.ElementsMatch(t, []int{1, 2}, attempts, "the first request got a 502 and was retried")

	code, body := call(t, "GET", ts.URL+"/v1/webhooks/deliveries?cursor=abc", "")
	require.Equal(t, http.StatusBadRequest, code)
	requireField(t, body, "cursor")
	code, body = call(t, "GET", ts.URL+"/v1/webhooks/deliveries?limit=0", "")
	require.Equal(t, http.StatusBadRequest, code)
	requireField(t, body, "limit")
}
