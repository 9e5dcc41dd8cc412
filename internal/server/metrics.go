package server

import "net/http"

// metrics is GET /metrics: Config.Metrics, behind the API's access rule
// and the Host rule, unless Config.MetricsPublic says otherwise (they are
// applied here: ServeHTTP applies them to /v1 only).
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	if !s.cfg.MetricsPublic {
		if _, err := s.guard(w, r); err != nil {
			return err
		}
	}
	s.cfg.Metrics.ServeHTTP(w, r)
	return nil
}
