package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// River has no workflow with memoised steps; its closest equivalent is a
// job per session whose resumable steps are each checkpointed in a
// transaction of their own (ResumableSetStepCursorTx), with the step's
// output as the checkpoint's cursor: a step is journaled before the next
// one runs, and a retried job skips the steps already done. The last step
// also completes the job in its transaction (JobCompleteTx), as Longhaul
// ends a turn in the append of its last step: River's own completer would
// otherwise record a job's end up to 250 ms later, in batches.

type sessionArgs struct {
	Session string `json:"session"`
	Steps   int    `json:"steps"`
}

func (sessionArgs) Kind() string { return "session" }

// sessionWorker runs a session's steps. begin opens a transaction of the
// driver's kind, setStep checkpoints the current step and its output in it,
// complete marks the job completed in it; ended is told of a session whose
// end is committed.
type sessionWorker[TTx any] struct {
	river.WorkerDefaults[sessionArgs]
	begin    func(context.Context) (TTx, func(context.Context) error, func(context.Context) error, error)
	setStep  func(context.Context, TTx, *river.Job[sessionArgs], string) error
	complete func(context.Context, TTx, *river.Job[sessionArgs]) error
	ended    func(session string)
	clock    *stepClock
}

func (w *sessionWorker[TTx]) Work(ctx context.Context, job *river.Job[sessionArgs]) error {
	journal := func(ctx context.Context, output string, last bool) error {
		tx, commit, rollback, err := w.begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = rollback(context.WithoutCancel(ctx)) }()
		if err := w.setStep(ctx, tx, job, output); err != nil {
			return err
		}
		if last {
			if err := w.complete(ctx, tx, job); err != nil {
				return err
			}
		}
		if err := commit(ctx); err != nil {
			return err
		}
		if last {
			w.ended(job.Args.Session)
		}
		return nil
	}
	n := job.Args.Steps
	for i := range n {
		river.ResumableStepCursor(ctx, fmt.Sprintf("model-%d", i), nil, func(ctx context.Context, _ string) error {
			w.clock.mark(job.Args.Session)
			return journal(ctx, modelReply(i, n), i == n-1)
		})
		if i == n-1 {
			break
		}
		river.ResumableStepCursor(ctx, fmt.Sprintf("tool-%d", i), nil, func(ctx context.Context, _ string) error {
			return journal(ctx, "ok", false) // the no-op read tool of internal/bench
		})
	}
	return nil
}

// riverSystem runs sessions as River jobs and waits for each one's end:
// its last step's commit, or a failure River reports.
type riverSystem[TTx any] struct {
	client  *river.Client[TTx]
	cleanup func()

	mu      sync.Mutex
	waiters map[string]chan error
	stopSub func()
	done    chan struct{}
}

func openRiver(ctx context.Context, st *store, clock *stepClock) (system, error) {
	if st.sqlitePath != "" {
		// One connection, as River's SQLite driver asks: SQLite takes one
		// writer at a time and River writes from several goroutines.
		db, err := openSQLite(ctx, st.sqlitePath, 1)
		if err != nil {
			return nil, err
		}
		driver := riversqlite.New(db)
		w := &sessionWorker[*sql.Tx]{
			clock: clock,
			begin: func(ctx context.Context) (*sql.Tx, func(context.Context) error, func(context.Context) error, error) {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return nil, nil, nil, err
				}
				return tx, func(context.Context) error { return tx.Commit() }, func(context.Context) error { return tx.Rollback() }, nil
			},
			setStep: func(ctx context.Context, tx *sql.Tx, job *river.Job[sessionArgs], output string) error {
				_, err := river.ResumableSetStepCursorTx[*riversqlite.Driver](ctx, tx, job, output)
				return err
			},
			complete: func(ctx context.Context, tx *sql.Tx, job *river.Job[sessionArgs]) error {
				_, err := river.JobCompleteTx[*riversqlite.Driver](ctx, tx, job)
				return err
			},
		}
		// River on SQLite learns of an insert from a table it polls every
		// 50 ms, so it starts a job on its fetch poll: 5 ms was the
		// shortest that did not slow the 64-session run on the 2-core
		// machine (1 ms did).
		s, err := startRiver(ctx, driver, "", 5*time.Millisecond, w, func() { db.Close() })
		if err != nil {
			db.Close()
			return nil, err
		}
		return s, nil
	}
	pool, err := pgxpool.New(ctx, st.pgURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	w := &sessionWorker[pgx.Tx]{
		clock: clock,
		begin: func(ctx context.Context) (pgx.Tx, func(context.Context) error, func(context.Context) error, error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return nil, nil, nil, err
			}
			return tx, tx.Commit, tx.Rollback, nil
		},
		setStep: func(ctx context.Context, tx pgx.Tx, job *river.Job[sessionArgs], output string) error {
			_, err := river.ResumableSetStepCursorTx[*riverpgxv5.Driver](ctx, tx, job, output)
			return err
		},
		complete: func(ctx context.Context, tx pgx.Tx, job *river.Job[sessionArgs]) error {
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		},
	}
	// On PostgreSQL an insert wakes River through LISTEN/NOTIFY; the poll
	// is a fallback, as often as Longhaul's engine polls.
	s, err := startRiver(ctx, riverpgxv5.New(pool), st.schema, 50*time.Millisecond, w, pool.Close)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func startRiver[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], schema string, poll time.Duration, w *sessionWorker[TTx], cleanup func()) (*riverSystem[TTx], error) {
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("River migrations: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(driver, &river.Config{
		Logger: slog.New(slog.DiscardHandler),
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}},
		Schema: schema,
		// River waits at least FetchCooldown between two fetches (100 ms by
		// default), which would bound a serial run at 10 sessions/s: take
		// the minimum, so a session starts as soon as it is inserted, as a
		// Longhaul session does. Polling as often as Longhaul's engine does.
		FetchCooldown:     river.FetchCooldownMin,
		FetchPollInterval: 1 * time.Millisecond,
		Workers:           workers,
	})
	if err != nil {
		return nil, err
	}
	s := &riverSystem[TTx]{client: client, cleanup: cleanup, waiters: map[string]chan error{}, done: make(chan struct{})}
	w.ended = func(session string) { s.end(session, nil) }
	events, stop := client.Subscribe(river.EventKindJobFailed, river.EventKindJobCancelled)
	s.stopSub = stop
	go s.dispatch(events)
	if err := client.Start(ctx); err != nil {
		stop()
		<-s.done
		return nil, err
	}
	return s, nil
}

// dispatch hands a job's failure to the session waiting for it.
func (s *riverSystem[TTx]) dispatch(events <-chan *river.Event) {
	defer close(s.done)
	for ev := range events {
		var args sessionArgs
		if err := json.Unmarshal(ev.Job.EncodedArgs, &args); err == nil {
			s.end(args.Session, fmt.Errorf("River job of session %s: %s (%v)", args.Session, ev.Kind, ev.Job.Errors))
		}
	}
}

// end tells the session waiting for session how it ended, once.
func (s *riverSystem[TTx]) end(session string, err error) {
	s.mu.Lock()
	ch := s.waiters[session]
	delete(s.waiters, session)
	s.mu.Unlock()
	if ch != nil {
		ch <- err
	}
}

func (s *riverSystem[TTx]) runSession(ctx context.Context, id string, steps int) error {
	ch := make(chan error, 1)
	s.mu.Lock()
	s.waiters[id] = ch
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		delete(s.waiters, id)
		s.mu.Unlock()
	}
	if _, err := s.client.Insert(ctx, sessionArgs{Session: id, Steps: steps}, nil); err != nil {
		forget()
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		forget()
		return ctx.Err()
	}
}

func (s *riverSystem[TTx]) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.client.Stop(ctx)
	s.stopSub()
	<-s.done
	s.cleanup()
	return err
}
