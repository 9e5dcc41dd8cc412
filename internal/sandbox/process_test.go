package sandbox

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startBackends are the backends Start is checked on, with the working
// directory their programs see.
func startBackends(t *testing.T) map[string]struct {
	b   Backend
	dir func(ws string) string
} {
	out := map[string]struct {
		b   Backend
		dir func(ws string) string
	}{
		"local": {NewLocal(), func(ws string) string { return ws }},
	}
	if processGroupsSupported {
		out["bwrap"] = struct {
			b   Backend
			dir func(ws string) string
		}{testBwrap(t), func(string) string { return WorkspaceDir }}
	}
	return out
}

// TestStartTalksOverStdio: a started program runs in the workspace with the
// request's environment, reads what is written to its stdin and answers on
// its stdout for as long as it runs, and exits when its stdin is closed.
func TestStartTalksOverStdio(t *testing.T) {
	t.Parallel()
	for name, tc := range startBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			p, err := tc.b.Start(t.Context(), Spec{SessionID: "ses_test", Workspace: ws}, &StartRequest{
				Command: `pwd; echo "$GREETING"; echo started >&2; exec cat`,
				Env:     map[string]string{"GREETING": "hello"},
			})
			require.NoError(t, err)
			out := bufio.NewReader(p.Stdout())
			line := func() string {
				s, err := out.ReadString('\n')
				require.NoError(t, err)
				return strings.TrimSuffix(s, "\n")
			}
			require.Equal(t, tc.dir(ws), line())
			require.Equal(t, "hello", line())
			for _, msg := range []string{"one", "two"} {
				_, err = io.WriteString(p.Stdin(), msg+"\n")
				require.NoError(t, err)
				require.Equal(t, msg, line(), "the program answers while it runs")
			}
			require.Empty(t, p.Exit(), "still running")
			p.Stop(10 * time.Second)
			require.Equal(t, "exit status 0", p.Exit(), "cat ends at the end of its input")
			require.Contains(t, p.Stderr(), "started")
		})
	}
}

// TestStartStopKillsAProgramThatDoesNotExit: Stop kills a program that
// ignores the end of its input once the grace period is over, and whatever
// it started with it.
func TestStartStopKillsAProgramThatDoesNotExit(t *testing.T) {
	t.Parallel()
	for name, tc := range startBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			p, err := tc.b.Start(t.Context(), Spec{SessionID: "ses_test", Workspace: ws}, &StartRequest{
				Command: `sleep 600 & echo ready; wait`,
			})
			require.NoError(t, err)
			s, err := bufio.NewReader(p.Stdout()).ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "ready\n", s)
			start := time.Now()
			p.Stop(50 * time.Millisecond)
			require.Less(t, time.Since(start), 5*time.Second)
			require.Contains(t, p.Exit(), "kill")
			select {
			case <-p.Done():
			default:
				t.Fatal("Done is not closed after Stop")
			}
			p.Stop(time.Second) // again: a no-op
		})
	}
}

// TestStartProgramThatEnds: a program that exits by itself closes Done, says
// how it ended and keeps what it said on stderr; one that cannot be started
// is an error naming the field.
func TestStartProgramThatEnds(t *testing.T) {
	t.Parallel()
	for name, tc := range startBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			p, err := tc.b.Start(t.Context(), Spec{SessionID: "ses_test", Workspace: ws}, &StartRequest{
				Command: `echo "no such tool" >&2; exit 3`,
			})
			require.NoError(t, err)
			select {
			case <-p.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the program did not end")
			}
			require.Equal(t, "exit status 3", p.Exit())
			require.Contains(t, p.Stderr(), "no such tool")
			_, err = io.ReadAll(p.Stdout())
			require.NoError(t, err)

			_, err = tc.b.Start(t.Context(), Spec{SessionID: "ses_test", Workspace: ws}, &StartRequest{})
			require.ErrorContains(t, err, "request.command: is required")
			_, err = tc.b.Start(t.Context(), Spec{SessionID: "ses_test"}, &StartRequest{Command: "true"})
			require.ErrorContains(t, err, "spec.workspace: is required")
			_, err = tc.b.Start(t.Context(), Spec{SessionID: "ses_test", Workspace: ws}, &StartRequest{Command: "cat", MaxStderrBytes: -1})
			require.ErrorContains(t, err, "request.max_stderr_bytes")
		})
	}
}

// TestStartUnboundedAddressSpace: a program started with
// UnboundedAddressSpace has no RLIMIT_AS (a browser cannot start under
// one), and one started without it has the spec's; the other limits hold
// either way.
func TestStartUnboundedAddressSpace(t *testing.T) {
	t.Parallel()
	for name, tc := range startBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, unbounded := range []bool{false, true} {
				ws := t.TempDir()
				p, err := tc.b.Start(t.Context(), Spec{SessionID: "ses_test", Workspace: ws, Limits: Limits{MemoryBytes: 3 << 30, CPUSeconds: 77}},
					&StartRequest{Command: `ulimit -v; ulimit -t`, UnboundedAddressSpace: unbounded})
				require.NoError(t, err)
				out, err := io.ReadAll(p.Stdout())
				require.NoError(t, err)
				p.Stop(10 * time.Second)
				want := "3145728\n77\n"
				if unbounded {
					want = "unlimited\n77\n"
				}
				require.Equal(t, want, string(out), "unbounded=%v", unbounded)
			}
		})
	}
}
