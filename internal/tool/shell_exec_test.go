//go:build linux

package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/tool"
)

// fakeExec records the request and answers with result, err, or (when
// block is set) waits for the context like a running command.
type fakeExec struct {
	got    *tool.ExecRequest
	result *tool.ExecResult
	err    error
	block  bool
	// started is closed when a blocking Run begins.
	started chan struct{}
}

func (f *fakeExec) Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error) {
	f.got = req
	if f.block {
		close(f.started)
		<-ctx.Done()
		return &tool.ExecResult{ExitCode: -1, Signal: "killed", Stdout: "partial"}, nil
	}
	return f.result, f.err
}

func TestShellRunsThroughExec(t *testing.T) {
	t.Parallel()
	ex := &fakeExec{result: &tool.ExecResult{ExitCode: -1, Stdout: "out", Stderr: "err", Truncated: true, Signal: "CPU time limit exceeded", Limit: "cpu"}}
	// The workspace need not exist on this side: the sandbox owns it.
	call := shellCall(t, filepath.Join(t.TempDir(), "elsewhere"), map[string]any{"command": "make all", "timeout_seconds": 7.0})
	call.MaxOutputBytes = 500
	call.Exec = ex
	res, err := (&tool.Shell{}).Run(t.Context(), call)
	require.NoError(t, err)
	require.Equal(t, &tool.ExecRequest{
		Command:        "make all",
		Env:            map[string]string{"LONGHAUL_SESSION_ID": "ses_test", "LONGHAUL_IDEMPOTENCY_KEY": "idem_test_1"},
		Timeout:        7 * time.Second,
		MaxOutputBytes: 500,
	}, ex.got)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.JSONEq(t, `{"output":{"exit_code":-1,"stdout":"out","stderr":"err","truncated":true,"timed_out":false,
		"signal":"CPU time limit exceeded","limit":"cpu"}}`, string(b))

	// The defaults reach the Exec when neither the arguments nor the call
	// say otherwise.
	call = shellCall(t, t.TempDir(), map[string]any{"command": "true"})
	call.Exec = ex
	_, err = (&tool.Shell{}).Run(t.Context(), call)
	require.NoError(t, err)
	require.Equal(t, tool.DefaultShellTimeout, ex.got.Timeout)
	require.Equal(t, tool.DefaultMaxOutputBytes, ex.got.MaxOutputBytes)
}

func TestShellExecTimeoutCancelAndError(t *testing.T) {
	t.Parallel()
	call := shellCall(t, t.TempDir(), map[string]any{"command": "sleep 100", "timeout_seconds": 5.0})
	call.Exec = &fakeExec{result: &tool.ExecResult{ExitCode: -1, Signal: "killed", TimedOut: true, Limit: "wall"}}
	res, err := (&tool.Shell{}).Run(t.Context(), call)
	require.NoError(t, err)
	require.Equal(t, "command timed out after 5s", res.Error)
	require.Equal(t, "wall", res.Output.(*tool.ShellOutput).Limit)

	ctx, cancel := context.WithCancel(t.Context())
	blocking := &fakeExec{block: true, started: make(chan struct{})}
	call.Exec = blocking
	done := make(chan *tool.Result, 1)
	go func() {
		res, err := (&tool.Shell{}).Run(ctx, call)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-blocking.started
	cancel()
	res = <-done
	require.Equal(t, "command cancelled: context canceled", res.Error)
	require.Equal(t, "partial", res.Output.(*tool.ShellOutput).Stdout)

	call.Exec = &fakeExec{err: errors.New("sandbox exec: workspace: gone")}
	_, err = (&tool.Shell{}).Run(t.Context(), call)
	require.ErrorContains(t, err, "run shell: sandbox exec: workspace: gone")

	// Cancelled before it starts: nothing reaches the Exec.
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	fe := &fakeExec{}
	call.Exec = fe
	_, err = (&tool.Shell{}).Run(ctx, call)
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, fe.got)
}

func TestShellThroughLocalSandbox(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	call := shellCall(t, ws, map[string]any{"command": `echo "$LONGHAUL_IDEMPOTENCY_KEY" > key; pwd`})
	call.Exec = sandbox.NewLocal().Exec(sandbox.Spec{SessionID: "ses_test", Workspace: ws})
	res, out := runShell(t, t.Context(), call)
	require.Empty(t, res.Error)
	require.Equal(t, ws+"\n", out.Stdout)
	got, err := os.ReadFile(filepath.Join(ws, "key"))
	require.NoError(t, err)
	require.Equal(t, "idem_test_1\n", string(got))
}
