package client

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestAPIErrorFromResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        APIError
		wantString  string
	}{
		{
			name:   "API error body with field",
			status: http.StatusBadRequest, contentType: "application/json",
			body:       `{"error":{"code":"invalid_request","message":"must be positive","field":"budget.max_cost_usd"}}`,
			want:       APIError{Status: 400, Code: "invalid_request", Message: "must be positive", Field: "budget.max_cost_usd"},
			wantString: "invalid_request (400): must be positive (field budget.max_cost_usd)",
		},
		{
			name:   "API error body without field",
			status: http.StatusConflict, contentType: "application/json",
			body:       `{"error":{"code":"conflict","message":"action act_1 was already rejected"}}`,
			want:       APIError{Status: 409, Code: "conflict", Message: "action act_1 was already rejected"},
			wantString: "conflict (409): action act_1 was already rejected",
		},
		{
			name:   "HTML from a proxy",
			status: http.StatusBadGateway, contentType: "text/html",
			body:       "<html>\n  <body>\n    <h1>502 Bad Gateway</h1>\n  </body>\n</html>\n",
			want:       APIError{Status: 502, Code: "internal", Message: "<html> <body> <h1>502 Bad Gateway</h1> </body> </html>"},
			wantString: "internal (502): <html> <body> <h1>502 Bad Gateway</h1> </body> </html>",
		},
		{
			name:   "plain text 404",
			status: http.StatusNotFound, contentType: "text/plain",
			body:       "404 page not found\n",
			want:       APIError{Status: 404, Code: "not_found", Message: "404 page not found"},
			wantString: "not_found (404): 404 page not found",
		},
		{
			name:       "empty body",
			status:     http.StatusTeapot,
			want:       APIError{Status: 418, Code: "http_418", Message: "I'm a teapot"},
			wantString: "http_418 (418): I'm a teapot",
		},
		{
			name:   "JSON that is not an API error",
			status: http.StatusUnauthorized, contentType: "application/json",
			body:       `{"message":"nope"}`,
			want:       APIError{Status: 401, Code: "unauthorized", Message: `{"message":"nope"}`},
			wantString: `unauthorized (401): {"message":"nope"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.contentType != "" {
					w.Header().Set("Content-Type", tt.contentType)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			c, _ := newTestClient(t, srv.URL, &Config{MaxRetries: -1})
			_, err := c.GetSession(t.Context(), "ses_1")
			var ae *APIError
			require.ErrorAs(t, err, &ae)
			got := *ae
			got.header = nil
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantString, ae.Error())
			require.Equal(t, "get session ses_1: "+tt.wantString, err.Error())
		})
	}
}

func TestAPIErrorLongBodyIsCut(t *testing.T) {
	t.Parallel()
	body := []byte(strings.Repeat("é", 400)) // 800 bytes of two-byte runes
	e := newAPIError(http.StatusInternalServerError, nil, body)
	require.LessOrEqual(t, len(e.Message), maxErrorMessage+len("…"))
	require.True(t, strings.HasSuffix(e.Message, "…"))
	require.True(t, strings.HasPrefix(e.Message, "éé"))
	require.NotContains(t, e.Message, "\uFFFD")
	for _, r := range e.Message {
		require.NotEqual(t, '\uFFFD', r, "cut inside a rune")
	}
}

func TestIsNotFoundAndIsConflict(t *testing.T) {
	t.Parallel()
	notFound := fmt.Errorf("get session x: %w", newAPIError(404, nil, []byte(`{"error":{"code":"not_found","message":"no"}}`)))
	conflict := fmt.Errorf("decide action: %w", newAPIError(409, nil, nil))
	require.True(t, IsNotFound(notFound))
	require.False(t, IsConflict(notFound))
	require.True(t, IsConflict(conflict))
	require.False(t, IsNotFound(conflict))
	require.False(t, IsNotFound(errors.New("404")))
	require.False(t, IsNotFound(nil))
	require.Equal(t, lt.CodeConflict, conflict.(interface{ Unwrap() error }).Unwrap().(*APIError).Code)
}
