package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A crash between a control's answer and its effect, placed by what the
// test saw rather than by when its kill came. One server both answers a
// cancel (or a steer) and carries it out, a few milliseconds apart; a
// SIGKILL sent once the answer is read lands before the effect only when
// the test is scheduled before the server's engine, which on a loaded
// machine it seldom is ("in 20 rounds the steer always took effect before
// the test's SIGKILL"). So the test steps the server: it stops it
// (SIGSTOP), looks, and lets it go on (SIGCONT) for an instant, again and
// again, and kills it where it looked: stopped, its answer written to the
// client, and the request the only event its journal gained, read straight
// from the database file (a stopped server answers no API call). A step
// can still carry the server past the effect (a stop reaches a thread only
// as it enters the kernel): that round is a kill after the effect, which
// the tests check too, and they run another. The server runs at the lowest
// priority meanwhile, so that on a busy machine a step ends when the test
// can run again rather than a time slice later.

// crashStepLimit bounds the stepping of one control: it normally takes a
// few hundred steps of a few microseconds of the server's time each.
const crashStepLimit = 30 * time.Second

// controlAnswer is what a control's POST got.
type controlAnswer struct {
	status int
	body   []byte
	err    error
}

// crashInWindow posts body to the session's control endpoint (cancel,
// steer) and steps the server until it has answered. If, stopped there, the
// request (an event of type request) is the only event the journal gained,
// the server is killed at once: inside is true. Otherwise the effect was
// journaled before the answer went out: the server is killed all the same,
// and inside is false. The answer is returned with the time the dead
// incarnation was gone. The server is not started again.
//
// The POST is plain, without an Idempotency-Key (the Go client sends one,
// whose record is one more commit before the answer), on a connection of
// its own, whose receive queue tells whether the stopped server has
// written its answer even before the client has read it.
func crashInWindow(t *testing.T, srv *server, id, control, body, request string) (answer []byte, dead time.Time, inside bool) {
	t.Helper()
	require.NotNil(t, srv.cmd, "step a server that is not running")
	pid := srv.cmd.Process.Pid
	db := openJournalReader(t, srv)
	before, err := journalTypesAfter(db, id, 0)
	require.NoError(t, err)
	seen := int64(len(before)) // seqs are gap-free from 1

	// The server yields the CPU to the test (it dies in this window
	// anyway): a step then ends as soon as the test can run again, not a
	// time slice later, on a machine with fewer free cores than runnable
	// threads.
	lowerPriority(t, pid)

	conns := make(chan net.Conn, 1)
	transport := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			conns <- c
		}
		return c, err
	}}
	defer transport.CloseIdleConnections()
	answered := make(chan controlAnswer, 1)
	go func() {
		resp, err := (&http.Client{Transport: transport}).Post(srv.url+"/v1/sessions/"+id+"/"+control, "application/json", strings.NewReader(body))
		if err != nil {
			answered <- controlAnswer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body) // arrives with the headers: a small answer
		answered <- controlAnswer{status: resp.StatusCode, body: b, err: err}
	}()
	conn := <-conns

	deadline := time.Now().Add(crashStepLimit)
	for steps := 1; ; steps++ {
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		waitStopped(t, pid)
		gained, err := journalTypesAfter(db, id, seen)
		if err != nil {
			// Stopped in the middle of a write that readers wait for (a
			// WAL checkpoint, the index's header): let it run until a
			// reader gets in again, and look at the next step.
			t.Logf("step %d: no look at the journal: %v", steps, err)
			require.False(t, time.Now().After(deadline), "no answer to the %s within %s of stepping (%d steps)", control, crashStepLimit, steps)
			require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
			_, _ = journalTypesAfter(db, id, seen) // waits for the writer's lock
			continue
		}
		requestOnly := len(gained) == 1 && gained[0] == request
		var got controlAnswer
		var in bool
		switch {
		case requestOnly && answerWritten(conn, answered):
			// Written: the client reads it while the server stays stopped
			// (an answer in two writes, the second still to come, is
			// waited for no longer: the stepping goes on).
			got, in = awaitAnswer(answered, answerReadWithin)
		case len(gained) > 0 && !requestOnly:
			// The effect is journaled already: the kill comes after it.
			require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
			got, in = awaitAnswer(answered, readyTimeout)
			require.True(t, in, "the %s was not answered (the journal gained %v)", control, gained)
		}
		if in {
			srv.kill() // SIGKILL works on a stopped process
			dead = time.Now()
			require.NoError(t, got.err, "%s", control)
			require.Equal(t, http.StatusOK, got.status, "%s: %s", control, got.body)
			t.Logf("%s: killed after %d steps; the journal had gained %v", control, steps, gained)
			return got.body, dead, requestOnly
		}
		require.False(t, time.Now().After(deadline), "no answer to the %s within %s of stepping (%d steps)", control, crashStepLimit, steps)
		require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	}
}

// answerReadWithin bounds the wait for the client to read an answer the
// stopped server has written.
const answerReadWithin = 2 * time.Second

// awaitAnswer returns the control's answer once the client has read it,
// within d.
func awaitAnswer(answered <-chan controlAnswer, d time.Duration) (controlAnswer, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case got := <-answered:
		return got, true
	case <-timer.C:
		return controlAnswer{}, false
	}
}

// answerWritten reports whether the server's answer has reached the
// client: read already (answered holds it; it is put back), or waiting in
// the connection's receive queue.
func answerWritten(conn net.Conn, answered chan controlAnswer) bool {
	select {
	case got := <-answered:
		answered <- got
		return true
	default:
	}
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return true // closed: the client is done with it
	}
	queued := 0
	var ioctlErr error
	if err := raw.Control(func(fd uintptr) {
		queued, ioctlErr = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	}); err != nil {
		return true // closed: the client is done with it
	}
	return ioctlErr == nil && queued > 0
}

// lowerPriority gives every thread of process pid the lowest priority
// (nice 19; on Linux a nice value is a thread's, and a new thread
// inherits its creator's).
func lowerPriority(t *testing.T, pid int) {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	require.NoError(t, err)
	for _, task := range tasks {
		tid, err := strconv.Atoi(filepath.Base(task))
		require.NoError(t, err)
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 19); err != nil && !errors.Is(err, unix.ESRCH) {
			require.NoError(t, err, "lower the priority of thread %d", tid)
		}
	}
}

// waitStopped returns once every thread of process pid is stopped (a
// group stop reaches each thread as it next leaves the kernel), so what
// the test reads afterwards is what the process had done.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		stopped, err := allThreadsStopped(pid)
		require.NoError(t, err)
		if stopped {
			return
		}
		require.False(t, time.Now().After(deadline), "process %d not stopped within %s", pid, readyTimeout)
	}
}

// allThreadsStopped reads each thread's state in /proc: T (stopped), t
// (traced) or a dead one count as stopped.
func allThreadsStopped(pid int) (bool, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false, fmt.Errorf("threads of %d: %v", pid, err)
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(task)
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			return false, err
		}
		// pid (comm) STATE ...: comm may hold spaces and parentheses.
		rest := stat[strings.LastIndexByte(string(stat), ')')+1:]
		fields := strings.Fields(string(rest))
		if len(fields) == 0 {
			return false, fmt.Errorf("%s: no state in %q", task, stat)
		}
		switch fields[0] {
		case "T", "t", "Z", "X":
		default:
			return false, nil
		}
	}
	return true, nil
}

// openJournalReader opens srv's SQLite database to read journals while the
// server is stopped. It only reads (a reader of a WAL database takes no
// lock a writer waits on), and gives up on a lock soon: a stopped server
// holding one would never let it go.
func openJournalReader(t *testing.T, srv *server) *sql.DB {
	t.Helper()
	return openDataDBWith(t, srv, "busy_timeout(1000)", "query_only(1)")
}

// journalTypesAfter is the types of session id's events after seq, in
// order.
func journalTypesAfter(db *sql.DB, id string, seq int64) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// The journal keys an event by its session's number and seq
	// (021_journal_positions).
	rows, err := db.QueryContext(ctx, `SELECT e.type FROM sessions s, events e
WHERE s.id = ? AND e.pos > (s.num << 32) + ? AND e.pos <= (s.num << 32) + 0xFFFFFFFF ORDER BY e.pos`, id, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var types []string
	for rows.Next() {
		var typ string
		if err := rows.Scan(&typ); err != nil {
			return nil, err
		}
		types = append(types, typ)
	}
	return types, rows.Err()
}
