package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
)

// readyTimeout bounds a readiness check, so a hung store makes /readyz fail
// rather than hang the prober.
const readyTimeout = 5 * time.Second

// healthz is GET /healthz: the process is up and serving.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is GET /readyz: 200 when the backend says storage is reachable and
// migrated; otherwise 503 whose message names what is wrong (for the
// operator: unlike a 500, the reason is shown). It also turns 503 after
// Shutdown, so load balancers stop sending traffic to a draining server.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if s.base.Err() != nil {
		return apierror.Unavailable("the server is shutting down")
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.b.Ready(ctx); err != nil {
		msg := err.Error()
		var ae *apierror.Error
		if errors.As(err, &ae) {
			msg = ae.Message
		}
		nr := apierror.Unavailable("not ready: %s", msg)
		nr.Cause = err
		return nr
	}
	body := map[string]any{"status": "ready"}
	if d, ok := s.b.(ReadyDetailer); ok {
		if details := d.ReadyDetails(); len(details) > 0 {
			body["details"] = details
		}
	}
	return writeJSON(w, http.StatusOK, body)
}

// ReadyDetailer is implemented by backends with operational facts worth
// showing in /readyz (e.g. the sandbox backend and its warning).
type ReadyDetailer interface {
	ReadyDetails() map[string]string
}
