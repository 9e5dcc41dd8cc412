package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A POST /v1/sessions with an Idempotency-Key survives a crash between the
// session's commit and the record of its answer: the server started again
// on the same data directory expires its dead run's claim of the key at
// once, and the client's retry runs the request again with the claim's
// seed, which names the session the dead run made: the retry is answered
// with that session, and no second session (a second agent running) is
// made.
//
// The window is one request's two commits apart (the session, then the
// record, both written before the answer goes out), so no answer tells the
// test when to kill: the server is stepped as crashInWindow steps it
// (SIGSTOP, look, SIGCONT for an instant, at the lowest priority), and
// killed once, stopped, its database holds the session but no record of
// the key, read straight from the file. A step can carry the server past
// the record (a stop reaches a thread only as it enters the kernel): that
// round does not count, and another runs with a new key on a fresh server,
// up to idemCrashRounds.

// idemCrashRounds bounds the rounds run until one kill lands between the
// session's commit and the record. The first round normally does (some
// tens of steps); about one in five carries the server past the record.
const idemCrashRounds = 20

// TestIdempotentCreateSurvivesACrashBeforeItsRecord SIGKILLs the server
// after it committed the session of an idempotent POST /v1/sessions and
// before it recorded the answer, starts it again on the same data, and
// sends the same POST again: it is a 201 naming the session found in the
// database before the kill, not a replay (there was no record: the request
// ran again and found its session), the sessions list holds that session
// only, and a third POST replays it. Before the claim's seed named the
// session, the retry made a second session; before the node expired its
// previous run's claims at start, the retry met the dead run's claim (a
// 409 for up to the claim's TTL, 30 s).
func TestIdempotentCreateSurvivesACrashBeforeItsRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	var (
		srv  *server
		key  string
		body []byte
		cut  idemCrashCut
	)
	for round := 1; ; round++ {
		require.LessOrEqual(t, round, idemCrashRounds,
			"in %d rounds no kill came between the session's commit and the record of its answer", idemCrashRounds)
		// A fresh server each round: its only session is the round's.
		srv = startServer(t, "--sandbox", "local") // no command runs: no sandbox to start
		key = fmt.Sprintf("idem-crash-%02d", round)
		body = idemSessionBody(t, key)
		cut = idemCrashBeforeRecord(t, srv, key, body)
		if cut.inside {
			t.Logf("round %d: killed after %d steps with session %s committed and no record of key %s", round, cut.steps, cut.session, key)
			break
		}
		t.Logf("round %d: the answer was recorded before the kill (%d steps); running another round", round, cut.steps)
	}

	srv.restart()
	// Raw requests: the Go client retries a 409 by itself, and the
	// Idempotent-Replayed header of each answer is what is asserted.
	hc := &http.Client{Timeout: readyTimeout}

	// The client's retry, as soon as the server is back: the dead run's
	// claim is expired by the start, so the request runs again, with the
	// claim's seed, and finds the session the dead run made.
	retry, err := idemPost(ctx, hc, srv, key, body)
	require.NoError(t, err)
	require.NotEqual(t, http.StatusConflict, retry.status,
		"the retry met the dead run's claim (Retry-After %q): the server started again did not release its previous run's keys: %s",
		retry.retryAfter, retry.body)
	require.Equal(t, http.StatusCreated, retry.status, "retry: %s", retry.body)
	require.Equal(t, cut.session, retry.session.ID,
		"the retry names another session than the one committed before the kill: the request made a second one")
	require.Empty(t, retry.replayed, "the retry was replayed, yet no answer was recorded before the kill")

	// From the outside: the one session, the dead run's.
	idemRequireOneSessionPerKey(ctx, t, srv.api, map[string]string{key: cut.session})

	// The retry's answer is recorded: the next one replays it.
	again, err := idemPost(ctx, hc, srv, key, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, again.status, "third POST: %s", again.body)
	require.Equal(t, cut.session, again.session.ID, "third POST")
	require.Equal(t, "true", again.replayed, "the third POST ran the request again rather than replaying the retry's record")
	idemRequireOneSessionPerKey(ctx, t, srv.api, map[string]string{key: cut.session})

	// What made the retry find the session: the dead run named it after
	// its claim's seed.
	require.Equal(t, "ses_"+cut.seed, cut.session, "the session committed before the kill is not named after the key's claim")
}

// idemCrashCut is where idemCrashBeforeRecord killed the server.
type idemCrashCut struct {
	// inside: the session was committed and the key had no record.
	inside bool
	// session is the id of the database's one session at the kill.
	session string
	// seed is the key's claim's seed at the kill (inside only).
	seed  string
	steps int
}

// idemCrashBeforeRecord posts body to POST /v1/sessions with key and steps
// the server until, stopped, its database holds a session, then SIGKILLs
// it. The cut is inside if the key had no record then. The server is not
// started again.
func idemCrashBeforeRecord(t *testing.T, srv *server, key string, body []byte) idemCrashCut {
	t.Helper()
	require.NotNil(t, srv.cmd, "step a server that is not running")
	pid := srv.cmd.Process.Pid
	db := openJournalReader(t, srv)
	// The server yields the CPU to the test (it dies in this window
	// anyway): a step then ends as soon as the test can run again.
	lowerPriority(t, pid)

	// The POST on a connection of its own, which the kill ends: its
	// answer, if any, came after the record, and is not waited for.
	transport := &http.Transport{DisableKeepAlives: true}
	defer transport.CloseIdleConnections()
	type answer struct {
		a   idemAnswer
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		a, err := idemPost(context.Background(), &http.Client{Transport: transport}, srv, key, body)
		answered <- answer{a, err}
	}()

	deadline := time.Now().Add(crashStepLimit)
	for steps := 1; ; steps++ {
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		waitStopped(t, pid)
		l, err := idemCrashLook(db, key)
		if err != nil {
			// Stopped in the middle of a write that readers wait for (a
			// WAL checkpoint, the index's header): let it run until a
			// reader gets in again, and look at the next step.
			t.Logf("step %d: no look at the database: %v", steps, err)
			require.False(t, time.Now().After(deadline), "no session within %s of stepping (%d steps)", crashStepLimit, steps)
			require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
			_, _ = idemCrashLook(db, key) // waits for the writer's lock
			continue
		}
		if len(l.sessions) > 0 {
			srv.kill() // SIGKILL works on a stopped process
			require.Len(t, l.sessions, 1, "sessions of a fresh server sent one POST")
			return idemCrashCut{inside: !l.recorded, session: l.sessions[0], seed: l.seed, steps: steps}
		}
		select {
		case got := <-answered:
			// Answered with no session made: the request was refused.
			srv.kill()
			require.NoError(t, got.err, "POST /v1/sessions")
			require.Failf(t, "the POST made no session", "answered %d: %s", got.a.status, got.a.body)
		default:
		}
		require.False(t, time.Now().After(deadline), "no session within %s of stepping (%d steps)", crashStepLimit, steps)
		require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	}
}

// idemCrashState is what a stopped server's database holds of the crash
// test's request.
type idemCrashState struct {
	sessions []string // every session's id
	recorded bool     // the key has a record (idempotency_keys)
	seed     string   // the seed of the key's claim, if it has one
}

// idemCrashLook reads the sessions, the key's record and its claim, in one
// statement: one snapshot of the database.
func idemCrashLook(db *sql.DB, key string) (idemCrashState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var ids, seed sql.NullString
	var records int
	err := db.QueryRowContext(ctx, `SELECT
	(SELECT group_concat(id, ' ') FROM sessions),
	(SELECT count(*) FROM idempotency_keys WHERE key = ?),
	(SELECT seed FROM idempotency_claims WHERE key = ?)`, key, key).Scan(&ids, &records, &seed)
	if err != nil {
		return idemCrashState{}, err
	}
	return idemCrashState{sessions: strings.Fields(ids.String), recorded: records > 0, seed: seed.String}, nil
}
