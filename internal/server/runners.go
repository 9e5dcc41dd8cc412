package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// runnerConnectPattern is the route a runner (`longhaul runner`) opens its
// connection on: a WebSocket upgrade with a runner key.
const runnerConnectPattern = "GET /v1/runners/connect"

// RunnerHub serves runner connections (internal/runner/hub's Hub).
type RunnerHub interface {
	Serve(ctx context.Context, ws *websocket.Conn, key hub.Key, check hub.KeyCheck)
}

// runnerRoles are the roles that may open a runner connection: the runner
// role alone. An admin's key is refused too: a key that can do everything
// does not belong on a machine the server trusts less than itself.
var runnerRoles = []lt.Role{lt.RoleRunner}

// runnerKeyElsewhere answers a runner key on any route but its
// connection's.
func runnerKeyElsewhere() error {
	return forbidden("the runner role may use only " + runnerConnectPattern + ": a runner key opens its connection and nothing else")
}

// listRunners is GET /v1/runners[?project=].
func (s *Server) listRunners(w http.ResponseWriter, r *http.Request) error {
	project, err := queryString(r, "project")
	if err != nil {
		return err
	}
	l, err := s.b.ListRunners(r.Context(), project)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, l)
}

// connectRunner is GET /v1/runners/connect: a runner key's WebSocket,
// handed to the hub for as long as it lasts. The key was authenticated
// like any request's (ServeHTTP); the hub checks it again every interval
// with the same token, so a revocation closes the connection.
func (s *Server) connectRunner(w http.ResponseWriter, r *http.Request) error {
	c, _ := app.CallerFrom(r.Context())
	if !isWebSocketUpgrade(r) {
		return &apierror.Error{Status: http.StatusUpgradeRequired, Code: lt.CodeInvalidRequest,
			Message: "this route takes a WebSocket upgrade: it is where `longhaul runner` connects"}
	}
	if s.cfg.Runners == nil {
		return apierror.Unavailable("this server takes no runner connections")
	}
	if c.KeyID == "" || s.cfg.Keys == nil {
		// Only a stored key has the runner role; the check below needs one.
		return forbidden("a runner connects with a stored API key of the runner role")
	}
	token, _ := bearerToken(r.Header.Get("Authorization"))
	check := func(ctx context.Context) (bool, error) {
		again, err := s.cfg.Keys.Authenticate(ctx, token)
		if errors.Is(err, app.ErrInvalidKey) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return again.KeyID == c.KeyID && again.Role == lt.RoleRunner, nil
	}
	// The connection outlives the request: neither http.Server's read
	// and write timeouts nor the request's context may end it (the hub's
	// heartbeats bound a dead one instead).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept answered the request
	}
	s.cfg.Runners.Serve(s.base, ws, hub.Key{ID: c.KeyID, Project: c.Project}, check)
	return nil
}

// isWebSocketUpgrade reports whether r asks for a WebSocket.
func isWebSocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

// headerHasToken reports whether a comma-separated header of h holds
// token (case-insensitively).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
