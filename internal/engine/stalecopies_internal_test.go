package engine

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestRunLeavesItsCopyUnlooked: a session run here to its end, its
// environment not stopped, leaves its copy current; the notice of its last
// append, heard once the run let the workspace go, asks no look at the
// copy (a read of the session each). A later append's notice does, and
// one without a seq.
func TestRunLeavesItsCopyUnlooked(t *testing.T) {
	ctx := t.Context()
	e, st := unstartedEngine(t)
	s, lease := claimNewSession(t, e, st, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done"}]`)},
		Tools: []lt.ToolSpec{{Name: "list_files"}}})

	e.runSession(ctx, job{lease: lease})
	row, err := st.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, string(lt.SessionIdle), row.Status)
	require.DirExists(t, e.spaces.Path(s.ID), "the copy is kept for the next turn")

	e.copies.notice(s.ID, row.LastSeq)
	require.Empty(t, e.copies.take(), "the notice of the run's last append asks a look")
	// What the run left is forgotten at each take: recorded again.
	e.copies.left(s.ID, row.LastSeq)
	e.copies.notice(s.ID, 0)
	require.Equal(t, []string{s.ID}, e.copies.take(), "a notice without a seq asks none")
	e.copies.left(s.ID, row.LastSeq)
	e.copies.notice(s.ID, row.LastSeq+1)
	require.Equal(t, []string{s.ID}, e.copies.take(), "a later append's notice asks none")
}
