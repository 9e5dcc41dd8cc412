package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// dbosSystem runs a session as a DBOS workflow: every model call and every
// tool call is a step, whose output DBOS records before the next one runs.
type dbosSystem struct {
	ctx   dbos.Context
	db    *sql.DB // the SQLite handle given to DBOS; nil on PostgreSQL
	clock *stepClock
}

// sessionInput is the workflow's input: what an agent session is given.
type sessionInput struct {
	Session string `json:"session"`
	Steps   int    `json:"steps"`
}

func openDBOS(ctx context.Context, st *store, clock *stepClock) (_ *dbosSystem, err error) {
	s := &dbosSystem{clock: clock}
	cfg := dbos.Config{
		AppName: "longhaul-peers",
		Logger:  slog.New(slog.DiscardHandler),
		// Nothing in the run needs the dynamic scheduler: poll it rarely.
		SchedulerPollingInterval: time.Hour,
	}
	if st.sqlitePath != "" {
		// 8 connections, as DBOS's own SQLite pool has.
		if s.db, err = openSQLite(ctx, st.sqlitePath, 8); err != nil {
			return nil, err
		}
		cfg.SQLiteSystemDB = s.db
	} else {
		cfg.DatabaseURL, cfg.DatabaseSchema = st.pgURL, st.schema
	}
	defer func() {
		if err != nil && s.db != nil {
			s.db.Close()
		}
	}()
	if s.ctx, err = dbos.NewContext(ctx, cfg); err != nil {
		return nil, fmt.Errorf("DBOS: %w", err)
	}
	dbos.RegisterWorkflow(s.ctx, s.session, dbos.WithWorkflowName("session"))
	if err := dbos.Launch(s.ctx); err != nil {
		dbos.Shutdown(s.ctx, 10*time.Second)
		return nil, fmt.Errorf("DBOS launch: %w", err)
	}
	return s, nil
}

// session is the workflow: the agent loop of internal/bench's scripted
// session, a model call then a tool call per step, the last step's model
// call answering with text.
func (s *dbosSystem) session(ctx dbos.Context, in sessionInput) (string, error) {
	answer := ""
	for i := range in.Steps {
		reply, err := dbos.RunAsStep(ctx, func(context.Context) (string, error) {
			s.clock.mark(in.Session)
			return modelReply(i, in.Steps), nil
		}, dbos.WithStepName("model"))
		if err != nil {
			return "", err
		}
		if i == in.Steps-1 {
			answer = reply
			break
		}
		if _, err := dbos.RunAsStep(ctx, func(context.Context) (string, error) {
			return "ok", nil // the no-op read tool of internal/bench
		}, dbos.WithStepName("tool")); err != nil {
			return "", err
		}
	}
	return answer, nil
}

func (s *dbosSystem) runSession(_ context.Context, id string, steps int) error {
	h, err := dbos.RunWorkflow(s.ctx, s.session, sessionInput{Session: id, Steps: steps}, dbos.WithWorkflowID(id))
	if err != nil {
		return err
	}
	_, err = h.GetResult()
	return err
}

func (s *dbosSystem) close() error {
	err := dbos.Shutdown(s.ctx, 30*time.Second)
	if s.db != nil {
		s.db.Close()
	}
	return err
}

// modelReply is what the scripted model of internal/bench answers at step i
// of n: a tool call with distinct arguments, then the final text. Its size
// is what the step journals.
func modelReply(i, n int) string {
	if i == n-1 {
		return `{"text":"done","usage":{"input_tokens":100,"output_tokens":10}}`
	}
	return fmt.Sprintf(`{"tool_calls":[{"name":"noop","arguments":{"i":%d}}],"usage":{"input_tokens":100,"output_tokens":10}}`, i)
}
