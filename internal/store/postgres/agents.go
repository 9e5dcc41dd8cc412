package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

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
	_, err := s.exec(ctx, `INSERT INTO agents (project, name, version, spec, created_at, created_by) VALUES ($1, $2, $3, $4, $5, $6)`,
		p.Project, p.Name, p.Version, jsonArg(p.Spec), p.CreatedAt, jsonArg(p.CreatedBy))
	if err != nil {
		return nil, fmt.Errorf("insert agent %s version %d of project %s: %w", p.Name, p.Version, p.Project, err)
	}
	return &store.AgentRow{Project: p.Project, Name: p.Name, Version: p.Version, Spec: p.Spec, CreatedAt: stored(p.CreatedAt), CreatedBy: p.CreatedBy}, nil
}

const agentColumns = `project, name, version, spec, created_at, created_by`

func scanAgent(sc rowScanner) (*store.AgentRow, error) {
	var (
		a    store.AgentRow
		spec []byte
		by   []byte
	)
	if err := sc.Scan(&a.Project, &a.Name, &a.Version, &spec, &a.CreatedAt, &by); err != nil {
		return nil, err
	}
	a.Spec, a.CreatedBy = fromJSON(spec), fromJSON(by)
	a.CreatedAt = a.CreatedAt.UTC()
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
	q := `SELECT ` + agentColumns + ` FROM agents WHERE project = $1 AND name = $2 AND version = $3`
	args := []any{project, name, version}
	if version == 0 {
		q = `SELECT ` + agentColumns + ` FROM agents WHERE project = $1 AND name = $2 ORDER BY version DESC LIMIT 1`
		args = args[:2]
	}
	var a *store.AgentRow
	err := s.queryRow(ctx, func(row pgx.Row) (err error) {
		a, err = scanAgent(row)
		return err
	}, q, args...)
	if err != nil {
		return nil, fmt.Errorf("get agent %s version %d of project %s: %w", name, version, project, err)
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
	err := s.query(ctx, func(rows pgx.Rows) error {
		a, err := scanAgent(rows)
		if err != nil {
			return err
		}
		out = append(out, a)
		return nil
	}, `SELECT `+agentColumns+` FROM agents WHERE project = $1 AND name = $2 ORDER BY version DESC`, project, name)
	if err != nil {
		return nil, fmt.Errorf("list versions of agent %s of project %s: %w", name, project, err)
	}
	return out, nil
}

// AgentList returns the latest version of each agent of project ("": of
// every project), by project and name.
func (s *Store) AgentList(ctx context.Context, project string) ([]*store.AgentRow, error) {
	var out []*store.AgentRow
	err := s.query(ctx, func(rows pgx.Rows) error {
		a, err := scanAgent(rows)
		if err != nil {
			return err
		}
		out = append(out, a)
		return nil
	}, `SELECT DISTINCT ON (project, name) `+agentColumns+` FROM agents
WHERE $1 = '' OR project = $1 ORDER BY project, name, version DESC`, project)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return out, nil
}
