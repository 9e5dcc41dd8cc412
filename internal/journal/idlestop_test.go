package journal

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestIdleStopAtFollowsTheParkedSession: a session parked with
// idle_stop_seconds is due for an idle stop that long after its last
// event; never while it is runnable, stopped, a sub-agent, or waiting for
// a runner; and once stopped, pinned to no runner until it is opened
// again.
func TestIdleStopAtFollowsTheParkedSession(t *testing.T) {
	t.Parallel()
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go", IdleStopSeconds: 60})
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	require.Nil(t, b.st.IdleStopAt(), "a queued session is runnable")
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	b.must(lt.EventEnvironmentOpened, "t1", lt.EnvironmentOpenedData{Runner: "box1", Provisioned: true})
	b.must(lt.EventCheckpointCreated, "t1", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "ck1", Kind: lt.CheckpointStep, Step: 1, Snapshot: "s1"}})
	b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: lt.Action{ID: "act_1", Type: lt.ActionInput, TurnID: "t1"}})
	require.Nil(t, b.st.IdleStopAt(), "still running: not parked yet")
	b.must(lt.EventSessionStatusChanged, "", lt.SessionStatusChangedData{From: lt.SessionRunning, To: lt.SessionRequiresAction})
	at := b.st.IdleStopAt()
	require.NotNil(t, at)
	require.Equal(t, b.st.Session.UpdatedAt.Add(time.Minute), *at)

	// A refused stop is tried again later, twice as late each time, up
	// to a week.
	b.must(lt.EventEnvironmentStopFailed, "t1", lt.EnvironmentStopFailedData{Reason: "idle", Error: "busy"})
	require.Equal(t, b.st.Session.UpdatedAt.Add(2*time.Minute), *b.st.IdleStopAt())
	b.must(lt.EventEnvironmentStopFailed, "t1", lt.EnvironmentStopFailedData{Reason: "idle", Error: "busy"})
	require.Equal(t, b.st.Session.UpdatedAt.Add(4*time.Minute), *b.st.IdleStopAt())
	for range 20 {
		b.must(lt.EventEnvironmentStopFailed, "t1", lt.EnvironmentStopFailedData{Reason: "idle", Error: "away"})
	}
	require.Equal(t, b.st.Session.UpdatedAt.Add(7*24*time.Hour), *b.st.IdleStopAt())

	b.must(lt.EventEnvironmentStopped, "t1", lt.EnvironmentStoppedData{Reason: "idle", Snapshot: "s2", Runner: "box1"})
	require.Nil(t, b.st.IdleStopAt(), "stopped: nothing left to stop")
	require.Zero(t, b.st.IdleStopFailures)
	require.True(t, b.st.EnvironmentStopped)
	require.Empty(t, b.st.EnvironmentRunner, "a stopped environment may be recreated on any matching runner")
	require.Equal(t, "s2", b.st.WorkspaceSnapshot())
	require.Equal(t, "s1", b.st.LastSnapshot, "the checkpoints' snapshot is untouched")

	b.must(lt.EventEnvironmentProvisioned, "t1", lt.EnvironmentProvisionedData{Runner: "box2"})
	b.must(lt.EventEnvironmentRestored, "t1", lt.EnvironmentRestoredData{Snapshot: "s2"})
	require.False(t, b.st.EnvironmentStopped)
	require.Equal(t, "s2", b.st.WorkspaceSnapshot(), "the recreated copy holds the stopped snapshot")
	b.must(lt.EventCheckpointCreated, "t1", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "ck2", Kind: lt.CheckpointStep, Step: 2, Snapshot: "s3"}})
	require.Equal(t, "s3", b.st.WorkspaceSnapshot(), "a checkpoint's snapshot supersedes it")

	// A stop's snapshot is the workspace's from the moment it is
	// journaled, stopped or not (its outcome may never come back), until
	// a tool changes the workspace or a checkpoint supersedes it.
	b.must(lt.EventEnvironmentStopping, "t1", lt.EnvironmentStoppingData{Reason: "idle", Snapshot: "s4", Runner: "box2"})
	require.Equal(t, "s4", b.st.WorkspaceSnapshot())
	require.False(t, b.st.EnvironmentStopped, "not stopped yet")
	b.must(lt.EventEnvironmentStopFailed, "t1", lt.EnvironmentStopFailedData{Reason: "idle", Error: "lost"})
	require.Equal(t, "s4", b.st.WorkspaceSnapshot())
	require.False(t, b.st.EnvironmentSnapshotPassed)
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 3, Position: 1, ToolCalls: []lt.ToolCall{{ID: "c9", Name: "shell"}}})
	b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 3, Index: 0, CallID: "c9", Tool: "shell", Kind: lt.CallBuiltin, Class: lt.EffectIdempotent, Arguments: json.RawMessage(`{}`)})
	b.must(lt.EventToolStarted, "t1", lt.ToolStartedData{Step: 3, Index: 0, CallID: "c9", Tool: "shell", EffectID: "e9", Class: lt.EffectIdempotent, Attempt: 1})
	require.True(t, b.st.EnvironmentSnapshotPassed, "written since the stop's snapshot")
	b.must(lt.EventCheckpointCreated, "t1", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "ck3", Kind: lt.CheckpointStep, Step: 3, Snapshot: "s5"}})
	require.Equal(t, "s5", b.st.WorkspaceSnapshot())
	require.False(t, b.st.EnvironmentSnapshotPassed)

	// Waiting for a runner: no environment to stop.
	b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: lt.Action{ID: "act_2", Type: lt.ActionEnvironmentConnection, TurnID: "t1"}})
	require.Nil(t, b.st.IdleStopAt())

	// A session a person paused is parked too: its environment is
	// stopped after the idle time (recreated after the resume).
	paused := &builder{t: t}
	paused.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go", IdleStopSeconds: 60})
	paused.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	paused.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	paused.must(lt.EventCheckpointCreated, "t1", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "ck1", Kind: lt.CheckpointStep, Step: 1, Snapshot: "s1"}})
	paused.must(lt.EventSessionPaused, "", lt.SessionPausedData{Reason: "lunch"})
	paused.must(lt.EventSessionStatusChanged, "", lt.SessionStatusChangedData{From: lt.SessionRunning, To: lt.SessionPaused})
	require.NotNil(t, paused.st.IdleStopAt())
	require.Equal(t, paused.st.Session.UpdatedAt.Add(time.Minute), *paused.st.IdleStopAt())

	// A session whose environment holds nothing yet (no tool changed it,
	// no checkpoint, never on a runner) has nothing to stop.
	fresh := &builder{t: t}
	fresh.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go", IdleStopSeconds: 60})
	fresh.must(lt.EventSessionStatusChanged, "", lt.SessionStatusChangedData{From: lt.SessionQueued, To: lt.SessionIdle})
	require.Nil(t, fresh.st.IdleStopAt())

	// A sub-agent never stops its root's workspace.
	sub := &builder{t: t}
	sub.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go", Workspace: "ses_root", IdleStopSeconds: 60})
	sub.must(lt.EventSessionStatusChanged, "", lt.SessionStatusChangedData{From: lt.SessionQueued, To: lt.SessionIdle})
	require.Nil(t, sub.st.IdleStopAt())
}

// TestChangesToApplyAfterAStopsSnapshot: a stop's snapshot holds the
// people's changes applied before it was taken
// (person_changes_through): a copy restored from it gets only the later
// ones again. Stopped at another snapshot (an untrusted copy), at none, or
// superseded by a checkpoint, nothing is known to be held but what the
// checkpoint's snapshot holds.
func TestChangesToApplyAfterAStopsSnapshot(t *testing.T) {
	t.Parallel()
	write := func(p string) lt.WorkspaceChange {
		return lt.WorkspaceChange{By: lt.ChangedByPerson, Op: lt.WorkspaceWrite, Path: p, SHA256: "ab"}
	}
	paths := func(cs []PersonChange) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Path)
		}
		return out
	}
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go", IdleStopSeconds: 60})
	b.must(lt.EventCheckpointCreated, "", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "ck1", Kind: lt.CheckpointStep, Step: 1, Snapshot: "s1"}})
	b.must(lt.EventWorkspaceChanged, "", write("x.txt"))
	held := b.seq
	b.must(lt.EventWorkspaceChanged, "", write("y.txt"))
	require.Equal(t, []string{"x.txt", "y.txt"}, paths(b.st.ChangesToApply()), "the checkpoint's snapshot holds none")

	b.must(lt.EventEnvironmentStopping, "", lt.EnvironmentStoppingData{Reason: "idle", Snapshot: "s2", PersonChangesThrough: held})
	require.Equal(t, []string{"y.txt"}, paths(b.st.ChangesToApply()), "s2 holds x.txt's change")
	b.must(lt.EventEnvironmentStopped, "", lt.EnvironmentStoppedData{Reason: "idle", Snapshot: "s2"})
	require.Equal(t, []string{"y.txt"}, paths(b.st.ChangesToApply()), "stopped at the stopping's snapshot")
	require.Len(t, b.st.PersonChanges, 2, "both stay journaled: s1 lacks them")
	b.must(lt.EventWorkspaceChanged, "", write("z.txt"))
	require.Equal(t, []string{"y.txt", "z.txt"}, paths(b.st.ChangesToApply()))

	b.must(lt.EventEnvironmentStopping, "", lt.EnvironmentStoppingData{Reason: "idle", Snapshot: "s3", PersonChangesThrough: b.seq})
	require.Empty(t, b.st.ChangesToApply(), "s3 holds them all")
	b.must(lt.EventEnvironmentStopped, "", lt.EnvironmentStoppedData{Reason: "idle"})
	require.Equal(t, "s1", b.st.WorkspaceSnapshot(), "an untrusted copy: restored as a lost one is")
	require.Equal(t, []string{"x.txt", "y.txt", "z.txt"}, paths(b.st.ChangesToApply()), "all of them, on the checkpoint's snapshot")

	b.must(lt.EventEnvironmentStopping, "", lt.EnvironmentStoppingData{Reason: "idle", Snapshot: "s4", PersonChangesThrough: b.seq})
	b.must(lt.EventCheckpointCreated, "", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "ck2", Kind: lt.CheckpointStep, Step: 2, Snapshot: "s5"}})
	require.Zero(t, b.st.EnvironmentSnapshotChanges)
	b.must(lt.EventWorkspaceChanged, "", write("w.txt"))
	require.Equal(t, []string{"w.txt"}, paths(b.st.ChangesToApply()))
}

// TestAChangeNotAppliedIsNeverAppliedAgain: a person's change found in
// conflict with the live file (workspace.change_not_applied) leaves the
// changes to apply, so that no later restore or catch-up applies it over
// what the agent wrote; the others stay, with what they were based on.
func TestAChangeNotAppliedIsNeverAppliedAgain(t *testing.T) {
	t.Parallel()
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	b.must(lt.EventWorkspaceChanged, "", lt.WorkspaceChange{By: lt.ChangedByPerson, Op: lt.WorkspaceWrite, Path: "x.txt", SHA256: "ab", BasedOn: "sha256:cd"})
	conflicting := b.seq
	b.must(lt.EventWorkspaceChanged, "", lt.WorkspaceChange{By: lt.ChangedByPerson, Op: lt.WorkspaceDelete, Path: "y.txt", BasedOn: "sha256:12"})
	b.must(lt.EventWorkspaceChangeNotApplied, "", lt.WorkspaceChangeNotAppliedData{ChangeSeq: conflicting, Op: lt.WorkspaceWrite, Path: "x.txt",
		Reason: lt.NotAppliedConflict, BasedOn: "sha256:cd", Found: "sha256:ef"})
	changes := b.st.ChangesToApply()
	require.Len(t, changes, 1)
	require.Equal(t, "y.txt", changes[0].Path)
	require.Equal(t, "sha256:12", changes[0].BasedOn)
}
