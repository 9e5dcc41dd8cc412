package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The runners' attackers: a hostile runner (or a stolen runner key) speaks
// the runner protocol by hand against the real binary, over the route a
// runner connects on. Each case asserts from outside: the close code and
// reason the attacker gets, GET /v1/runners as an operator sees it, the
// server's log, and that the honest runner it aimed at is untouched.

// Close codes of the runner protocol (internal/runner/link), as the
// attacker sees them on the wire.
const (
	runnersNameHeld      websocket.StatusCode = 4005
	runnersTooManyConns  websocket.StatusCode = 4007
	runnersPolicyBreaker websocket.StatusCode = websocket.StatusPolicyViolation
	runnersBadHello      websocket.StatusCode = 4004
	runnersOutdated      websocket.StatusCode = 4008
	// runnersProtocol is the runner protocol the server speaks.
	runnersProtocol = 4
	// runnersMinProtocol is the oldest runner protocol it takes.
	runnersMinProtocol = 3
)

// runnersDial opens a runner connection with key and says hello as name:
// the socket and the welcome's error (nil: welcomed).
func runnersDial(t *testing.T, srv *server, key, name string) (*websocket.Conn, error) {
	t.Helper()
	return runnersDialHello(t, srv, key, fmt.Sprintf(`{"name":%q,"capacity":1,"version":"attacker","protocol":%d}`, name, runnersProtocol))
}

// runnersDialHello opens a runner connection with key and sends hello as
// its first frame: the socket and the welcome's error (nil: welcomed).
func runnersDialHello(t *testing.T, srv *server, key, hello string) (*websocket.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, srv.url+"/v1/runners/connect", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	require.NoError(t, err, "the upgrade")
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	t.Cleanup(func() { _ = ws.CloseNow() })
	if err := ws.Write(ctx, websocket.MessageText, []byte(hello)); err != nil {
		return ws, err
	}
	_, welcome, err := ws.Read(ctx)
	if err == nil {
		require.Contains(t, string(welcome), `"connection_id":"rc_`)
	}
	return ws, err
}

// runnersWithHonest starts a server with bootstrap key boot and an honest
// runner box1 of a runner key of its own, and waits until it is listed.
func runnersWithHonest(t *testing.T, boot string) (*keyed, lt.APIKey, *runnerProc) {
	t.Helper()
	k := startKeyed(t, boot)
	honest := k.create("honest", lt.RoleRunner)
	holder := startRunner(t, k.srv.url, honest.Key, "box1")
	require.Eventually(t, func() bool {
		return strings.Join(runnersListed(t, k.srv, boot), ",") == "box1 "+honest.ID
	}, 30*time.Second, 20*time.Millisecond)
	return k, honest, holder
}

// runnersRequireClosed asserts that err is the server closing the
// connection with code and a reason holding reason.
func runnersRequireClosed(t *testing.T, err error, code websocket.StatusCode, reason string) {
	t.Helper()
	require.Equal(t, code, websocket.CloseStatus(err), "%v", err)
	var ce websocket.CloseError
	require.True(t, errors.As(err, &ce))
	require.Contains(t, ce.Reason, reason)
}

// runnersListed is what an operator sees of the runners: "name key_id
// node" each.
func runnersListed(t *testing.T, srv *server, operator string) []string {
	t.Helper()
	cl, err := client.New(srv.url, &client.Config{APIKey: operator})
	require.NoError(t, err)
	l, err := cl.ListRunners(t.Context(), "")
	require.NoError(t, err)
	var out []string
	for _, r := range l.Data {
		out = append(out, r.Name+" "+r.KeyID)
	}
	return out
}

// runnersListedAs returns what waits until an operator (boot) sees the
// runners want ("name key_id", comma-separated; "" for none).
func runnersListedAs(t *testing.T, k *keyed, boot string) func(want string) {
	return func(want string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Join(runnersListed(t, k.srv, boot), ",") == want },
			30*time.Second, 20*time.Millisecond, "runners listed: %q", want)
	}
}

// gpuShellSession creates a session on a runner labelled gpu whose first
// turn runs the shell command first and whose second runs second, and
// returns it with what waits for its status.
func gpuShellSession(t *testing.T, admin *client.Client, first, second string) (*lt.Session, func(lt.SessionStatus)) {
	t.Helper()
	ctx := t.Context()
	script, err := json.Marshal([]map[string]any{
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": first}}}},
		{"text": "done"},
		{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": second}}}},
		{"text": "done again"},
	})
	require.NoError(t, err)
	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Work.",
		Tools: []lt.ToolSpec{{Name: "shell"}}, Environment: &lt.Environment{Runner: &lt.RunnerSelector{Labels: []string{"gpu"}}},
	}})
	require.NoError(t, err)
	return s, func(want lt.SessionStatus) {
		t.Helper()
		require.Eventually(t, func() bool {
			got, err := admin.GetSession(ctx, s.ID)
			return err == nil && got.Status == want
		}, time.Minute, 10*time.Millisecond, "session to be %s", want)
	}
}

// TestAdversarialRunners_NameHeld: a second runner key of the project
// cannot take a live runner's name: it is refused with 4005 and the
// reason, every time it tries, and the holder keeps its connection and
// its row (it is not knocked offline).
func TestAdversarialRunners_NameHeld(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-name-bootstrap"
	k, honest, holder := runnersWithHonest(t, boot)
	thief := k.create("thief", lt.RoleRunner)

	for range 5 {
		_, err := runnersDial(t, k.srv, thief.Key, "box1")
		runnersRequireClosed(t, err, runnersNameHeld, "runner name box1 is held by another key")
	}
	require.Equal(t, []string{"box1 " + honest.ID}, runnersListed(t, k.srv, boot), "the holder keeps its row")
	select {
	case <-holder.done:
		t.Fatalf("the holder was knocked offline:\n%s", holder.stderr.String())
	default:
	}
	require.NotContains(t, holder.stderr.String(), "connection ended", "the holder's connection was never closed")
}

// TestAdversarialRunners_OldProtocolRefused: a runner that says an older
// protocol than the server's (none at all, as every runner from before
// versions; or 1), or one out of range, is refused before anything is
// recorded (4008 saying to upgrade the runner; 4004 naming the field), so
// the server never sends it a call it does not know. It is never listed,
// and a runner of the server's protocol connected under another name is
// untouched and listed with its protocol.
func TestAdversarialRunners_OldProtocolRefused(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-protocol-bootstrap"
	k, honest, holder := runnersWithHonest(t, boot)
	old := k.create("old", lt.RoleRunner)

	for _, hello := range []string{
		`{"name":"box2","capacity":1,"version":"v0.8.0"}`,
		`{"name":"box2","capacity":1,"version":"v0.8.0","protocol":1}`,
		// Protocol 2 compared a person's change and wrote it in two calls.
		`{"name":"box2","capacity":1,"version":"v0.9.0","protocol":2}`,
	} {
		_, err := runnersDialHello(t, k.srv, old.Key, hello)
		runnersRequireClosed(t, err, runnersOutdated, fmt.Sprintf("older than %d", runnersMinProtocol))
		runnersRequireClosed(t, err, runnersOutdated, "upgrade longhaul on the runner's machine")
	}
	for _, p := range []string{"-1", "1048577"} {
		_, err := runnersDialHello(t, k.srv, old.Key, `{"name":"box2","capacity":1,"version":"x","protocol":`+p+`}`)
		runnersRequireClosed(t, err, runnersBadHello, "hello.protocol")
	}
	require.Equal(t, []string{"box1 " + honest.ID}, runnersListed(t, k.srv, boot), "no refused runner is listed")
	cl, err := client.New(k.srv.url, &client.Config{APIKey: boot})
	require.NoError(t, err)
	l, err := cl.ListRunners(t.Context(), "")
	require.NoError(t, err)
	require.Len(t, l.Data, 1)
	require.Equal(t, runnersProtocol, l.Data[0].Protocol, "the honest runner's protocol is listed")
	select {
	case <-holder.done:
		t.Fatalf("the honest runner stopped:\n%s", holder.stderr.String())
	default:
	}
}

// TestAdversarialRunners_ConnectionCaps: a key past
// --runner-max-conns-per-key, and any key past --runner-max-conns, is
// refused with 4007 (the reason saying which cap) before anything is
// recorded; the connections admitted before are untouched.
func TestAdversarialRunners_ConnectionCaps(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-caps-bootstrap"
	k := &keyed{t: t, srv: startServer(t, "--api-key", boot, "--runner-max-conns-per-key", "1", "--runner-max-conns", "2"), admin: boot}
	one, two, three := k.create("one", lt.RoleRunner), k.create("two", lt.RoleRunner), k.create("three", lt.RoleRunner)

	first, err := runnersDial(t, k.srv, one.Key, "box1")
	require.NoError(t, err)
	_, err = runnersDial(t, k.srv, one.Key, "box2")
	runnersRequireClosed(t, err, runnersTooManyConns, "this runner key holds 1 connections to this node")
	_, err = runnersDial(t, k.srv, two.Key, "box3")
	require.NoError(t, err)
	_, err = runnersDial(t, k.srv, three.Key, "box4")
	runnersRequireClosed(t, err, runnersTooManyConns, "this node holds 2 runner connections")

	require.Equal(t, []string{"box1 " + one.ID, "box3 " + two.ID}, runnersListed(t, k.srv, boot), "no refused connection was recorded")
	// The first connection is still open: it answers the server's pings
	// while it reads, and the server closes it only when it goes.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, _, err = first.Read(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the admitted connection was not closed: %v", err)
}

// TestAdversarialRunners_CallFlood: a runner that floods the server with
// calls (of a method the server does not serve) while never reading is
// closed as a protocol violation once the server's refusals back up; its
// row goes, and the server still serves, an honest runner included.
func TestAdversarialRunners_CallFlood(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-flood-bootstrap"
	k := startKeyed(t, boot)
	honest, hostile := k.create("honest", lt.RoleRunner), k.create("hostile", lt.RoleRunner)
	startRunner(t, k.srv.url, honest.Key, "box1")
	ws, err := runnersDial(t, k.srv, hostile.Key, "flood")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return len(runnersListed(t, k.srv, boot)) == 2
	}, 30*time.Second, 20*time.Millisecond)
	logFrom := k.srv.logSize()

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// A burst of calls, never reading: the server drains what it was
	// sent while it closes, so the writes may all succeed.
	for id := 1; id <= 10_000; id++ {
		f := fmt.Sprintf(`{"type":"call","id":%d,"method":"%s","params":{"cmd":"id"}}`, id, strings.Repeat("x", 64))
		if ws.Write(ctx, websocket.MessageText, []byte(f)) != nil {
			break
		}
	}
	// The refusals the server managed to send come first: read past them
	// to the end of the connection (a connection left open would run the
	// read into ctx's deadline, and the log check below would fail).
	for err == nil {
		_, _, err = ws.Read(ctx)
	}
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the flooder's connection was never closed")
	if websocket.CloseStatus(err) != -1 { // else a write saw the socket go first
		runnersRequireClosed(t, err, runnersPolicyBreaker, "protocol violation")
	}
	require.Eventually(t, func() bool {
		return strings.Contains(k.srv.logSince(logFrom), "protocol violation")
	}, 30*time.Second, 20*time.Millisecond, "the server says why it closed the connection")
	require.Eventually(t, func() bool {
		return strings.Join(runnersListed(t, k.srv, boot), ",") == "box1 "+honest.ID
	}, 30*time.Second, 20*time.Millisecond, "the flooder's row is gone, the honest runner's is not")
	r := k.send(boot, http.MethodGet, "/v1/version", "")
	require.Equal(t, http.StatusOK, r.status, "the server still serves: %s", r.body)
}

// TestAdversarialRunners_StaleNameTakesNoPinnedSession: a session pinned
// to runner box1 of one key is not handed to another runner key of the
// same project that takes the name once box1's connection ended: the
// session waits for its own runner (environment_connection, saying why),
// nothing of it reaches the newcomer (no workspace, no command), and it
// goes on when the holder's key connects as box1 again.
func TestAdversarialRunners_StaleNameTakesNoPinnedSession(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-stale-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	honest, thief := k.create("honest", lt.RoleRunner), k.create("thief", lt.RoleRunner)
	listed := runnersListedAs(t, k, boot)
	holder := startRunner(t, k.srv.url, honest.Key, "box1", "--label", "gpu")
	listed("box1 " + honest.ID)

	s, status := gpuShellSession(t, admin, `echo first >> where.txt`, `echo "$LONGHAUL_SESSION_ID" > stolen.txt`)
	status(lt.SessionIdle)

	// The holder goes away; the thief takes the free name, with the label.
	holder.kill(t)
	listed("")
	taker := startRunner(t, k.srv.url, thief.Key, "box1", "--label", "gpu")
	listed("box1 " + thief.ID)

	_, err := admin.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	status(lt.SessionRequiresAction)
	acts, err := admin.ListActions(ctx, s.ID, lt.ActionPending)
	require.NoError(t, err)
	require.Len(t, acts.Data, 1)
	require.Equal(t, lt.ActionEnvironmentConnection, acts.Data[0].Type)
	require.Contains(t, acts.Data[0].Reason, "held by another key")
	_, err = os.Stat(filepath.Join(taker.data, "workspaces", s.ID))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing of the pinned session reached the other key's runner")

	// The holder's key comes back as box1: the session goes on there.
	taker.kill(t)
	listed("")
	back := startRunner(t, k.srv.url, honest.Key, "box1", "--label", "gpu")
	status(lt.SessionIdle)
	b, err := os.ReadFile(filepath.Join(back.data, "workspaces", s.ID, "stolen.txt"))
	require.NoError(t, err)
	require.Equal(t, s.ID+"\n", string(b), "the second turn ran on the holder's key")
	_, err = os.Stat(filepath.Join(taker.data, "workspaces", s.ID))
	require.ErrorIs(t, err, os.ErrNotExist)
	back.kill(t)
}

// TestAdversarialRunners_ReplacedKeyNeedsAPersonsUnpin: box1's key is
// revoked (its runner is closed) and a new key is made for box1, on the
// same machine. The new key's box1 gets nothing of the pinned session by
// itself, since to the server it is any other key that took the name: the
// session waits (environment_connection, saying the name is held by
// another key and that unpin lets it go on). Once a person decides unpin,
// the session goes on on the new key's box1, in the workspace it had.
func TestAdversarialRunners_ReplacedKeyNeedsAPersonsUnpin(t *testing.T) {
	t.Parallel()
	rk := replacedRunnerKey(t, "lh-adv-runners-rekey-bootstrap")
	_, err := rk.admin.DecideAction(t.Context(), rk.s.ID, rk.action.ID, &lt.Decision{Decision: lt.DecisionUnpin, Reason: "box1's key was replaced"})
	require.NoError(t, err)
	rk.ranOnTheNewKey()
}

// replacedKey is a session whose environment lives on box1, after box1's
// key was revoked and a new key runs box1 on the same data directory: its
// second turn waits on action, an environment_connection saying the name
// is held by another key.
type replacedKey struct {
	t      *testing.T
	k      *keyed
	admin  *client.Client
	s      *lt.Session
	status func(lt.SessionStatus)
	data   string
	action lt.Action
}

// replacedRunnerKey sets up a replacedKey on a server whose bootstrap key
// is boot. Nothing runs on the new key's box1 before a person decides.
func replacedRunnerKey(t *testing.T, boot string) *replacedKey {
	t.Helper()
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	old := k.create("box1-old", lt.RoleRunner)
	listed := runnersListedAs(t, k, boot)
	data := filepath.Join(t.TempDir(), "box1")
	first := startRunnerIn(t, k.srv.url, old.Key, "box1", data, "--label", "gpu")
	listed("box1 " + old.ID)

	s, status := gpuShellSession(t, admin, `echo first > where.txt`, `cat where.txt > again.txt`)
	status(lt.SessionIdle)

	// The old key is revoked: the server closes its runner.
	r := k.send(boot, http.MethodDelete, "/v1/keys/"+old.ID, "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	listed("")
	first.kill(t)
	replaced := k.create("box1-new", lt.RoleRunner)
	second := startRunnerIn(t, k.srv.url, replaced.Key, "box1", data, "--label", "gpu")
	t.Cleanup(func() { second.kill(t) })
	listed("box1 " + replaced.ID)

	_, err := admin.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)
	status(lt.SessionRequiresAction)
	acts, err := admin.ListActions(ctx, s.ID, lt.ActionPending)
	require.NoError(t, err)
	require.Len(t, acts.Data, 1)
	a := acts.Data[0]
	require.Equal(t, lt.ActionEnvironmentConnection, a.Type)
	require.Contains(t, a.Reason, "held by another key")
	require.Contains(t, a.Summary, "decide unpin")
	_, err = os.Stat(filepath.Join(data, "workspaces", s.ID, "again.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing ran on the new key's runner before the decision")
	return &replacedKey{t: t, k: k, admin: admin, s: s, status: status, data: data, action: a}
}

// ranOnTheNewKey requires the second turn to have run, once unpinned, on
// the new key's box1, in the session's workspace.
func (rk *replacedKey) ranOnTheNewKey() {
	rk.t.Helper()
	rk.status(lt.SessionIdle)
	b, err := os.ReadFile(filepath.Join(rk.data, "workspaces", rk.s.ID, "again.txt"))
	require.NoError(rk.t, err)
	require.Equal(rk.t, "first\n", string(b), "the second turn ran on the new key's box1, in the session's workspace")
}

// TestAdversarialRunners_MadeUpAbandonedOpens: a hostile runner that
// reports closing environments the server never left unclaimed (made-up
// handles, as many as it likes) would have the server wake sessions for
// slots that are not free. The server takes such a report only for a
// handle it opened on that connection and never claimed: these are
// answered and ignored, each logged with the runner and the handle only.
func TestAdversarialRunners_MadeUpAbandonedOpens(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-abandoned-bootstrap"
	k := startKeyed(t, boot)
	hostile := k.create("hostile", lt.RoleRunner)
	ws, err := runnersDial(t, k.srv, hostile.Key, "liar")
	require.NoError(t, err)
	logFrom := k.srv.logSize()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for id := 1; id <= 20; id++ {
		f := fmt.Sprintf(`{"type":"call","id":%d,"method":"env.abandoned","params":{"env_id":"e1_%d"}}`, id, id)
		require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte(f)))
		_, b, err := ws.Read(ctx)
		require.NoError(t, err, "the server answers each report")
		require.JSONEq(t, fmt.Sprintf(`{"type":"result","id":%d,"result":null}`, id), string(b))
	}
	require.Eventually(t, func() bool {
		return strings.Count(k.srv.logSince(logFrom), "did not leave unclaimed: ignored") == 20
	}, 30*time.Second, 20*time.Millisecond, "each made-up report is ignored")
	require.NotContains(t, k.srv.logSince(logFrom), "its slot is free")
}
