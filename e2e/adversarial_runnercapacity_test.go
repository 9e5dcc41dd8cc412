package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
)

// TestAdversarialRunners_ServerPastCapacity: the attacker is the server
// side (a hostile or broken server node): it speaks the runner protocol by
// hand to the real `longhaul runner` binary, keeping no count of what it
// opened. The runner (capacity 1) refuses a second environment, a third
// one "opened to be stopped" (at most 2), and any command or write in such
// an environment: nothing runs and nothing is written on its machine.
func TestAdversarialRunners_ServerPastCapacity(t *testing.T) {
	t.Parallel()
	conns := make(chan *link.Conn, 1)
	over := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/runners/connect" {
			http.NotFound(w, r)
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var hello link.Hello
		if link.ReadJSON(ctx, ws, &hello) != nil || link.WriteJSON(ctx, ws, link.Welcome{ConnectionID: "rc_hostile", Node: "hostile"}) != nil {
			_ = ws.CloseNow()
			return
		}
		c := link.New(ws, nil)
		conns <- c
		select {
		case <-over:
			c.Close("the test is over")
		case <-c.Done():
		}
	}))
	t.Cleanup(func() { close(over); srv.Close() })
	box := startRunner(t, srv.URL, "any-key", "box1", "--capacity", "1")
	var c *link.Conn
	select {
	case c = <-conns:
	case <-time.After(30 * time.Second):
		t.Fatal("the runner never connected")
	}
	ctx := t.Context()
	open := func(id string, forStop bool) error {
		return c.Call(ctx, link.MethodEnvOpen, link.EnvOpenParams{EnvID: id, Workspace: "ses_" + id, Session: "ses_" + id, ForStop: forStop}, nil, nil)
	}
	refused := func(err error, code string) {
		t.Helper()
		var re *link.RemoteError
		require.ErrorAs(t, err, &re)
		require.Equal(t, code, re.Code, "%v", err)
	}

	require.NoError(t, open("e1", false))
	refused(open("e2", false), link.CodeFull)
	require.NoError(t, open("s1", true))
	require.NoError(t, open("s2", true))
	refused(open("s3", true), link.CodeFull)

	var out link.ExecResult
	refused(c.Call(ctx, link.MethodExec, link.ExecParams{Session: "ses_s1", EnvID: "s1", Command: "echo ran > ran.txt"}, &out, nil), link.CodeWorkspaceBusy)
	refused(c.Call(ctx, link.MethodFSWrite, link.FSWriteParams{EnvID: "s1", Path: "planted.txt", Data: []byte("x"), Last: true}, nil, nil), link.CodeWorkspaceBusy)
	for _, name := range []string{"ran.txt", "planted.txt"} {
		_, err := os.Stat(filepath.Join(box.data, "workspaces", "ses_s1", name))
		require.ErrorIs(t, err, os.ErrNotExist, "nothing reached the runner's machine")
	}
	for _, ws := range []string{"ses_e2", "ses_s3"} {
		_, err := os.Stat(filepath.Join(box.data, "workspaces", ws))
		require.ErrorIs(t, err, os.ErrNotExist, "a refused open makes no workspace")
	}
}
