package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// TestInEnvironment pins which built-ins leave the snapshot record to the
// session's Environment (it notes what they write): the file tools when
// the call has its Files, the shell when its programs run in it; any other
// tool, or a plain subprocess, may write anywhere, so the next checkpoint
// walks.
func TestInEnvironment(t *testing.T) {
	byName := map[string]tool.Tool{}
	for _, b := range tool.Builtins() {
		byName[b.Name()] = b
	}
	var files tool.Files = envFiles{}
	var exec tool.Exec = noExec{}
	for _, c := range []struct {
		tool string
		call tool.Call
		in   bool
	}{
		{"write_file", tool.Call{Files: files}, true},
		{"edit_file", tool.Call{Files: files}, true},
		{"read_file", tool.Call{Files: files}, true},
		{"list_files", tool.Call{Files: files}, true},
		{"write_file", tool.Call{}, false},
		{"shell", tool.Call{Exec: exec, Files: files}, true},
		{"shell", tool.Call{Files: files}, false},
		{"sqlite_query", tool.Call{Exec: exec, Files: files}, false},
	} {
		b, ok := byName[c.tool]
		require.True(t, ok, c.tool)
		require.Equal(t, c.in, inEnvironment(b, &c.call), "%s %+v", c.tool, c.call)
	}
}

// noExec is an Exec that runs nothing (inEnvironment only asks whether a
// call has one).
type noExec struct{}

func (noExec) Run(context.Context, *tool.ExecRequest) (*tool.ExecResult, error) {
	return nil, errors.New("not run")
}
