package engine

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// TestCallWrites pins which built-ins let the next checkpoint be
// incremental: the file tools say what they write; any other tool may write
// anywhere, and a path the tools would refuse is not trusted either.
func TestCallWrites(t *testing.T) {
	byName := map[string]tool.Tool{}
	for _, b := range tool.Builtins() {
		byName[b.Name()] = b
	}
	for _, c := range []struct {
		tool, args string
		paths      []string
		known      bool
	}{
		{"write_file", `{"path":"a//b/../c.txt","content":"x"}`, []string{"a/c.txt"}, true},
		{"edit_file", `{"path":"./src/main.go","old":"a","new":"b"}`, []string{"src/main.go"}, true},
		{"read_file", `{"path":"a.txt"}`, nil, true},
		{"list_files", `{}`, nil, true},
		{"shell", `{"command":"true"}`, nil, false},
		{"sqlite_query", `{"path":"db.sqlite","sql":"delete from t"}`, nil, false},
		{"write_file", `{"path":"../outside","content":"x"}`, nil, false},
		{"write_file", `{"path":".","content":"x"}`, nil, false},
		{"write_file", `not json`, nil, false},
	} {
		b, ok := byName[c.tool]
		require.True(t, ok, c.tool)
		paths, known := callWrites(b, json.RawMessage(c.args))
		require.Equal(t, c.known, known, "%s %s", c.tool, c.args)
		require.Equal(t, c.paths, paths, "%s %s", c.tool, c.args)
	}
}
