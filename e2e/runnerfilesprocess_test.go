package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRunnerKeepsAProgramsWriteOverAPersonsChange runs the real binary as
// a server and a `longhaul runner`. The model writes x.txt and y.txt,
// checkpoints and waits; the runner is killed, and a person writes x.txt
// and deletes y.txt, each journaled with what the person saw. Before the
// changes are applied, a program on the runner's machine (a process of the
// environment, as an MCP server would) writes both files. The runner
// comes back with its workspace: the runner compares each change with what
// the person saw and makes it in one go, so neither is applied
// (workspace.change_not_applied, reason conflict, with what it found), the
// program's bytes are kept, and the model reads them.
func TestRunnerKeepsAProgramsWriteOverAPersonsChange(t *testing.T) {
	t.Parallel()
	a := parkedOnAKilledRunner(t, "lh-runner-program-bootstrap", "Keep a file.",
		[]map[string]any{shellOf("echo first > x.txt && echo y > y.txt")},
		[]map[string]any{{"name": "lookup", "arguments": map[string]any{}}},
		[]map[string]any{shellOf("cat x.txt y.txt")})
	ctx := t.Context()
	write, err := a.admin.PutFile(ctx, a.s.ID, "x.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	require.Equal(t, "sha256:"+sha256Of("first\n"), write.BasedOn)
	del, err := a.admin.DeleteFile(ctx, a.s.ID, "y.txt")
	require.NoError(t, err)
	require.Equal(t, "sha256:"+sha256Of("y\n"), del.BasedOn)

	// A program of the environment writes both files before the changes
	// are applied.
	ws := filepath.Join(a.r.data, "workspaces", a.s.ID)
	program := exec.CommandContext(ctx, "sh", "-c", "echo x-by-a-program > x.txt && echo y-by-a-program > y.txt")
	program.Dir = ws
	out, err := program.CombinedOutput()
	require.NoError(t, err, string(out))

	lastOutput, notApplied := a.resume(t)
	require.Equal(t, []lt.WorkspaceChangeNotAppliedData{
		{ChangeSeq: write.Seq, Op: lt.WorkspaceWrite, Path: "x.txt", Reason: lt.NotAppliedConflict,
			BasedOn: "sha256:" + sha256Of("first\n"), Found: "sha256:" + sha256Of("x-by-a-program\n")},
		{ChangeSeq: del.Seq, Op: lt.WorkspaceDelete, Path: "y.txt", Reason: lt.NotAppliedConflict,
			BasedOn: "sha256:" + sha256Of("y\n"), Found: "sha256:" + sha256Of("y-by-a-program\n")},
	}, notApplied)
	require.Contains(t, lastOutput, "x-by-a-program", "the program's x.txt is kept")
	require.Contains(t, lastOutput, "y-by-a-program", "the program's y.txt is not deleted")
	for name, want := range map[string]string{"x.txt": "x-by-a-program\n", "y.txt": "y-by-a-program\n"} {
		got, err := os.ReadFile(filepath.Join(ws, name))
		require.NoError(t, err)
		require.Equal(t, want, string(got), name)
	}
}
