package server

import "net/http"

// metrics is GET /metrics: Config.Metrics, behind the API's access rule
// unless Config.MetricsPublic says otherwise (the rule is applied here:
// ServeHTTP applies it to /v1 only).
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	if !s.cfg.MetricsPublic {
		if err := s.authorize(w, r); err != nil {
			return err
		}
	}
	s.cfg.Metrics.ServeHTTP(w, r)
	return nil
}
