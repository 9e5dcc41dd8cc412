package engine

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestModelToldOfAChangeNotApplied: a person's change the model was told
// of, then not applied (workspace.change_not_applied), is taken back at
// its next call; one not told yet is never told.
func TestModelToldOfAChangeNotApplied(t *testing.T) {
	tr := newTranscript(&lt.AgentSpec{})
	ev := func(seq int64, typ string, data any) lt.Event {
		raw, err := json.Marshal(data)
		require.NoError(t, err)
		return lt.Event{Seq: seq, Type: typ, Data: raw}
	}
	tr.observe(ev(2, lt.EventWorkspaceChanged, lt.WorkspaceChange{By: lt.ChangedByPerson, Op: lt.WorkspaceWrite, Path: "a.txt", SHA256: "aa", BasedOn: lt.BasedOnAbsent}))
	m, ok := tr.changedMessage()
	require.True(t, ok)
	require.Contains(t, m.Text, "wrote a.txt")
	tr.observe(ev(3, lt.EventModelResponded, lt.ModelRespondedData{Text: "ok"}))
	_, ok = tr.changedMessage()
	require.False(t, ok, "told")

	tr.observe(ev(4, lt.EventWorkspaceChanged, lt.WorkspaceChange{By: lt.ChangedByPerson, Op: lt.WorkspaceDelete, Path: "b.txt", BasedOn: "sha256:bb"}))
	tr.observe(ev(5, lt.EventWorkspaceChangeNotApplied, lt.WorkspaceChangeNotAppliedData{ChangeSeq: 2, Op: lt.WorkspaceWrite, Path: "a.txt", Reason: lt.NotAppliedConflict}))
	tr.observe(ev(6, lt.EventWorkspaceChangeNotApplied, lt.WorkspaceChangeNotAppliedData{ChangeSeq: 4, Op: lt.WorkspaceDelete, Path: "b.txt", Reason: lt.NotAppliedConflict}))
	m, ok = tr.changedMessage()
	require.True(t, ok)
	require.Contains(t, m.Text, "not applied after all")
	require.Contains(t, m.Text, "write a.txt")
	require.NotContains(t, m.Text, "b.txt", "never told of, never taken back")
}
