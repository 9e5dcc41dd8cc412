package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A person's change of the workspace (files.go) and the workspace's copies
// on the nodes.
//
// Workspaces are local to a node; the journal is the truth. The workspace
// a session has is, as the journal says it: its last snapshot
// (State.LastSnapshot), then the people's changes journaled since
// (State.PersonChanges, each a workspace.changed whose content is a blob
// written in the same transaction). A node's copy is current when it
// holds both: this node was the last to change it (State.WorkspaceNode),
// it is known to contain the last snapshot, and it is known to contain the
// last person's change (a marker "change-<seq>" in the workspace's list of
// snapshots, workspace.Manager.RecordSnapshot, recorded once the change is
// applied). A copy that is not current is restored from the snapshot and
// the changes are applied again on top, in order — by the API node before
// it reads or writes, and by the runner before its next tool call or
// checkpoint (runner.workspaceLost) — so a person's change is never lost,
// whichever node runs the session next. A checkpoint's snapshot, taken of a
// current copy, holds the changes, and clears the list. An idle stop's
// snapshot holds those applied before it was taken (environment.stopping
// says up to which): a copy restored from it gets only the later ones
// (State.ChangesToApply), never one again over what the model did to the
// file since.
//
// A person's change is journaled first (conditional on the journal not
// having moved since the state was read, so a session that was resumed,
// decided or woken meanwhile is a 409) and applied to this node's copy
// after; until its marker is recorded the copy is not current. On one node
// a runner and a person's change are kept apart by workspaceLocks: a
// runner holds its session's lock shared while it runs, a change holds it
// alone (never waiting: a session running on this node is a 409).

// workspaceLocks are per-session read-write locks, created on first use
// and dropped when unused. Unlike sync.RWMutex, taking one alone can wait
// with a deadline: a person's change made just as the session parked waits
// for the runner to let go, rather than failing.
type workspaceLocks struct {
	mu sync.Mutex
	m  map[string]*workspaceLock
}

type workspaceLock struct {
	readers int
	writer  bool
	refs    int
	// changed is closed (and replaced) whenever the lock is released.
	changed chan struct{}
}

// get returns id's lock, counting a reference; l.mu is held.
func (l *workspaceLocks) get(id string) *workspaceLock {
	if l.m == nil {
		l.m = make(map[string]*workspaceLock)
	}
	k := l.m[id]
	if k == nil {
		k = &workspaceLock{changed: make(chan struct{})}
		l.m[id] = k
	}
	k.refs++
	return k
}

// release drops a reference and wakes the waiters; l.mu is held.
func (l *workspaceLocks) release(id string, k *workspaceLock) {
	close(k.changed)
	k.changed = make(chan struct{})
	if k.refs--; k.refs == 0 {
		delete(l.m, id)
	}
}

// share holds session id's lock shared (a runner), waiting for a person's
// change in progress to end.
func (l *workspaceLocks) share(id string) (unlock func()) {
	l.mu.Lock()
	k := l.get(id)
	for k.writer {
		ch := k.changed
		l.mu.Unlock()
		<-ch
		l.mu.Lock()
	}
	k.readers++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		k.readers--
		l.release(id, k)
		l.mu.Unlock()
	}
}

// exclusive holds session id's lock alone, waiting until ctx ends for the
// holders to let go (with a ctx already done it only tries).
func (l *workspaceLocks) exclusive(ctx context.Context, id string) (unlock func(), ok bool) {
	l.mu.Lock()
	k := l.get(id)
	for k.writer || k.readers > 0 {
		ch := k.changed
		l.mu.Unlock()
		select {
		case <-ch:
			l.mu.Lock()
		case <-ctx.Done():
			l.mu.Lock()
			if k.refs--; k.refs == 0 {
				delete(l.m, id)
			}
			l.mu.Unlock()
			return nil, false
		}
	}
	k.writer = true
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		k.writer = false
		l.release(id, k)
		l.mu.Unlock()
	}, true
}

// tryExclusive is exclusive without waiting.
func (l *workspaceLocks) tryExclusive(id string) (unlock func(), ok bool) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return l.exclusive(ctx, id)
}

// changeMarker names, in the workspace's list of snapshots, a person's
// change applied to this node's copy.
func changeMarker(seq int64) string { return "change-" + strconv.FormatInt(seq, 10) }

// workspaceCurrent reports whether this node's copy of st's workspace is
// what the journal says (see above). A workspace never snapshotted and
// never changed by a person is taken as it is.
func (e *Engine) workspaceCurrent(st *journal.State) (bool, error) {
	wsID := st.WorkspaceID()
	_, err := os.Stat(e.spaces.Path(wsID))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st.WorkspaceSnapshot() == "" && len(st.PersonChanges) == 0, nil
	case err != nil:
		return false, fmt.Errorf("check workspace: %w", err)
	}
	if st.WorkspaceNode != "" && st.WorkspaceNode != e.cfg.NodeID && st.Workspace == "" {
		return false, nil
	}
	return e.holdsLatest(st)
}

// holdsLatest reports whether this node's copy is known to hold the last
// snapshot and the last person's change. A copy without a list holds
// neither (workspace.Manager.HasSnapshot).
func (e *Engine) holdsLatest(st *journal.State) (bool, error) {
	wsID, sid := st.WorkspaceID(), st.Session.ID
	if snap := st.WorkspaceSnapshot(); snap != "" {
		known, tracked, err := e.spaces.HasSnapshot(wsID, sid, snap)
		if err == nil && tracked && !known && snap == emptySnapshotID {
			// As the Environment's Holds: an empty copy holds the empty
			// snapshot, whose entry a process since gone kept in memory;
			// noted so again (in memory), so that a person's change
			// about to be applied writes it in the list with its marker.
			if known, err = e.spaces.Empty(wsID); known && err == nil {
				err = e.spaces.RecordEmptySnapshot(wsID, sid, snap)
			}
		}
		if err != nil {
			return false, err
		}
		if tracked && !known {
			return false, nil
		}
	}
	if changes := st.ChangesToApply(); len(changes) > 0 {
		known, tracked, err := e.spaces.HasSnapshot(wsID, sid, changeMarker(changes[len(changes)-1].Seq))
		if err != nil {
			return false, err
		}
		if tracked && !known {
			return false, nil
		}
	}
	return true, nil
}

// holdsLatest reports whether the runner's Environment is known to hold
// the last snapshot and the last person's change.
func (r *runner) holdsLatest(ctx context.Context) (bool, error) {
	if r.env == nil || r.env.env == nil {
		return false, errors.New("check workspace: the session's environment is not open")
	}
	ids := make([]string, 0, 2)
	if snap := r.st.WorkspaceSnapshot(); snap != "" {
		ids = append(ids, snap)
	}
	changes := r.st.ChangesToApply()
	if n := len(changes); n > 0 {
		ids = append(ids, changeMarker(changes[n-1].Seq))
	}
	for i, id := range ids {
		ok, err := r.env.env.Holds(ctx, id)
		if err != nil {
			// An environment gone between two calls: the runner starts
			// over with it opened again, as after a loss mid-call.
			return false, envLost(err)
		}
		if !ok && i == len(ids)-1 && len(changes) > 0 && r.envRunner != "" {
			// A runner's workspace, which every node reaches the same,
			// holds the snapshot but not the people's last change: only
			// the changes it lacks are applied, not a restore.
			return r.catchUpPersonChanges(ctx)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// errChangesWaiting ends a runner whose catch-up of the people's changes
// met a failure that may pass: the scheduler starts it over after a
// backoff (maxChangeWaits times at most, then the turn fails), without a
// restore.
var errChangesWaiting = errors.New("a person's change cannot be applied to the runner's workspace for now")

// maxChangeWaits bounds the tries of a catch-up that keeps failing.
const maxChangeWaits = 8

// catchUpPersonChanges applies to the runner's workspace the people's
// changes it does not hold yet (those after the last one it holds; an API
// node that reached the runner applied them already; none its snapshot
// holds), and reports whether it now holds them all.
func (r *runner) catchUpPersonChanges(ctx context.Context) (bool, error) {
	changes := r.st.ChangesToApply()
	from := 0
	for i := len(changes) - 1; i >= 0; i-- {
		ok, err := r.env.env.Holds(ctx, changeMarker(changes[i].Seq))
		if err != nil {
			return false, envLost(err)
		}
		if ok {
			from = i + 1
			break
		}
	}
	failed, notApplied, err := r.e.applyChanges(ctx, r.st, r.env.env, changes[from:])
	if err != nil {
		// Nothing is journaled: the workspace is restored, and each
		// change judged again on it (reapplyPersonChanges).
		return false, err
	}
	if len(failed) > 0 {
		// A failure that may pass (a blob out of reach, a workspace that
		// cannot be measured now): a restore would not help and would
		// lose the agent's edits since the snapshot. The session's runner
		// waits and tries again (errChangesWaiting); the changes applied
		// meanwhile keep their markers and are not made twice.
		return false, fmt.Errorf("%w: %s", errChangesWaiting, failed[0])
	}
	// Its word that it applied them is not enough: it must hold the
	// marker of the last one applied now, or the workspace is restored
	// (and the loss counted, checkRestoreBounds) as any copy that lacks
	// what the journal says. Those not applied have no marker.
	skipped := make(map[int64]bool, len(notApplied))
	for _, d := range notApplied {
		skipped[d.ChangeSeq] = true
	}
	var last int64
	for _, c := range changes {
		if !skipped[c.Seq] {
			last = c.Seq
		}
	}
	if last != 0 {
		held, err := r.env.env.Holds(ctx, changeMarker(last))
		if err != nil {
			return false, envLost(err)
		}
		if !held {
			return false, nil
		}
	}
	return true, r.journalNotApplied(notApplied)
}

// makeUntouchedCopy makes this node's copy of st's workspace when it is
// missing: the directory of a session no tool of which reaches its
// workspace is made only when something needs it (environment.
// OpenParams.Untouched), and unmade it held the empty snapshot, as it is
// noted (before a person's change lands in it, whose marker's record puts
// both on disk).
func (e *Engine) makeUntouchedCopy(st *journal.State) error {
	wsID := st.WorkspaceID()
	ws, made, err := e.spaces.Create(wsID)
	if err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	if made {
		e.snapshots.Forget(ws)
	}
	// Made here, or by a person's read meanwhile (which makes it empty
	// and lists nothing): an empty copy holds the empty snapshot.
	empty, err := e.spaces.Empty(wsID)
	if err == nil && empty {
		err = e.spaces.RecordEmptySnapshot(wsID, st.Session.ID, emptySnapshotID)
	}
	if err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	return nil
}

// applyPersonChanges applies changes to the session's workspace: this
// node's copy for an environment on this node, the Environment itself
// for one on a runner (the server's copy of a runner's workspace is no
// one's). It returns what could not be applied, each naming its path; an
// error is the environment's, gone meanwhile.
//
// A change found in conflict with what the workspace holds now (based on a
// snapshot view the agent's later writes make stale) is journaled as not
// applied (workspace.change_not_applied): no copy applies it again, the
// model is told at its next call, and the person sees it in the session's
// events.
func (r *runner) applyPersonChanges(ctx context.Context, changes []journal.PersonChange) ([]string, error) {
	if r.envRunner == "" || r.env == nil || r.env.env == nil {
		if r.untouched {
			if err := r.e.makeUntouchedCopy(r.st); err != nil {
				return []string{err.Error()}, nil
			}
		}
		return r.e.applyPersonChanges(ctx, r.st, r.ws, changes), nil
	}
	failed, conflicts, err := r.e.applyChanges(ctx, r.st, r.env.env, changes)
	if aerr := r.journalNotApplied(conflicts); aerr != nil {
		return failed, aerr
	}
	return failed, err
}

// journalNotApplied journals the people's changes found not applicable
// (workspace.change_not_applied), which takes them out of the changes to
// apply for good.
func (r *runner) journalNotApplied(ds []lt.WorkspaceChangeNotAppliedData) error {
	turnID, step := "", 0
	if t := r.st.CurrentTurn(); t != nil {
		turnID = t.ID
		if r.st.Step != nil {
			step = r.st.Step.N
		}
	}
	for _, d := range ds {
		// Journaled already (by an API node that applied it at once, or
		// earlier in ds): a change ends once, as journalNotAppliedNow's
		// do.
		if !r.st.ChangePending(d.ChangeSeq) {
			continue
		}
		if err := r.add(lt.EventWorkspaceChangeNotApplied, turnID, step, d); err != nil {
			return err
		}
	}
	return nil
}

// changeTarget is a workspace people's changes are applied to: an
// Environment (a runner's workspace, or this node's through its backend),
// or this node's copy reached directly (copyTarget). Both are written the
// same way (no symlink followed, each change compared with its basis and
// made, its marker recorded with it, at once: WriteFileIf, RemoveIf) and
// keep the same markers.
type changeTarget interface {
	WriteFileIf(ctx context.Context, rel string, data []byte, c environment.Condition) error
	RemoveIf(ctx context.Context, rel string, c environment.Condition) error
	Holds(ctx context.Context, id string) (bool, error)
	Record(ctx context.Context, id string) error
}

var _ changeTarget = environment.Environment(nil)

// applyChanges applies changes to t in order, each with its marker. It
// returns what could not be applied for now (a blob out of reach, a
// workspace that cannot be measured), each naming its path; the rest are
// applied or ended. A change based on what the person saw (BasedOn) whose
// path no longer holds that is not applied and has no marker: the
// workspace compares and writes at once (environment.Condition), so a
// program of the environment that wrote the file since keeps its bytes.
// It is returned among the not applied, with those that can never be
// applied (reason failed: a symlink planted on the path, the quota, a path
// too long for a runner's frame), for the caller to journal
// (workspace.change_not_applied), which ends them. An error is the
// environment's, gone meanwhile.
func (e *Engine) applyChanges(ctx context.Context, st *journal.State, t changeTarget, changes []journal.PersonChange) ([]string, []lt.WorkspaceChangeNotAppliedData, error) {
	if len(changes) == 0 {
		return nil, nil, nil
	}
	// The snapshot is recorded again after the changes only when the
	// workspace held it before them: recorded on a workspace that does
	// not (one made anew), it would claim to be the session's and never
	// be restored. Held, it is noted again so that the markers, which
	// share the list's bound, never push it out and make the copy look
	// stale.
	snap := st.WorkspaceSnapshot()
	held := false
	if snap != "" {
		var err error
		if held, err = t.Holds(ctx, snap); err != nil {
			if environmentGone(err) {
				return nil, nil, envLost(err)
			}
			return nil, nil, err
		}
	}
	var (
		failed     []string
		notApplied []lt.WorkspaceChangeNotAppliedData
	)
	for _, c := range changes {
		err := e.applyChangeTo(ctx, t, c)
		var conflict *environment.ConflictError
		switch {
		case err == nil:
		case errors.As(err, &conflict):
			// The agent (or a program of its environment) wrote the file
			// since the person saw it: the change would overwrite that
			// unseen.
			notApplied = append(notApplied, lt.WorkspaceChangeNotAppliedData{ChangeSeq: c.Seq, Op: c.Op, Path: c.Path,
				Reason: lt.NotAppliedConflict, BasedOn: c.BasedOn, Found: conflict.Found})
		case environmentGone(err):
			return failed, notApplied, envLost(err)
		case cannotApply(err) != "":
			// Trying again would fail again (and a runner's workspace
			// that lacks the change's marker would be restored at every
			// claim): it ends as not applied.
			notApplied = append(notApplied, lt.WorkspaceChangeNotAppliedData{ChangeSeq: c.Seq, Op: c.Op, Path: c.Path,
				Reason: lt.NotAppliedFailed, BasedOn: c.BasedOn, Error: cannotApply(err)})
		default:
			failed = append(failed, fmt.Sprintf("%s %q: %v", c.Op, c.Path, err))
		}
	}
	if held {
		if err := t.Record(ctx, snap); err != nil {
			e.log.Warn("record workspace snapshot", "session", st.Session.ID, "err", err)
		}
	}
	return failed, notApplied, nil
}

// cannotApply describes an error that applying a change would meet again
// however often it is tried ("" for any other): the workspace's quota,
// a path that now goes through a symlink or names a directory, or one
// too long for a frame of the runner's connection. The description names
// no path of a machine.
func cannotApply(err error) string {
	switch {
	case errors.Is(err, environment.ErrPathTooLong):
		return "path: too long for a frame of the connection to the runner"
	case errors.Is(err, environment.ErrDiskQuota):
		return "it does not fit the workspace's disk quota (environment.disk_mb) with what the workspace holds now"
	case errors.Is(err, workspace.ErrEscapes), errors.Is(err, workspace.ErrInvalidPath):
		return "a symlink or a file is now on its path, or it names a directory"
	}
	return ""
}

// basisOf is the BasedOn of a file holding data.
func basisOf(data []byte) string { return basisOfSHA(sha256Hex(data)) }

// basisOfSHA is the BasedOn of a file whose SHA-256 is sum ("": none).
func basisOfSHA(sum string) string {
	if sum == "" {
		return lt.BasedOnAbsent
	}
	return "sha256:" + sum
}

// applyChangeTo applies one person's change to t, on the condition that
// its path holds what the change is based on, with its marker.
func (e *Engine) applyChangeTo(ctx context.Context, t changeTarget, c journal.PersonChange) error {
	cond := environment.Condition{Basis: c.BasedOn, Marker: changeMarker(c.Seq)}
	switch c.Op {
	case lt.WorkspaceDelete:
		return t.RemoveIf(ctx, c.Path, cond)
	case lt.WorkspaceWrite:
		data, err := e.personBlob(ctx, c.SHA256)
		if err != nil {
			return err
		}
		// Not through a symlink the model planted since the change was
		// accepted: it fails, to be reported as not applied.
		return t.WriteFileIf(ctx, c.Path, data, cond)
	default:
		return fmt.Errorf("unknown op %q", c.Op)
	}
}

// copyTarget is this node's copy of a session's workspace as a
// changeTarget: written through d (telling the snapshot Cache), its
// markers kept in the node's list of snapshots.
type copyTarget struct {
	e   *Engine
	st  *journal.State
	ws  string
	dir *workspace.Dir
}

// WriteFileIf implements changeTarget. The caller holds the session's
// lock alone: no other change of this node's copy comes between.
func (t *copyTarget) WriteFileIf(_ context.Context, rel string, data []byte, c environment.Condition) error {
	return t.conditional(rel, c, basisOf(data), func() (string, error) { return t.dir.WriteDirectIf(rel, data, c.Basis) })
}

// RemoveIf implements changeTarget.
func (t *copyTarget) RemoveIf(_ context.Context, rel string, c environment.Condition) error {
	return t.conditional(rel, c, lt.BasedOnAbsent, func() (string, error) { return t.dir.RemoveIf(rel, c.Basis) })
}

// conditional makes one change by change as the local backend does
// (environment.Condition), telling the snapshot Cache.
func (t *copyTarget) conditional(rel string, c environment.Condition, made string, change func() (string, error)) error {
	defer t.e.trackWrites(t.ws, rel)()
	if c.Basis != "" {
		if found, err := t.dir.Basis(rel); err == nil && found == made {
			return t.Record(context.Background(), c.Marker)
		}
	}
	found, err := change()
	switch {
	case err != nil:
		return err
	case c.Basis != "" && found != c.Basis && found != made:
		return &environment.ConflictError{Path: rel, Basis: c.Basis, Found: found}
	}
	return t.Record(context.Background(), c.Marker)
}

// Holds is true only for a copy known to hold id, or for no copy at all
// (untracked: there is nothing here to restore; the caller made it).
func (t *copyTarget) Holds(_ context.Context, id string) (bool, error) {
	known, tracked, err := t.e.spaces.HasSnapshot(t.st.WorkspaceID(), t.st.Session.ID, id)
	return known || !tracked, err
}

// Record only logs a failure: the list spares a restore, and failing to
// keep it costs one (the copy looks stale), never the change.
func (t *copyTarget) Record(_ context.Context, id string) error {
	if err := t.e.spaces.RecordSnapshot(t.st.WorkspaceID(), t.st.Session.ID, id); err != nil {
		t.e.log.Warn("record in the workspace's list", "session", t.st.Session.ID, "id", id, "err", err)
	}
	return nil
}

// personBlob reads the content of a person's write, checked against its
// digest.
func (e *Engine) personBlob(ctx context.Context, sum string) ([]byte, error) {
	data, err := e.store.BlobGet(ctx, sum)
	if err != nil {
		return nil, fmt.Errorf("read its content (blob %s): %w", sum, err)
	}
	if sha256Hex(data) != sum {
		return nil, fmt.Errorf("blob %s holds other bytes", sum)
	}
	return data, nil
}

// syncWorkspace makes the runner's Environment what the journal says,
// without journaling anything: restored from the last snapshot (or
// emptied, when there is none) and the people's changes applied on top.
func (r *runner) syncWorkspace(ctx context.Context) error {
	if r.env == nil || r.env.env == nil {
		return errors.New("sync workspace: the session's environment is not open")
	}
	snap := r.st.WorkspaceSnapshot()
	if snap == "" {
		var err error
		if snap, err = r.e.emptySnapshot(ctx, r.project); err != nil {
			return err
		}
	}
	if _, err := r.env.env.Restore(ctx, snap); err != nil {
		return fmt.Errorf("restore workspace from snapshot %s: %w", snap, envLost(err))
	}
	r.provisioned = false
	failed, err := r.applyPersonChanges(ctx, r.st.ChangesToApply())
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("apply the people's changes to the workspace: %s", failed[0])
	}
	return nil
}

// syncWorkspace makes this node's copy of st's workspace current, without
// journaling anything: restored from the last snapshot (or emptied, when
// there is none) and the people's changes applied on top. It returns the
// workspace's path. The caller holds the session's lock alone.
func (e *Engine) syncWorkspace(ctx context.Context, st *journal.State) (string, error) {
	ok, err := e.workspaceCurrent(st)
	if err != nil {
		return "", err
	}
	wsID := st.WorkspaceID()
	if ok {
		ws, err := e.spaces.Ensure(wsID)
		if err != nil {
			return "", fmt.Errorf("create workspace: %w", err)
		}
		return ws, nil
	}
	if st.WorkspaceSnapshot() == "" {
		if err := e.removeWorkspace(wsID); err != nil {
			return "", err
		}
	}
	ws, err := e.spaces.Ensure(wsID)
	if err != nil {
		return "", fmt.Errorf("create workspace: %w", err)
	}
	if snap := st.WorkspaceSnapshot(); snap != "" {
		if _, err := e.restoreSnapshot(ctx, st.Project(), snap, ws); err != nil {
			return "", fmt.Errorf("restore workspace from snapshot %s: %w", snap, err)
		}
		// Markers of changes made before the restore go with it: the
		// changes are made again below.
		if err := e.spaces.RecordRestore(wsID, st.Session.ID, snap); err != nil {
			return "", fmt.Errorf("restore workspace from snapshot %s: %w", snap, err)
		}
	}
	if failed := e.applyPersonChanges(ctx, st, ws, st.ChangesToApply()); len(failed) > 0 {
		return "", fmt.Errorf("apply the people's changes to the workspace: %s", failed[0])
	}
	return ws, nil
}

// applyPersonChanges applies changes to this node's copy at ws
// (applyChanges). It returns what could not be applied, each naming its
// path; the rest are applied.
func (e *Engine) applyPersonChanges(ctx context.Context, st *journal.State, ws string, changes []journal.PersonChange) []string {
	if len(changes) == 0 {
		return nil
	}
	d, err := workspace.Open(ws)
	if err != nil {
		return []string{fmt.Sprintf("open the workspace: %v", err)}
	}
	defer d.Close()
	// A write's temporary file is told to the snapshot Cache as its
	// destination is (trackWrites): a checkpoint of a sub-agent sharing
	// the workspace may list it meanwhile.
	d.OnTempFiles(func(tmp string) { e.snapshots.NoteWrites(ws, tmp) })
	failed, conflicts, err := e.applyChanges(ctx, st, &copyTarget{e: e, st: st, ws: ws, dir: d}, changes)
	if err != nil {
		failed = append(failed, err.Error())
	}
	// A change of this node's copy is checked against the copy itself
	// (never BasedOn): a conflict here is a journal this node did not
	// write, reported as a change it could not apply.
	for _, c := range conflicts {
		if c.Reason == lt.NotAppliedFailed {
			failed = append(failed, fmt.Sprintf("%s %q: %s", c.Op, c.Path, c.Error))
			continue
		}
		failed = append(failed, fmt.Sprintf("%s %q: the file is no longer what the change was based on (%s, found %s)", c.Op, c.Path, c.BasedOn, c.Found))
	}
	return failed
}
