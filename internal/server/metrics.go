package server

import (
	"net/http"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// metrics is GET /metrics: Config.Metrics, behind the API's access rule
// and the Host rule, unless Config.MetricsPublic says otherwise (they are
// applied here: ServeHTTP applies them to /v1 only). Behind the rule it is
// an admin's: the metrics count every project's sessions and actions, so a
// key confined to one project may not read them (a server without keys
// serves its loopback callers as admins, as before).
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	if !s.cfg.MetricsPublic {
		c, err := s.guard(w, r)
		if err != nil {
			return err
		}
		if c.Role != lt.RoleAdmin {
			return apierror.Forbidden("the %s role may not read /metrics (it needs the admin role: the metrics span every project)", app.RoleOrNone(c.Role))
		}
	}
	s.cfg.Metrics.ServeHTTP(w, r)
	return nil
}
