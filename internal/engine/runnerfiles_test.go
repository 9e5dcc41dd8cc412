package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// newFilesRunnerHarness is newRunnerHarness for a person's file
// operations: the snapshots' owners are kept (a person's read of a
// snapshot checks its project owns it) and box1 is connected.
func newFilesRunnerHarness(t *testing.T) (*harness, *runnerBackend) {
	t.Helper()
	h, rb := newRunnerHarness(t)
	h.keepOwners = true
	h.restart("node-a")
	rb.connected.Store(true)
	return h, rb
}

// parkedOnRunner starts a session on box1 whose first step writes a.txt
// (checkpointed) and whose second waits for a function result; it returns
// the parked session and its workspace on the runner.
func parkedOnRunner(t *testing.T, h *harness) (*lt.Session, string) {
	t.Helper()
	sp := onGPU(spec(t, `[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo by-the-model > a.txt"}}]},
	  {"tool_calls":[{"name":"lookup","arguments":{}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"cat a.txt b.txt"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	require.NotEmpty(t, events(t, h, s.ID, lt.EventCheckpointCreated), "a.txt is in a checkpoint's snapshot")
	return s, filepath.Join(h.dir, "workspaces", s.ID)
}

func fileNames(l *lt.FileListing) []string {
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name)
	}
	return names
}

// TestRunnerFilesOfALostWorkspace: the runner of a parked session lost its
// workspace (it restarted with a fresh data directory). A person's read
// comes from the journal's snapshot and leaves no workspace behind on the
// runner; an empty workspace found there anyway (not made anew by this
// open) is not the session's either: reads come from the snapshot, a
// person's write is only journaled, and the session's next claim restores
// the snapshot before applying it, so the model finds both its own file
// and the person's.
func TestRunnerFilesOfALostWorkspace(t *testing.T) {
	h, _ := newFilesRunnerHarness(t)
	ctx := context.Background()
	s, ws := parkedOnRunner(t, h)

	l, err := h.eng.ListFiles(ctx, s.ID, "")
	require.NoError(t, err)
	require.Equal(t, lt.FilesFromEnvironment, l.Source, "the runner's workspace holds the journal's snapshot")

	require.NoError(t, os.RemoveAll(ws))
	l, err = h.eng.ListFiles(ctx, s.ID, "")
	require.NoError(t, err)
	require.Equal(t, lt.FilesFromSnapshot, l.Source)
	require.Contains(t, fileNames(l), "a.txt")
	require.NoDirExists(t, ws, "a person's read leaves no new workspace on the runner")

	require.NoError(t, os.MkdirAll(ws, 0o755), "an empty workspace on the runner all the same")
	l, err = h.eng.ListFiles(ctx, s.ID, "")
	require.NoError(t, err)
	require.Equal(t, lt.FilesFromSnapshot, l.Source, "the empty copy is not the session's")
	require.Contains(t, fileNames(l), "a.txt")
	fe, rc, err := h.eng.OpenFile(ctx, s.ID, "a.txt")
	require.NoError(t, err)
	body, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, lt.FilesFromSnapshot, fe.Source)
	require.Equal(t, "by-the-model\n", string(body))

	_, err = h.eng.WriteFile(ctx, s.ID, "b.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(ws, "b.txt"), "journaled, not applied to a copy that is not the session's")

	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	out := lastToolOutput(t, h, s.ID)
	require.Contains(t, out, "by-the-model", "the snapshot was restored")
	require.Contains(t, out, "by-a-person", "the person's write applied after it")
	checkJournal(t, h.store, s.ID)
}

// movingJournal is the engine's store where the journal of a session
// moves under the first appends of a person's change (ErrConflict, as
// when another write lands first); it notes how many of the runner's
// environments are open at each of them.
type movingJournal struct {
	store.Store
	rb        *runnerBackend
	conflicts atomic.Int32
	maxLive   atomic.Int32
}

func (s *movingJournal) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	if len(p.Events) > 0 && p.Events[0].Type == lt.EventWorkspaceChanged {
		if n := s.rb.live.Load(); n > s.maxLive.Load() {
			s.maxLive.Store(n)
		}
		if s.conflicts.Add(-1) >= 0 {
			return nil, store.ErrConflict
		}
	}
	return s.Store.EventAppend(ctx, p)
}

// TestRunnerFileWriteRetriesHoldOneEnvironment: a person's write retried
// because the journal moved opens the runner's environment again for each
// attempt, and closes the one before: never more than one of the runner's
// slots is held, and none once the write returns.
func TestRunnerFileWriteRetriesHoldOneEnvironment(t *testing.T) {
	h, rb := newRunnerHarness(t)
	moving := &movingJournal{rb: rb}
	h.wrapStore = func(s store.Store) store.Store {
		moving.Store = s
		return moving
	}
	h.restart("node-a")
	rb.connected.Store(true)
	ctx := context.Background()
	s, ws := parkedOnRunner(t, h)
	// The session's own environment is closed once its claim ends, just
	// after the park is journaled: counted before that, it would be
	// taken for one the person's write holds.
	require.Eventually(t, func() bool { return rb.live.Load() == 0 }, 10*time.Second, time.Millisecond, "a parked session holds no environment")
	idle := rb.live.Load()

	moving.conflicts.Store(5)
	_, err := h.eng.WriteFile(ctx, s.ID, "b.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	require.Less(t, moving.conflicts.Load(), int32(0), "the write was tried again after each conflict")
	require.Equal(t, idle+1, moving.maxLive.Load(), "one environment for the person's write at a time")
	require.Equal(t, idle, rb.live.Load(), "none left open once it returned")
	require.FileExists(t, filepath.Join(ws, "b.txt"), "applied to the runner's workspace, which holds the journal's snapshot")
}

// TestRunnerFileWriteThroughAnotherNodeIsRefused: the runner holding a
// parked session's workspace is connected to another node. A read through
// this node comes from the journal's snapshot; a write or a delete is a
// 409 that says to send it again (so that it reaches the runner's node),
// and journals nothing: checked against the snapshot, it would miss what
// the agent wrote since, and applied later it would overwrite it.
func TestRunnerFileWriteThroughAnotherNodeIsRefused(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	s, ws := parkedOnRunner(t, h)
	before := len(events(t, h, s.ID, lt.EventWorkspaceChanged))

	rb.elsewhere.Store(true)
	l, err := h.eng.ListFiles(ctx, s.ID, "")
	require.NoError(t, err)
	require.Equal(t, lt.FilesFromSnapshot, l.Source, "a read is served from the snapshot")
	for name, change := range map[string]func() error{
		"write": func() error {
			_, err := h.eng.WriteFile(ctx, s.ID, "a.txt", []byte("by-a-person\n"), "")
			return err
		},
		"delete": func() error {
			_, err := h.eng.DeleteFile(ctx, s.ID, "a.txt")
			return err
		},
	} {
		err := change()
		var ae *apierror.Error
		require.ErrorAs(t, err, &ae, name)
		require.Equal(t, http.StatusConflict, ae.Status, name)
		require.Contains(t, ae.Message, "connected to another node", name)
		require.Contains(t, ae.Message, "Send the change again", name)
	}
	require.Len(t, events(t, h, s.ID, lt.EventWorkspaceChanged), before, "nothing journaled")
	got, err := os.ReadFile(filepath.Join(ws, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "by-the-model\n", string(got), "the runner's file is untouched")

	rb.elsewhere.Store(false) // the request reached the runner's node
	_, err = h.eng.WriteFile(ctx, s.ID, "a.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	got, err = os.ReadFile(filepath.Join(ws, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "by-a-person\n", string(got), "applied to the runner's workspace at once")
}

// parkedWithBigFile starts a session on box1 with a quota of 1 MiB
// (environment.disk_mb) whose first step writes size bytes to big.bin
// (checkpointed) and whose second waits for a function result.
func parkedWithBigFile(t *testing.T, h *harness, size int) *lt.Session {
	t.Helper()
	sp := onGPU(spec(t, fmt.Sprintf(`[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"head -c %d /dev/zero > big.bin"}}]},
	  {"tool_calls":[{"name":"lookup","arguments":{}}]},
	  {"text":"done"}]`, size), lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	sp.Environment.DiskMB = 1
	s := create(t, h, sp, nil)
	return h.waitStatus(s.ID, lt.SessionRequiresAction)
}

// TestRunnerFileWriteOverQuotaIsRefused: a person's write that would take
// the runner's workspace over its disk quota (environment.disk_mb) is a
// 413 before anything is journaled: the runner's workspace, reached
// live, answers with its usage; out of reach, a write larger than the
// whole quota is refused all the same (and one that overflows the
// snapshot view's usage: TestRunnerFileWriteOutOfReachCountsTheSnapshotView).
func TestRunnerFileWriteOverQuotaIsRefused(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	s := parkedWithBigFile(t, h, 700000)
	before := len(events(t, h, s.ID, lt.EventWorkspaceChanged))

	tooLarge := func(err error, what string) {
		t.Helper()
		var ae *apierror.Error
		require.ErrorAs(t, err, &ae, what)
		require.Equal(t, http.StatusRequestEntityTooLarge, ae.Status, what)
		require.Contains(t, ae.Message, "disk quota", what)
		require.Contains(t, ae.Message, `"notes.bin"`, what)
	}
	_, err := h.eng.WriteFile(ctx, s.ID, "notes.bin", make([]byte, 500_000), "")
	tooLarge(err, "the runner's workspace holds 700 kB of its 1 MiB")
	_, err = h.eng.WriteFile(ctx, s.ID, "notes.bin", []byte("fits"), "")
	require.NoError(t, err, "a write that fits")

	rb.connected.Store(false)
	_, err = h.eng.WriteFile(ctx, s.ID, "notes.bin", make([]byte, 2<<20), "")
	tooLarge(err, "out of reach, larger than the whole quota")
	require.Len(t, events(t, h, s.ID, lt.EventWorkspaceChanged), before+1, "only the write that fits is journaled")
}

// readRunnerFile downloads path of session id, returning its entry and
// bytes.
func readRunnerFile(t *testing.T, h *harness, id, path string) (*lt.FileEntry, string) {
	t.Helper()
	fe, rc, err := h.eng.OpenFile(context.Background(), id, path)
	require.NoError(t, err)
	body, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	return fe, string(body)
}

// named is the entry of l called name.
func named(t *testing.T, l *lt.FileListing, name string) lt.FileEntry {
	t.Helper()
	for _, e := range l.Entries {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no %s in the listing of %q", name, l.Path)
	return lt.FileEntry{}
}

// TestRunnerFilesLiveAndFromTheSnapshot: a person's listing and download
// of a session on a runner read the runner's workspace while this node
// reaches it (source environment, digests of its bytes); with the runner
// away they read the journal's snapshot with the people's changes since
// laid over it: a write shows its bytes, a delete hides the file, a
// directory only a change made is listed, a symlink is described and not
// followed, and If-Match is checked against that view.
func TestRunnerFilesLiveAndFromTheSnapshot(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	sp := onGPU(spec(t, `[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"mkdir d && echo by-the-model > a.txt && echo kept > d/k.txt && ln -s a.txt link"}}]},
	  {"tool_calls":[{"name":"lookup","arguments":{}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	s := create(t, h, sp, nil)
	h.waitStatus(s.ID, lt.SessionRequiresAction)

	l, err := h.eng.ListFiles(ctx, s.ID, "")
	require.NoError(t, err)
	require.Equal(t, lt.FilesFromEnvironment, l.Source)
	require.Empty(t, l.Snapshot)
	require.Subset(t, fileNames(l), []string{"a.txt", "d", "link"})
	require.Equal(t, sum256("by-the-model\n"), named(t, l, "a.txt").SHA256, "the runner's bytes")
	require.Equal(t, lt.FileTypeSymlink, named(t, l, "link").Type)
	require.Equal(t, "a.txt", named(t, l, "link").Target)
	fe, body := readRunnerFile(t, h, s.ID, "d/k.txt")
	require.Equal(t, lt.FilesFromEnvironment, fe.Source)
	require.Equal(t, "kept\n", body)

	rb.connected.Store(false)
	_, err = h.eng.WriteFile(ctx, s.ID, "new/n.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	_, err = h.eng.DeleteFile(ctx, s.ID, "d/k.txt")
	require.NoError(t, err)
	_, err = h.eng.WriteFileIfMatch(ctx, s.ID, "a.txt", []byte("edited\n"), "", `"`+sum256("not what it holds")+`"`)
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "If-Match", ae.Field, "checked against the snapshot's a.txt")
	_, err = h.eng.WriteFileIfMatch(ctx, s.ID, "a.txt", []byte("edited\n"), "", `"`+sum256("by-the-model\n")+`"`)
	require.NoError(t, err)

	l, err = h.eng.ListFiles(ctx, s.ID, "")
	require.NoError(t, err)
	require.Equal(t, lt.FilesFromSnapshot, l.Source)
	require.NotEmpty(t, l.Snapshot)
	require.Subset(t, fileNames(l), []string{"a.txt", "d", "link", "new"}, "a directory only a change made is listed")
	require.Equal(t, sum256("edited\n"), named(t, l, "a.txt").SHA256, "the person's write laid over the snapshot")
	l, err = h.eng.ListFiles(ctx, s.ID, "d")
	require.NoError(t, err)
	require.Empty(t, fileNames(l), "the person's delete hides d/k.txt")
	_, _, err = h.eng.OpenFile(ctx, s.ID, "d/k.txt")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status)
	fe, body = readRunnerFile(t, h, s.ID, "new/n.txt")
	require.Equal(t, lt.FilesFromSnapshot, fe.Source)
	require.Equal(t, "by-a-person\n", body)
	_, _, err = h.eng.OpenFile(ctx, s.ID, "link")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "path", ae.Field, "a snapshot's symlink is not followed")
	require.Len(t, events(t, h, s.ID, lt.EventWorkspaceChanged), 3, "journaled for the session's next claim")
}

// TestRunnerChangeFromTheSnapshotKeepsTheModelsEdits: with the runner
// out of reach, a person's changes are checked against the journal's
// snapshot, while the runner still holds a workspace the agent wrote
// since (here: files changed after the last checkpoint's snapshot). When
// the session's next claim applies them, those whose path no longer holds
// what the person saw (a write over a file the agent changed, a write of
// a file the person saw absent and the agent made, a delete of a file
// the agent changed) are not applied: journaled as
// workspace.change_not_applied with both hashes, gone from the snapshot
// view, and the agent's files are kept. A change on a path the agent left
// alone is applied.
func TestRunnerChangeFromTheSnapshotKeepsTheModelsEdits(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	sp := onGPU(spec(t, `[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo by-the-model > a.txt && echo kept > k.txt && echo same > s.txt"}}]},
	  {"tool_calls":[{"name":"lookup","arguments":{}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"cat a.txt b.txt k.txt s.txt c.txt"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	// What the agent wrote after the journal's snapshot, still on the
	// runner.
	for name, body := range map[string]string{"a.txt": "by-the-model-later\n", "b.txt": "made-by-the-model\n", "k.txt": "kept-later\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644))
	}

	rb.connected.Store(false)
	changes := map[string]*lt.WorkspaceChange{}
	for _, name := range []string{"a.txt", "b.txt", "s.txt", "c.txt"} {
		c, err := h.eng.WriteFile(ctx, s.ID, name, []byte("by-a-person\n"), "")
		require.NoError(t, err, name)
		changes[name] = c
	}
	c, err := h.eng.DeleteFile(ctx, s.ID, "k.txt")
	require.NoError(t, err)
	changes["k.txt"] = c
	require.Equal(t, "sha256:"+sum256("by-the-model\n"), changes["a.txt"].BasedOn, "based on the snapshot's a.txt")
	require.Equal(t, lt.BasedOnAbsent, changes["b.txt"].BasedOn, "b.txt is in no snapshot")
	require.Equal(t, "sha256:"+sum256("kept\n"), changes["k.txt"].BasedOn)

	rb.connected.Store(true)
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	out := lastToolOutput(t, h, s.ID)
	require.Contains(t, out, "by-the-model-later", "the agent's a.txt is kept")
	require.Contains(t, out, "made-by-the-model", "the agent's b.txt is kept")
	require.Contains(t, out, "kept-later", "the agent's k.txt is not deleted")
	require.NotContains(t, out, "No such file", "c.txt, s.txt written; nothing deleted")
	got, err := os.ReadFile(filepath.Join(ws, "s.txt"))
	require.NoError(t, err)
	require.Equal(t, "by-a-person\n", string(got), "a file the agent left alone gets the person's write")
	got, err = os.ReadFile(filepath.Join(ws, "c.txt"))
	require.NoError(t, err)
	require.Equal(t, "by-a-person\n", string(got), "a new file on a path the agent left alone")

	notApplied := map[string]lt.WorkspaceChangeNotAppliedData{}
	for _, ev := range events(t, h, s.ID, lt.EventWorkspaceChangeNotApplied) {
		var d lt.WorkspaceChangeNotAppliedData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		notApplied[d.Path] = d
	}
	require.Len(t, notApplied, 3)
	require.Equal(t, lt.WorkspaceChangeNotAppliedData{ChangeSeq: changes["a.txt"].Seq, Op: lt.WorkspaceWrite, Path: "a.txt", Reason: lt.NotAppliedConflict,
		BasedOn: "sha256:" + sum256("by-the-model\n"), Found: "sha256:" + sum256("by-the-model-later\n")}, notApplied["a.txt"])
	require.Equal(t, lt.BasedOnAbsent, notApplied["b.txt"].BasedOn)
	require.Equal(t, "sha256:"+sum256("made-by-the-model\n"), notApplied["b.txt"].Found)
	require.Equal(t, lt.WorkspaceDelete, notApplied["k.txt"].Op)
	require.Equal(t, "sha256:"+sum256("kept-later\n"), notApplied["k.txt"].Found)
	checkJournal(t, h.store, s.ID)

	// Never applied again: with the runner away, the snapshot view (the
	// turn's checkpoint) shows the agent's files.
	rb.connected.Store(false)
	_, body := readRunnerFile(t, h, s.ID, "a.txt")
	require.Equal(t, "by-the-model-later\n", body)
	_, body = readRunnerFile(t, h, s.ID, "k.txt")
	require.Equal(t, "kept-later\n", body)
}

// TestRunnerChangeAwayThenLiveAppliesBoth: a person's change journaled
// while the runner was away is not on the runner when it comes back; a
// second change made then must not be applied live over it (its marker
// would say the workspace holds both, and the claim would never apply the
// first). It is made against the snapshot view too, and the claim applies
// both, in order.
func TestRunnerChangeAwayThenLiveAppliesBoth(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	sp := onGPU(spec(t, `[
	  {"tool_calls":[{"name":"lookup","arguments":{}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"cat first.txt second.txt"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	ws := filepath.Join(h.dir, "workspaces", s.ID)

	rb.connected.Store(false)
	first, err := h.eng.WriteFile(ctx, s.ID, "first.txt", []byte("one\n"), "")
	require.NoError(t, err)
	require.Equal(t, lt.BasedOnAbsent, first.BasedOn, "checked against the snapshot view")
	rb.connected.Store(true)
	second, err := h.eng.WriteFile(ctx, s.ID, "second.txt", []byte("two\n"), "")
	require.NoError(t, err)
	require.NotEmpty(t, second.BasedOn, "the runner lacks the first change: checked against the snapshot view, not applied live")
	_, err = os.Stat(filepath.Join(ws, "second.txt"))
	require.ErrorIs(t, err, fs.ErrNotExist, "not applied live over a workspace that lacks the first change")

	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	out := lastToolOutput(t, h, s.ID)
	require.Contains(t, out, "one", "the change made while the runner was away is applied")
	require.Contains(t, out, "two")
	require.Empty(t, events(t, h, s.ID, lt.EventWorkspaceChangeNotApplied))
	checkJournal(t, h.store, s.ID)
}

// TestRunnerCatchUpChecksTheLastChangesMarker: the claim's catch-up of a
// change made while the runner was away takes the runner at its word
// that it applied it only if the runner then holds the change's marker.
// One that answers it applied the change but does not keep the marker
// (as a runner that lost it would) lacks what the journal says: its
// workspace is restored from the snapshot, the change applied again on
// it, and the model finds both its own file and the person's.
func TestRunnerCatchUpChecksTheLastChangesMarker(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	s, _ := parkedOnRunner(t, h)

	rb.connected.Store(false)
	w, err := h.eng.WriteFile(ctx, s.ID, "b.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	require.Equal(t, lt.BasedOnAbsent, w.BasedOn, "journaled while the runner was away")
	rb.connected.Store(true)
	rb.dropMarker.Store(true)

	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.False(t, rb.dropMarker.Load(), "the catch-up recorded the change's marker")
	lost := events(t, h, s.ID, lt.EventEnvironmentLost)
	require.Len(t, lost, 1, "the marker not held after the catch-up: the workspace is restored")
	require.Contains(t, data[lt.EnvironmentLostData](t, lost[0]).Reason, "does not hold what the journal says")
	require.Len(t, events(t, h, s.ID, lt.EventEnvironmentRestored), 1)
	out := lastToolOutput(t, h, s.ID)
	require.Contains(t, out, "by-the-model")
	require.Contains(t, out, "by-a-person")
	require.Empty(t, events(t, h, s.ID, lt.EventWorkspaceChangeNotApplied))
	checkJournal(t, h.store, s.ID)
}

// TestRunnerChangeTheAgentMadeTooIsNoConflict: a change made from the
// snapshot view whose result the agent made too (it deleted the same
// file, or wrote the same bytes) overwrites nothing: it is applied, not
// reported as a conflict.
func TestRunnerChangeTheAgentMadeTooIsNoConflict(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	sp := onGPU(spec(t, `[
	  {"tool_calls":[{"name":"shell","arguments":{"command":"echo x > x.txt"}}]},
	  {"tool_calls":[{"name":"lookup","arguments":{}}]},
	  {"tool_calls":[{"name":"shell","arguments":{"command":"ls; cat y.txt"}}]},
	  {"text":"done"}]`, lt.ToolSpec{Name: "shell"}, lt.ToolSpec{Name: "lookup", Type: "function"}))
	s := create(t, h, sp, nil)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	require.NoError(t, os.Remove(filepath.Join(ws, "x.txt")))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "y.txt"), []byte("same\n"), 0o644))

	rb.connected.Store(false)
	del, err := h.eng.DeleteFile(ctx, s.ID, "x.txt")
	require.NoError(t, err)
	require.Equal(t, "sha256:"+sum256("x\n"), del.BasedOn)
	w, err := h.eng.WriteFile(ctx, s.ID, "y.txt", []byte("same\n"), "")
	require.NoError(t, err)
	require.Equal(t, lt.BasedOnAbsent, w.BasedOn)
	rb.connected.Store(true)

	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	out := lastToolOutput(t, h, s.ID)
	require.NotContains(t, out, "x.txt")
	require.Contains(t, out, "same")
	require.Empty(t, events(t, h, s.ID, lt.EventWorkspaceChangeNotApplied), "nothing the agent wrote was in the way")
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost), "the runner holds both changes' markers: no restore")
	checkJournal(t, h.store, s.ID)
}

// TestRunnerChangeThatNoLongerFitsIsNotApplied: a change journaled while
// the runner was away fitted the quota as the snapshot view showed it,
// but the agent filled the workspace since: applying it at the claim fails
// on the quota, and would fail again at every claim. It is journaled as
// not applied ("failed", saying why), the workspace is not restored (the
// agent's file stays), the model is told, and the turn goes on.
func TestRunnerChangeThatNoLongerFitsIsNotApplied(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	s := parkedWithBigFile(t, h, 500000)
	ws := filepath.Join(h.dir, "workspaces", s.ID)
	// What the agent wrote after the journal's snapshot, which the
	// estimate cannot see.
	require.NoError(t, os.WriteFile(filepath.Join(ws, "later.bin"), make([]byte, 300000), 0o644))

	rb.connected.Store(false)
	c, err := h.eng.WriteFile(ctx, s.ID, "person.bin", make([]byte, 300000), "")
	require.NoError(t, err, "500 kB + 300 kB fit in 1 MiB as the snapshot view shows it")
	rb.connected.Store(true)
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)

	evs := events(t, h, s.ID, lt.EventWorkspaceChangeNotApplied)
	require.Len(t, evs, 1)
	var d lt.WorkspaceChangeNotAppliedData
	require.NoError(t, json.Unmarshal(evs[0].Data, &d))
	require.Equal(t, c.Seq, d.ChangeSeq)
	require.Equal(t, lt.NotAppliedFailed, d.Reason)
	require.Contains(t, d.Error, "environment.disk_mb")
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost), "the workspace is not restored over the agent's file")
	_, err = os.Stat(filepath.Join(ws, "later.bin"))
	require.NoError(t, err, "the agent's file stays")
	checkJournal(t, h.store, s.ID)
}

// TestRunnerFileWriteOutOfReachCountsTheSnapshotView: with the runner out
// of reach, a person's write is checked against the quota
// (environment.disk_mb) with the usage the snapshot view shows: the last
// snapshot's files and the people's changes since. A write that fits alone
// but not with them is a 413 before anything is journaled; a pending
// delete frees its file's bytes.
func TestRunnerFileWriteOutOfReachCountsTheSnapshotView(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	s := parkedWithBigFile(t, h, 600000)
	before := len(events(t, h, s.ID, lt.EventWorkspaceChanged))

	rb.connected.Store(false)
	_, err := h.eng.WriteFile(ctx, s.ID, "a.bin", make([]byte, 300_000), "")
	require.NoError(t, err, "600 kB + 300 kB fit in 1 MiB")
	_, err = h.eng.WriteFile(ctx, s.ID, "b.bin", make([]byte, 300_000), "")
	var ae *apierror.Error
	require.ErrorAs(t, err, &ae, "600 kB + 300 kB pending + 300 kB do not")
	require.Equal(t, http.StatusRequestEntityTooLarge, ae.Status)
	require.Contains(t, ae.Message, "environment.disk_mb")
	require.Contains(t, ae.Message, `"b.bin"`)
	require.Len(t, events(t, h, s.ID, lt.EventWorkspaceChanged), before+1, "the refused write is not journaled")

	_, err = h.eng.DeleteFile(ctx, s.ID, "big.bin")
	require.NoError(t, err)
	_, err = h.eng.WriteFile(ctx, s.ID, "b.bin", make([]byte, 300_000), "")
	require.NoError(t, err, "the pending delete of big.bin freed its bytes")
}

// TestRunnerLiveChangeKeepsAProgramsWrite: a person's change checked
// against the runner's live workspace is applied at once, but a program
// of the environment (an MCP server, a sub-agent) writes the file between
// the check and the apply. The change is compared with what the person saw
// and made in one go on the runner: it is not applied (reason conflict,
// journaled at once), the program's bytes are kept, and the session's
// next claim does not apply it either.
func TestRunnerLiveChangeKeepsAProgramsWrite(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	s, ws := parkedOnRunner(t, h)
	program := func(body string) {
		f := func(rel string) error { return os.WriteFile(filepath.Join(ws, rel), []byte(body), 0o644) }
		rb.beforeChange.Store(&f)
	}

	program("by-a-program\n")
	w, err := h.eng.WriteFile(ctx, s.ID, "a.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	require.Equal(t, "sha256:"+sum256("by-the-model\n"), w.BasedOn, "what the person saw, live")
	program("by-a-program-again\n")
	del, err := h.eng.DeleteFile(ctx, s.ID, "a.txt")
	require.NoError(t, err)
	require.Equal(t, "sha256:"+sum256("by-a-program\n"), del.BasedOn)
	rb.beforeChange.Store(nil)

	got, err := os.ReadFile(filepath.Join(ws, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "by-a-program-again\n", string(got), "the program's bytes are kept")
	require.Equal(t, []lt.WorkspaceChangeNotAppliedData{
		{ChangeSeq: w.Seq, Op: lt.WorkspaceWrite, Path: "a.txt", Reason: lt.NotAppliedConflict,
			BasedOn: "sha256:" + sum256("by-the-model\n"), Found: "sha256:" + sum256("by-a-program\n")},
		{ChangeSeq: del.Seq, Op: lt.WorkspaceDelete, Path: "a.txt", Reason: lt.NotAppliedConflict,
			BasedOn: "sha256:" + sum256("by-a-program\n"), Found: "sha256:" + sum256("by-a-program-again\n")},
	}, notAppliedOf(t, h, s.ID), "journaled at once, by the node that reached the runner")

	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	out := lastToolOutput(t, h, s.ID)
	require.Contains(t, out, "by-a-program-again", "the claim applies neither change")
	require.NotContains(t, out, "by-a-person")
	require.Len(t, events(t, h, s.ID, lt.EventWorkspaceChangeNotApplied), 2, "judged once each")
	checkJournal(t, h.store, s.ID)
}

// TestRunnerFileWriteCountsTheDirectoriesItMakes: the up-front quota
// check of a person's write counts the parent directories the write makes
// (each at least sandbox.MinEntryBytes, as the runner's quota counts
// them), with the runner out of reach (the snapshot view) and reached
// (its own count of the workspace). A file in ten new directories that
// fits alone does not fit with them: a 413 before anything is journaled.
func TestRunnerFileWriteCountsTheDirectoriesItMakes(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	ctx := context.Background()
	const deep = "d1/d2/d3/d4/d5/d6/d7/d8/d9/d10/x.txt"
	for _, away := range []bool{true, false} {
		// About 40 kB left of the 1 MiB quota: one small file (4 KiB as
		// counted) fits, 11 entries (45 KiB) do not.
		rb.connected.Store(true)
		s := parkedWithBigFile(t, h, 1<<20-40_000)
		rb.connected.Store(!away)
		before := len(events(t, h, s.ID, lt.EventWorkspaceChanged))
		_, err := h.eng.WriteFile(ctx, s.ID, "y.txt", []byte("small"), "")
		require.NoError(t, err, "away %v: a file without new directories fits", away)
		_, err = h.eng.WriteFile(ctx, s.ID, deep, []byte("small"), "")
		var ae *apierror.Error
		require.ErrorAs(t, err, &ae, "away %v: the ten directories do not fit", away)
		require.Equal(t, http.StatusRequestEntityTooLarge, ae.Status)
		require.Len(t, events(t, h, s.ID, lt.EventWorkspaceChanged), before+1, "the refused write is not journaled")
	}
}

// changeAwayThenClaim journals a person's write of b.txt while the runner
// is away, sets fail to answer the runner's apply of it, and lets the
// session's claim catch up; it returns the change.
func changeAwayThenClaim(t *testing.T, h *harness, rb *runnerBackend, s *lt.Session, fail func(rel string) error) *lt.WorkspaceChange {
	t.Helper()
	ctx := context.Background()
	rb.connected.Store(false)
	c, err := h.eng.WriteFile(ctx, s.ID, "b.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	rb.beforeChange.Store(&fail)
	rb.connected.Store(true)
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	return c
}

// TestRunnerCatchUpThatFailsForNowWaits: the runner cannot apply a
// person's change at the claim for a reason that may pass (it cannot
// measure the workspace against its quota, twice). The session waits and
// tries again; the workspace is not restored (a restore would lose the
// agent's edits since the snapshot and help nothing), and the change is
// applied once the runner can.
func TestRunnerCatchUpThatFailsForNowWaits(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	s, _ := parkedOnRunner(t, h)
	var tries atomic.Int32
	changeAwayThenClaim(t, h, rb, s, func(string) error {
		if tries.Add(1) <= 2 {
			return fmt.Errorf("write %q: %w", "b.txt", environment.ErrUnmeasurable)
		}
		return nil
	})
	require.EqualValues(t, 3, tries.Load())
	require.Contains(t, lastToolOutput(t, h, s.ID), "by-a-person", "applied at the third try")
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost), "never restored")
	require.Empty(t, events(t, h, s.ID, lt.EventWorkspaceChangeNotApplied))
	checkJournal(t, h.store, s.ID)
}

// TestRunnerChangeWithAPathTooLongIsNotApplied: the runner's connection
// cannot carry the change's path (too long for a frame with the bytes
// around it): that fails at every try, so the change ends at once as not
// applied, with an error naming the field, and nothing is restored.
func TestRunnerChangeWithAPathTooLongIsNotApplied(t *testing.T) {
	h, rb := newFilesRunnerHarness(t)
	s, _ := parkedOnRunner(t, h)
	var tries atomic.Int32
	c := changeAwayThenClaim(t, h, rb, s, func(rel string) error {
		tries.Add(1)
		return fmt.Errorf("write %q: %w", rel, environment.ErrPathTooLong)
	})
	require.EqualValues(t, 1, tries.Load(), "not tried again")
	notApplied := notAppliedOf(t, h, s.ID)
	require.Len(t, notApplied, 1)
	d := notApplied[0]
	require.Equal(t, c.Seq, d.ChangeSeq)
	require.Equal(t, lt.NotAppliedFailed, d.Reason)
	require.Contains(t, d.Error, "path: too long")
	require.Empty(t, events(t, h, s.ID, lt.EventEnvironmentLost), "never restored")
	checkJournal(t, h.store, s.ID)
}

// notAppliedOf returns the data of the session's
// workspace.change_not_applied events, in order.
func notAppliedOf(t *testing.T, h *harness, sessionID string) []lt.WorkspaceChangeNotAppliedData {
	t.Helper()
	var out []lt.WorkspaceChangeNotAppliedData
	for _, ev := range events(t, h, sessionID, lt.EventWorkspaceChangeNotApplied) {
		var d lt.WorkspaceChangeNotAppliedData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		out = append(out, d)
	}
	return out
}

// TestRunnerChangeAppliedAtOnceIsMadeAgainAfterARestore: a person's change
// applied at once while the runner was reached is based on the live file
// (a program's write since the snapshot). The runner's copy is then found
// stale and restored from the snapshot: the change is made again on it,
// not judged against the live file the restore took away (a conflict that
// would drop the person's change).
func TestRunnerChangeAppliedAtOnceIsMadeAgainAfterARestore(t *testing.T) {
	h, _ := newFilesRunnerHarness(t)
	ctx := context.Background()
	s, ws := parkedOnRunner(t, h)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("edited-live\n"), 0o644))
	w, err := h.eng.WriteFile(ctx, s.ID, "a.txt", []byte("by-a-person\n"), "")
	require.NoError(t, err)
	require.Equal(t, "sha256:"+sum256("edited-live\n"), w.BasedOn, "checked against the live file")
	got, err := os.ReadFile(filepath.Join(ws, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "by-a-person\n", string(got), "applied at once")
	// The runner's copy no longer known to hold the snapshot: restored.
	require.NoError(t, os.Remove(ws+".snapshots"))

	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`1`)})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.NotEmpty(t, events(t, h, s.ID, lt.EventEnvironmentRestored), "the copy was restored")
	require.Empty(t, events(t, h, s.ID, lt.EventWorkspaceChangeNotApplied), "the change made before the restore is made again")
	require.Contains(t, lastToolOutput(t, h, s.ID), "by-a-person")
	checkJournal(t, h.store, s.ID)
}
