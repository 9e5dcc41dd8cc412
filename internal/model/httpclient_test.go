package model_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
)

// TestHTTPClientFollowsNoRedirect: a bound host answering with a redirect
// never gets the call (and its key header) sent on to the host it names.
func TestHTTPClientFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	defer other.Close()
	bound := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/messages", http.StatusTemporaryRedirect)
	}))
	defer bound.Close()

	req, err := http.NewRequest(http.MethodPost, bound.URL+"/v1/messages", nil)
	require.NoError(t, err)
	req.Header.Set("x-api-key", "sk-canary")
	_, err = model.HTTPClient().Do(req)
	require.True(t, errors.Is(err, model.ErrRedirect), "%v", err)
	require.Zero(t, elsewhere.Load(), "the redirect's target got the call")
	me := model.TransportError(err, func(what, detail string) string { return what + ": " + detail })
	require.False(t, me.Retryable(), "a redirect is the endpoint's configuration: trying again gets the same answer")
}
