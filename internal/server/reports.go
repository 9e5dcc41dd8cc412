package server

import (
	"net/http"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// taskReport is GET /v1/reports/tasks?since=&until=&agent=&project=&include_subagents=&bucket=&cursor=&limit=:
// per-task records (a page, newest first) with totals and a time series
// over the whole window.
func (s *Server) taskReport(w http.ResponseWriter, r *http.Request) error {
	var p lt.TaskReportParams
	var err error
	if p.Since, err = queryString(r, "since"); err != nil {
		return err
	}
	if p.Until, err = queryString(r, "until"); err != nil {
		return err
	}
	if p.Agent, err = queryString(r, "agent"); err != nil {
		return err
	}
	if p.Project, err = queryString(r, "project"); err != nil {
		return err
	}
	include, err := queryEnum(r, "include_subagents", "true", "false")
	if err != nil {
		return err
	}
	p.IncludeSubagents = include == "true"
	if p.Bucket, err = queryEnum(r, "bucket", lt.BucketHour, lt.BucketDay); err != nil {
		return err
	}
	if p.Cursor, err = queryString(r, "cursor"); err != nil {
		return err
	}
	if p.Limit, err = queryLimit(r); err != nil {
		return err
	}
	rep, err := s.b.TaskReport(r.Context(), p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, rep)
}
