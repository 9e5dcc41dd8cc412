package journal

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestPersonChangesProjection: a person's changes are kept, in order, until
// a checkpoint with a snapshot (which holds them) clears them; the node
// that last changed the workspace is the one of the latest change, of a
// tool that is not read-only, or of a restore.
func TestPersonChangesProjection(t *testing.T) {
	b := started(t, lt.EffectRead)
	require.Empty(t, b.st.WorkspaceNode, "a read-only tool changes nothing")
	apply := func(typ, worker string, data any) {
		t.Helper()
		raw, err := json.Marshal(data)
		require.NoError(t, err)
		b.seq++
		require.NoError(t, Apply(&b.st, lt.Event{Seq: b.seq, Type: typ, Time: time.Unix(b.seq, 0).UTC(), SessionID: "ses_1", WorkerID: worker, Data: raw}, &b.ch))
	}
	apply(lt.EventWorkspaceChanged, "node-b", lt.WorkspaceChange{By: "person", Op: "write", Path: "a.txt", SHA256: "aa", Size: 1})
	apply(lt.EventWorkspaceChanged, "node-c", lt.WorkspaceChange{By: "person", Op: "delete", Path: "b.txt"})
	require.Equal(t, []PersonChange{{Seq: 7, Op: "write", Path: "a.txt", SHA256: "aa", Size: 1}, {Seq: 8, Op: "delete", Path: "b.txt"}}, b.st.PersonChanges)
	require.Equal(t, "node-c", b.st.WorkspaceNode)

	apply(lt.EventCheckpointCreated, "node-a", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "ckpt_1", SnapshotError: "too big"}})
	require.Len(t, b.st.PersonChanges, 2, "a checkpoint without a snapshot holds nothing")
	apply(lt.EventCheckpointCreated, "node-a", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "ckpt_2", Snapshot: "ss"}})
	require.Empty(t, b.st.PersonChanges)
	require.Equal(t, "ss", b.st.LastSnapshot)

	apply(lt.EventEnvironmentRestored, "node-d", lt.EnvironmentRestoredData{Snapshot: "ss"})
	require.Equal(t, "node-d", b.st.WorkspaceNode)
	apply(lt.EventToolStarted, "node-e", lt.ToolStartedData{Step: 1, Index: 0, CallID: "c1", Tool: "shell", EffectID: "e1", Class: lt.EffectIdempotent, Attempt: 2})
	require.Equal(t, "node-e", b.st.WorkspaceNode)
}
