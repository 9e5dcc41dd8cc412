package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// AgentInsert stores one version of an agent; store.ErrConflict if that
// version exists.
func (s *Store) AgentInsert(ctx context.Context, p *store.AgentInsertParams) (*store.AgentRow, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := checks.AgentInsert(p); err != nil {
		return nil, fmt.Errorf("insert agent: %w", err)
	}
	row := &store.AgentRow{
		Project:   p.Project,
		Name:      p.Name,
		Version:   p.Version,
		Spec:      p.Spec,
		CreatedAt: fromMicros(toMicros(p.CreatedAt)),
		CreatedBy: p.CreatedBy,
	}
	err := s.w.do(ctx, &request{run: func(w *writer) ([]store.Notification, error) {
		_, err := w.exec(`INSERT INTO agents (project, name, version, spec, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?)`,
			p.Project, p.Name, p.Version, jsonText(p.Spec), toMicros(p.CreatedAt), jsonText(p.CreatedBy))
		return nil, mapErr(err)
	}})
	if err != nil {
		return nil, fmt.Errorf("insert agent %s version %d of project %s: %w", p.Name, p.Version, p.Project, err)
	}
	return row, nil
}

const agentColumns = `project, name, version, spec, created_at, created_by`

func scanAgent(sc interface{ Scan(...any) error }) (*store.AgentRow, error) {
	var (
		a       store.AgentRow
		spec    sql.NullString
		created int64
		by      sql.NullString
	)
	if err := sc.Scan(&a.Project, &a.Name, &a.Version, &spec, &created, &by); err != nil {
		return nil, err
	}
	a.Spec, a.CreatedBy = fromJSONText(spec), fromJSONText(by)
	a.CreatedAt = fromMicros(created)
	return &a, nil
}

// AgentGet returns one version of an agent of project, or its latest for
// version 0.
func (s *Store) AgentGet(ctx context.Context, project, name string, version int) (*store.AgentRow, error) {
	if err := checks.ID("project", project); err != nil {
		return nil, fmt.Errorf("get agent: %w", err)
	}
	if err := checks.ID("name", name); err != nil {
		return nil, fmt.Errorf("get agent: %w", err)
	}
	if version < 0 {
		return nil, fmt.Errorf("get agent %s: version must not be negative, got %d", name, version)
	}
	var (
		row *sql.Row
		err error
	)
	if version == 0 {
		row, err = s.queryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE project = ? AND name = ? ORDER BY version DESC LIMIT 1`, project, name)
	} else {
		row, err = s.queryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE project = ? AND name = ? AND version = ?`, project, name, version)
	}
	if err != nil {
		return nil, fmt.Errorf("get agent %s version %d: %w", name, version, err)
	}
	a, err := scanAgent(row)
	if err != nil {
		return nil, fmt.Errorf("get agent %s version %d: %w", name, version, s.readErr(err))
	}
	return a, nil
}

// AgentVersions returns every version of the agent name of project, newest
// first.
func (s *Store) AgentVersions(ctx context.Context, project, name string) ([]*store.AgentRow, error) {
	if err := checks.ID("project", project); err != nil {
		return nil, fmt.Errorf("list agent versions: %w", err)
	}
	if err := checks.ID("name", name); err != nil {
		return nil, fmt.Errorf("list agent versions: %w", err)
	}
	var out []*store.AgentRow
	err := s.query(ctx, func(rows *sql.Rows) error {
		a, err := scanAgent(rows)
		if err != nil {
			return err
		}
		out = append(out, a)
		return nil
	}, `SELECT `+agentColumns+` FROM agents WHERE project = ? AND name = ? ORDER BY version DESC`, project, name)
	if err != nil {
		return nil, fmt.Errorf("list versions of agent %s: %w", name, err)
	}
	return out, nil
}

// AgentList returns the latest version of each agent of project ("": of
// every project), by project and name.
func (s *Store) AgentList(ctx context.Context, project string) ([]*store.AgentRow, error) {
	var out []*store.AgentRow
	err := s.query(ctx, func(rows *sql.Rows) error {
		a, err := scanAgent(rows)
		if err != nil {
			return err
		}
		out = append(out, a)
		return nil
	}, `SELECT `+agentColumns+` FROM agents a
WHERE version = (SELECT max(version) FROM agents b WHERE b.project = a.project AND b.name = a.name)
    AND (? = '' OR project = ?)
ORDER BY project, name`, project, project)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return out, nil
}
