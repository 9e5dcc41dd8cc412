package journal

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestChangePending: a person's change is pending from its
// workspace.changed until a workspace.change_not_applied ends it, which a
// catch-up checks before journaling one (never twice for the same change).
func TestChangePending(t *testing.T) {
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	b.must(lt.EventWorkspaceChanged, "", lt.WorkspaceChange{By: lt.ChangedByPerson, Op: lt.WorkspaceWrite, Path: "a.md", SHA256: "ab", Size: 2, BasedOn: lt.BasedOnAbsent})
	seq := b.seq
	require.True(t, b.st.ChangePending(seq))
	require.False(t, b.st.ChangePending(seq+1), "no such change")
	b.must(lt.EventWorkspaceChangeNotApplied, "", lt.WorkspaceChangeNotAppliedData{ChangeSeq: seq, Op: lt.WorkspaceWrite, Path: "a.md", Reason: lt.NotAppliedConflict, BasedOn: lt.BasedOnAbsent, Found: "sha256:cd"})
	require.False(t, b.st.ChangePending(seq), "ended: not journaled again")
}
