package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// journal reads back, from the run's store, what a finished session left:
// DBOS's recorded steps and workflow status, or River's job state and last
// checkpoint.
type journal struct {
	steps  []string // DBOS: the recorded steps' names, in order
	status string   // DBOS: the workflow's status; River: the job's state
	step   string   // River: the last checkpointed step
	cursor string   // River: that step's recorded output
}

func readJournal(t *testing.T, ctx context.Context, st *store, system, session string) journal {
	t.Helper()
	var j journal
	query := func(q string, args ...any) [][]string {
		var out [][]string
		if st.sqlitePath != "" {
			db, err := openSQLite(ctx, st.sqlitePath, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rows, err := db.QueryContext(ctx, q, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			cols, _ := rows.Columns()
			for rows.Next() {
				row := make([]string, len(cols))
				ptrs := make([]any, len(cols))
				for i := range row {
					ptrs[i] = &row[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				out = append(out, row)
			}
			return out
		}
		conn, err := pgx.Connect(ctx, st.pgURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			row := make([]string, len(vals))
			for i, v := range vals {
				row[i], _ = v.(string)
			}
			out = append(out, row)
		}
		return out
	}
	if system == "dbos" {
		for _, r := range query("SELECT function_name FROM operation_outputs WHERE workflow_uuid = $1 ORDER BY function_id", session) {
			j.steps = append(j.steps, r[0])
		}
		if rows := query("SELECT status FROM workflow_status WHERE workflow_uuid = $1", session); len(rows) == 1 {
			j.status = rows[0][0]
		}
		return j
	}
	columns := "state, json(metadata)" // SQLite keeps metadata as JSONB
	if st.sqlitePath == "" {
		columns = "state::text, metadata::text"
	}
	rows := query("SELECT " + columns + " FROM river_job WHERE kind = 'session'")
	for _, r := range rows {
		var m struct {
			Step    string            `json:"river:resumable_step"`
			Cursors map[string]string `json:"river:resumable_cursor"`
		}
		if err := json.Unmarshal([]byte(r[1]), &m); err != nil {
			t.Fatalf("River job metadata: %v", err)
		}
		j.status, j.step, j.cursor = r[0], m.Step, m.Cursors[m.Step]
	}
	if len(rows) != 1 {
		t.Fatalf("River jobs: got %d, want 1", len(rows))
	}
	return j
}

func stores(t *testing.T) []string {
	if os.Getenv("LONGHAUL_TEST_POSTGRES") == "" {
		t.Log("LONGHAUL_TEST_POSTGRES is not set: SQLite only")
		return []string{"sqlite"}
	}
	return []string{"sqlite", "postgres"}
}

// TestSessionJournalsEveryStep runs one session of three agent steps on each
// peer and store and reads back what it committed: every call's step (DBOS)
// or the last step's checkpoint with its output and the job completed in
// it (River).
func TestSessionJournalsEveryStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, kind := range stores(t) {
		for _, peer := range []string{"dbos", "river"} {
			t.Run(peer+"/"+kind, func(t *testing.T) {
				st, err := openStore(ctx, kind, os.Getenv("LONGHAUL_TEST_POSTGRES"), t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				defer st.close()
				clock := newStepClock()
				var sys system
				if peer == "dbos" {
					sys, err = openDBOS(ctx, st, clock)
				} else {
					sys, err = openRiver(ctx, st, clock)
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := sys.runSession(ctx, "s1", 3); err != nil {
					t.Fatal(err)
				}
				if err := sys.close(); err != nil {
					t.Fatal(err)
				}
				if got := len(clock.times["s1"]); got != 3 {
					t.Errorf("model calls: got %d, want 3", got)
				}
				j := readJournal(t, ctx, st, peer, "s1")
				if peer == "dbos" {
					want := []string{"model", "tool", "model", "tool", "model"}
					if strings.Join(j.steps, ",") != strings.Join(want, ",") || j.status != "SUCCESS" {
						t.Errorf("DBOS journal: steps %v status %q, want steps %v status SUCCESS", j.steps, j.status, want)
					}
					return
				}
				if j.status != "completed" || j.step != "model-2" || j.cursor != modelReply(2, 3) {
					t.Errorf("River job: state %q, last step %q with %q; want completed, model-2 with %q", j.status, j.step, j.cursor, modelReply(2, 3))
				}
			})
		}
	}
}

// TestSQLiteHandleIsSynchronousFull holds several of the handle's
// connections at once: each must have synchronous=FULL, not only the first.
func TestSQLiteHandleIsSynchronousFull(t *testing.T) {
	ctx := context.Background()
	db, err := openSQLite(ctx, t.TempDir()+"/x.db", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 4 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var synchronous int
		var mode string
		if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&synchronous); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if synchronous != 2 || mode != "wal" {
			t.Fatalf("connection %d: synchronous %d journal_mode %s, want 2 (FULL) and wal", len(conns), synchronous, mode)
		}
	}
}

// TestRunPrintsTheTable runs the command's whole path, small, and checks the
// table compare reads.
func TestRunPrintsTheTable(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), &out, options{system: "dbos", store: "sqlite", data: t.TempDir(), steps: 2, rounds: 2, concurrent: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"synchronous=FULL", "agent-steps/s", "\n         2      4 ", "\n         6     12 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestOptionsNameTheBadFlag(t *testing.T) {
	good := options{system: "dbos", store: "sqlite", steps: 1, rounds: 1, concurrent: 1}
	for flag, o := range map[string]options{
		"--system":     {system: "temporal", store: "sqlite", steps: 1, rounds: 1, concurrent: 1},
		"--store":      {system: "dbos", store: "mysql", steps: 1, rounds: 1, concurrent: 1},
		"--url":        {system: "dbos", store: "postgres", url: "mysql://u:secret@h/db", steps: 1, rounds: 1, concurrent: 1},
		"--steps":      {system: "dbos", store: "sqlite", rounds: 1, concurrent: 1},
		"--concurrent": {system: "dbos", store: "sqlite", steps: 1, rounds: 1},
	} {
		err := o.validate()
		if err == nil || !strings.Contains(err.Error(), flag) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: got %v, want an error naming the flag and no secret", flag, err)
		}
	}
	if err := good.validate(); err != nil {
		t.Errorf("good options: %v", err)
	}
}
