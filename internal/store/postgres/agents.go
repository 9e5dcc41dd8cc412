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
	_, err := s.exec(ctx, `INSERT INTO agents (name, version, spec, created_at, created_by) VALUES ($1, $2, $3, $4, $5)`,
		p.Name, p.Version, jsonArg(p.Spec), p.CreatedAt, jsonArg(p.CreatedBy))
	if err != nil {
		return nil, fmt.Errorf("insert agent %s version %d: %w", p.Name, p.Version, err)
	}
	return &store.AgentRow{Name: p.Name, Version: p.Version, Spec: p.Spec, CreatedAt: stored(p.CreatedAt), CreatedBy: p.CreatedBy}, nil
}

const agentColumns = `name, version, spec, created_at, created_by`

func scanAgent(sc rowScanner) (*store.AgentRow, error) {
	var (
		a    store.AgentRow
		spec []byte
		by   []byte
	)
	if err := sc.Scan(&a.Name, &a.Version, &spec, &a.CreatedAt, &by); err != nil {
		return nil, err
	}
	a.Spec, a.CreatedBy = fromJSON(spec), fromJSON(by)
	a.CreatedAt = a.CreatedAt.UTC()
	return &a, nil
}

// AgentGet returns one version of an agent, or its latest for version 0.
func (s *Store) AgentGet(ctx context.Context, name string, version int) (*store.AgentRow, error) {
	if err := checks.ID("name", name); err != nil {
		return nil, fmt.Errorf("get agent: %w", err)
	}
	if version < 0 {
		return nil, fmt.Errorf("get agent %s: version must not be negative, got %d", name, version)
	}
	q := `SELECT ` + agentColumns + ` FROM agents WHERE name = $1 AND version = $2`
	args := []any{name, version}
	if version == 0 {
		q = `SELECT ` + agentColumns + ` FROM agents WHERE name = $1 ORDER BY version DESC LIMIT 1`
		args = args[:1]
	}
	var a *store.AgentRow
	err := s.queryRow(ctx, func(row pgx.Row) (err error) {
		a, err = scanAgent(row)
		return err
	}, q, args...)
	if err != nil {
		return nil, fmt.Errorf("get agent %s version %d: %w", name, version, err)
	}
	return a, nil
}

// AgentList returns the latest version of each agent, by name.
func (s *Store) AgentList(ctx context.Context) ([]*store.AgentRow, error) {
	var out []*store.AgentRow
	err := s.query(ctx, func(rows pgx.Rows) error {
		a, err := scanAgent(rows)
		if err != nil {
			return err
		}
		out = append(out, a)
		return nil
	}, `SELECT DISTINCT ON (name) `+agentColumns+` FROM agents ORDER BY name, version DESC`)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return out, nil
}
