package server

import (
	"math"
	"net/http"
)

// putAgent is POST /v1/agents: 201 with the new agent version (the first, or
// the next of an existing name).
func (s *Server) putAgent(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := decodeAgent(body)
	if err != nil {
		return err
	}
	agent, err := s.b.PutAgent(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, agent)
}

// listAgents is GET /v1/agents?project=: the latest version of each agent
// of the caller's project (an admin's: of every project, or of ?project=).
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	project, err := queryString(r, "project")
	if err != nil {
		return err
	}
	agents, err := s.b.ListAgents(r.Context(), project)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, agents)
}

// getAgent is GET /v1/agents/{name}?version=N&project=: that version, or the
// latest without ?version=, of the agent of the caller's project (an
// admin's: of ?project=, else its key's project, else the default one).
func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	version, err := queryInt(r, "version", 0, 1, math.MaxInt32)
	if err != nil {
		return err
	}
	project, err := queryString(r, "project")
	if err != nil {
		return err
	}
	agent, err := s.b.GetAgent(r.Context(), project, r.PathValue("name"), int(version))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, agent)
}

// listAgentVersions is GET /v1/agents/{name}/versions?project=: every
// version of the agent, the latest first (the project as getAgent's).
func (s *Server) listAgentVersions(w http.ResponseWriter, r *http.Request) error {
	project, err := queryString(r, "project")
	if err != nil {
		return err
	}
	versions, err := s.b.ListAgentVersions(r.Context(), project, r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, versions)
}
