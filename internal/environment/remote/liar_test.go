package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/environment/environmenttest"
	"github.com/longhaul-dev/longhaul/internal/environment/remote"
	"github.com/longhaul-dev/longhaul/internal/runner"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// dialLiar connects to rg's hub as a runner named name whose calls are
// answered by handlers, each given the connection to call back over.
func dialLiar(t *testing.T, rg *rig, name string, handlers map[string]func(c *link.Conn, ctx context.Context, req *link.Request) (any, error)) *link.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(t.Context(), rg.url+runner.ConnectPath, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer good"}}})
	require.NoError(t, err)
	require.NoError(t, link.WriteJSON(t.Context(), ws, link.Hello{Name: name, Capacity: 4, Protocol: link.ProtocolVersion}))
	var welcome link.Welcome
	require.NoError(t, link.ReadJSON(t.Context(), ws, &welcome))
	ready := make(chan *link.Conn, 1)
	hs := map[string]link.Handler{}
	for m, h := range handlers {
		hs[m] = func(ctx context.Context, req *link.Request) (any, error) {
			c := <-ready
			ready <- c
			return h(c, ctx, req)
		}
	}
	c := link.New(ws, &link.Config{Handlers: hs})
	ready <- c
	t.Cleanup(func() { c.Close("test over"); <-c.Done() })
	require.Eventually(t, func() bool { _, ok := rg.hub.Get(project, name); return ok }, 10*time.Second, time.Millisecond)
	return c
}

// liarEnvHandlers answer env.open, env.close and snapshot.holds as a
// runner would, and snapshot.take with take.
func liarEnvHandlers(take func(c *link.Conn, ctx context.Context) (string, error)) map[string]func(*link.Conn, context.Context, *link.Request) (any, error) {
	return map[string]func(*link.Conn, context.Context, *link.Request) (any, error){
		link.MethodEnvOpen: func(*link.Conn, context.Context, *link.Request) (any, error) {
			return link.EnvOpenResult{Provisioned: true, Backend: "liar"}, nil
		},
		link.MethodEnvClaim:      func(*link.Conn, context.Context, *link.Request) (any, error) { return nil, nil },
		link.MethodEnvClose:      func(*link.Conn, context.Context, *link.Request) (any, error) { return nil, nil },
		link.MethodSnapshotHolds: func(*link.Conn, context.Context, *link.Request) (any, error) { return false, nil },
		link.MethodSnapshotTake: func(c *link.Conn, ctx context.Context, _ *link.Request) (any, error) {
			id, err := take(c, ctx)
			if err != nil {
				return nil, err
			}
			return link.SnapshotResult{ID: id, Stats: json.RawMessage(`{}`)}, nil
		},
	}
}

// TestSnapshotIDMustBeProven: a runner that learnt another project's
// snapshot id and answers it to snapshot.take is refused: it never sent
// that snapshot's root tree, so the server does not take the id as this
// session's (whose restore would then let the runner fetch the other
// project's files, and whose fork would copy them). Bytes that are not
// the tree do not prove it; a tree the runner really sent does.
func TestSnapshotIDMustBeProven(t *testing.T) {
	blobs := environmenttest.NewBlobs(t)
	rg := newRig(t, blobs, rigOptions{})
	ctx := t.Context()

	// The other project's snapshot (taken on the server's machine: the
	// rig's runners are all of one project, which owns what they take).
	foreignID, _ := foreignSnapshot(t, blobs, map[string]string{"secret.txt": "the other project's secret"})

	ownTree := []byte(`{"v":1,"entries":[]}`)
	ownID := environmenttest.Digest(ownTree)
	var answer func(c *link.Conn, ctx context.Context) (string, error)
	dialLiar(t, rg, "liar", liarEnvHandlers(func(c *link.Conn, ctx context.Context) (string, error) { return answer(c, ctx) }))
	b, err := remote.New(&remote.Config{Hub: rg.hub, Project: project, Runner: "liar"})
	require.NoError(t, err)
	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_mine", Session: "ses_mine"})
	require.NoError(t, err)
	defer env.Close()

	// The id alone.
	answer = func(*link.Conn, context.Context) (string, error) { return foreignID, nil }
	_, _, err = env.Snapshot(ctx)
	require.ErrorContains(t, err, "did not send its root tree")

	// The id with bytes of its own under it: refused by their digest.
	answer = func(c *link.Conn, ctx context.Context) (string, error) {
		err := c.Call(ctx, link.MethodBlobPut, link.BlobPutParams{Digest: foreignID, Size: int64(len(ownTree)), Data: ownTree}, nil, nil)
		requireCode(t, err, link.CodeBadParams)
		return foreignID, nil
	}
	_, _, err = env.Snapshot(ctx)
	require.ErrorContains(t, err, "did not send its root tree")

	// A tree it sent is proven (the store need not lack it).
	answer = func(c *link.Conn, ctx context.Context) (string, error) {
		return ownID, c.Call(ctx, link.MethodBlobPut, link.BlobPutParams{Digest: ownID, Size: int64(len(ownTree)), Data: ownTree}, nil, nil)
	}
	id, _, err := env.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, ownID, id)
	// Once accepted, the environment knows it: no proof is asked again.
	answer = func(*link.Conn, context.Context) (string, error) { return ownID, nil }
	id, _, err = env.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, ownID, id)
	// But the foreign id is still refused.
	answer = func(*link.Conn, context.Context) (string, error) { return foreignID, nil }
	_, _, err = env.Snapshot(ctx)
	require.ErrorContains(t, err, "did not send its root tree")
}

// TestAbandonedUploadsDieWithTheirEnvironment: writes in parts a server
// abandoned (its caller cancelled after the first part) are discarded
// when their environment closes, so that they do not make every later
// large write of the connection fail as busy.
func TestAbandonedUploadsDieWithTheirEnvironment(t *testing.T) {
	rg := newRig(t, environmenttest.NewBlobs(t), rigOptions{})
	r := rg.connected(t)
	ctx := t.Context()
	open := func(id string) {
		require.NoError(t, r.Conn.Call(ctx, link.MethodEnvOpen, link.EnvOpenParams{EnvID: id, Workspace: "ses_up", Session: "ses_up"}, nil, nil))
	}
	part := func(env, upload string) error {
		return r.Conn.Call(ctx, link.MethodFSWrite, link.FSWriteParams{EnvID: env, Path: "big.bin", Data: []byte("first part"), Upload: upload}, nil, nil)
	}
	open("x1")
	for n := 0; ; n++ {
		err := part("x1", "u"+strconv.Itoa(n))
		if err != nil {
			requireCode(t, err, link.CodeBusy)
			break
		}
		require.Less(t, n, 1000, "the runner takes uploads without bound")
	}
	require.NoError(t, r.Conn.Call(ctx, link.MethodEnvClose, link.EnvRef{EnvID: "x1"}, nil, nil))

	// A large write through a new environment of the same connection.
	env, err := rg.backend(t).Open(ctx, &environment.OpenParams{Workspace: "ses_up", Session: "ses_up"})
	require.NoError(t, err)
	defer env.Close()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB: several parts
	require.NoError(t, env.WriteFile(ctx, "big.bin", big))
	got, err := env.ReadFile(ctx, "big.bin", 0, int64(len(big)))
	require.NoError(t, err)
	require.Equal(t, big, got.Data)
}

// TestAnswersFitAFrame: a read's answer leaves room for its path however
// long it is once escaped ('<' is 6 bytes in JSON), and a listing of many
// long names is cut to a frame (truncated, as past its count) instead of
// failing.
func TestAnswersFitAFrame(t *testing.T) {
	rg := newRig(t, environmenttest.NewBlobs(t), rigOptions{})
	ctx := t.Context()
	env, err := rg.backend(t).Open(ctx, &environment.OpenParams{Workspace: "ses_frame", Session: "ses_frame"})
	require.NoError(t, err)
	defer env.Close()

	dir := strings.Repeat(strings.Repeat("<", 250)+"/", 15)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB: a read of several frames
	require.NoError(t, env.WriteFile(ctx, dir+"f", big))
	got, err := env.ReadFile(ctx, dir+"f", 0, int64(len(big)))
	require.NoError(t, err)
	require.Equal(t, big, got.Data)

	const n = 1000
	for i := range n {
		require.NoError(t, env.WriteFile(ctx, "many/"+strings.Repeat("<", 250)+strconv.Itoa(i), nil))
	}
	l, err := env.List(ctx, "many", n)
	require.NoError(t, err)
	require.Equal(t, n, l.Total)
	require.True(t, l.Truncated)
	require.NotEmpty(t, l.Entries)
	require.Less(t, len(l.Entries), n)
}

// TestUnfinishedUploadsAreBounded: a runner cannot hold the server's
// memory with blobs it starts uploading and never finishes: their bytes
// are bounded (here the node's bound), they die with the snapshot they
// came for, and a blob.has asks about a bounded number of digests.
func TestUnfinishedUploadsAreBounded(t *testing.T) {
	rg := newRig(t, environmenttest.NewBlobs(t), rigOptions{maxUploadBytes: 256 << 10})
	liar, r := dialAsRunner(t, rg, "liar")
	ctx := t.Context()
	part := bytes.Repeat([]byte("x"), 200<<10)
	first := func(digest string) link.BlobPutParams {
		return link.BlobPutParams{Digest: digest, Size: link.MaxBlobBytes, Data: part}
	}
	a, b := environmenttest.Digest([]byte("a")), environmenttest.Digest([]byte("b"))

	_, end := hub.AllowTake(r, 0)
	require.NoError(t, liar.Call(ctx, link.MethodBlobPut, first(a), nil, nil))
	requireCode(t, liar.Call(ctx, link.MethodBlobPut, first(b), nil, nil), link.CodeBusy)
	end()

	_, end = hub.AllowTake(r, 0)
	defer end()
	next := link.BlobPutParams{Digest: a, Size: link.MaxBlobBytes, Offset: int64(len(part)), Data: part}
	requireCode(t, liar.Call(ctx, link.MethodBlobPut, next, nil, nil), link.CodeBadParams) // gone with its take
	require.NoError(t, liar.Call(ctx, link.MethodBlobPut, first(b), nil, nil))             // its bytes were given back

	many := make([]string, link.MaxDigestsPerHas+1)
	for i := range many {
		many[i] = environmenttest.Digest([]byte(strconv.Itoa(i)))
	}
	requireCode(t, liar.Call(ctx, link.MethodBlobHas, link.BlobHasParams{Digests: many}, nil, nil), link.CodeBadParams)
	require.LessOrEqual(t, link.MaxDigestsPerHas, 256)
}

// TestSQLiteAnswerIsBoundedAgain: a runner that answers sqlite_query with
// more rows or bytes than the request asked for is cut back to its limits
// on the server, marked truncated by the limit it broke, as a query run
// here would be; an error larger than the budget is refused.
func TestSQLiteAnswerIsBoundedAgain(t *testing.T) {
	rg := newRig(t, environmenttest.NewBlobs(t), rigOptions{})
	ctx := t.Context()
	var answer tool.SQLiteAnswer
	handlers := liarEnvHandlers(nil)
	handlers[link.MethodSQLiteQuery] = func(*link.Conn, context.Context, *link.Request) (any, error) { return answer, nil }
	dialLiar(t, rg, "liar", handlers)
	b, err := remote.New(&remote.Config{Hub: rg.hub, Project: project, Runner: "liar"})
	require.NoError(t, err)
	env, err := b.Open(ctx, &environment.OpenParams{Workspace: "ses_sql", Session: "ses_sql"})
	require.NoError(t, err)
	defer env.Close()

	rows := make([][]any, 50)
	for i := range rows {
		rows[i] = []any{strings.Repeat("x", 100)}
	}
	answer = tool.SQLiteAnswer{Output: &tool.SQLiteQueryOutput{Columns: []string{"x"}, Rows: rows, RowCount: len(rows)}}
	ans, err := env.SQLiteQuery(ctx, &tool.SQLiteRequest{Database: "t.db", SQL: "SELECT x FROM t", MaxRows: 3, MaxBytes: 4096})
	require.NoError(t, err)
	require.Len(t, ans.Output.Rows, 3, "no more rows than max_rows")
	require.Equal(t, 3, ans.Output.RowCount)
	require.True(t, ans.Output.Truncated)
	require.Equal(t, "max_rows", ans.Output.TruncatedBy)

	ans, err = env.SQLiteQuery(ctx, &tool.SQLiteRequest{Database: "t.db", SQL: "SELECT x FROM t", MaxRows: 50, MaxBytes: 1024})
	require.NoError(t, err)
	require.Equal(t, "bytes", ans.Output.TruncatedBy)
	require.Less(t, len(ans.Output.Rows), 10)
	enc, err := json.Marshal(ans.Output)
	require.NoError(t, err)
	require.LessOrEqual(t, len(enc), 1024, "no more bytes than max_bytes")

	answer = tool.SQLiteAnswer{Error: strings.Repeat("e", 5000)}
	ans, err = env.SQLiteQuery(ctx, &tool.SQLiteRequest{Database: "t.db", SQL: "SELECT x FROM t", MaxRows: 3, MaxBytes: 1024})
	require.NoError(t, err)
	require.Less(t, len(ans.Error), 1024)
	require.Nil(t, ans.Output)

	// An answer within the limits is kept as it came.
	answer = tool.SQLiteAnswer{Output: &tool.SQLiteQueryOutput{Columns: []string{"x"}, Rows: rows[:2], RowCount: 2}}
	ans, err = env.SQLiteQuery(ctx, &tool.SQLiteRequest{Database: "t.db", SQL: "SELECT x FROM t", MaxRows: 3, MaxBytes: 4096})
	require.NoError(t, err)
	require.Equal(t, answer.Output.Rows, ans.Output.Rows)
	require.False(t, ans.Output.Truncated)
}

// TestConnectionEndedAtTheClaimWaitsForARunner: a runner whose connection
// ends between its answer to env.open and the server's env.claim closed
// what that connection opened, as when it ends during the open: Open
// fails with ErrUnavailable (the session waits for a runner), not with
// ErrLost, which the engine would take as a call lost mid-way and fail
// the turn as unable to set up its environment.
func TestConnectionEndedAtTheClaimWaitsForARunner(t *testing.T) {
	rg := newRig(t, environmenttest.NewBlobs(t), rigOptions{})
	handlers := liarEnvHandlers(nil)
	handlers[link.MethodEnvClaim] = func(c *link.Conn, ctx context.Context, _ *link.Request) (any, error) {
		c.Close("dropped at the claim")
		<-ctx.Done()
		return nil, ctx.Err()
	}
	dialLiar(t, rg, "dropper", handlers)
	b, err := remote.New(&remote.Config{Hub: rg.hub, Project: project, Runner: "dropper"})
	require.NoError(t, err)
	_, err = b.Open(t.Context(), &environment.OpenParams{Workspace: "ses_claim", Session: "ses_claim"})
	require.ErrorIs(t, err, environment.ErrUnavailable)
	require.NotErrorIs(t, err, environment.ErrLost)
}
