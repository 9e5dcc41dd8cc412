package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Taking over the workspace (API.md "Cancel, steer, pause, take over"): a
// person lists, reads, writes and deletes the files of a session's
// workspace, and reads any checkpoint's snapshot. How a change reaches
// whichever node runs the session next is in workspacesync.go.

// lockWait bounds how long a person's change waits for this node's
// runner of a session that just parked to let go of its workspace.
const lockWait = 10 * time.Second

// MaxFileBytes bounds a person's upload: its content is held in memory and
// stored as one blob.
const MaxFileBytes = 32 << 20

// filesWritable reports, as a 409 naming the status, whether a person may
// change the session's workspace now: only while no worker runs it, and
// only in the root of a tree whose sub-agents (who share it) are done.
func filesWritable(st *journal.State) error {
	switch s := st.Session.Status; s {
	case lt.SessionPaused, lt.SessionIdle, lt.SessionWaiting, lt.SessionRequiresAction:
	default:
		return apierror.Conflict("session %s is %s: its workspace can be changed only while it is paused, idle, waiting or requires_action", st.Session.ID, s)
	}
	if st.Workspace != "" {
		return apierror.Conflict("session %s is a sub-agent working in the workspace of session %s: change the files there", st.Session.ID, st.Workspace)
	}
	if n := st.RunningChildren(); n > 0 {
		return apierror.Conflict("session %s has %d sub-agent(s) not done in its workspace (running, or paused with it): wait until they are done, or cancel them", st.Session.ID, n)
	}
	if st.Runnable() && st.Session.Status != lt.SessionIdle {
		return apierror.Conflict("session %s is about to run (a worker will claim it): its workspace cannot be changed now", st.Session.ID)
	}
	return nil
}

// fileError maps a workspace or snapshot error about path to the API's:
// 400 naming "path" for a path that leaves the workspace, is malformed or
// goes through a symlink, 404 for one that does not exist.
func fileError(err error, path string) error {
	var ae *apierror.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return err
	case errors.Is(err, workspace.ErrEscapes), errors.Is(err, workspace.ErrInvalidPath), errors.Is(err, snapshot.ErrThroughSymlink):
		return apierror.Invalid("path", "%v", err)
	case errors.Is(err, syscall.ENAMETOOLONG):
		// The caller's path, not the server's failure.
		return apierror.Invalid("path", "path %q has a name longer than the file system allows", path)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		// ENOTDIR: a file named as a directory on the way; nothing is there.
		return &apierror.Error{Status: http.StatusNotFound, Code: lt.CodeNotFound, Field: "path", Message: fmt.Sprintf("path %q does not exist in the workspace", path)}
	}
	return err
}

// cleanFilesPath validates a path given to the file endpoints; dir allows
// the workspace root ("" or ".").
func cleanFilesPath(p string, dir bool) (string, error) {
	if dir && (p == "" || p == ".") {
		return ".", nil
	}
	c, err := workspace.CleanPath(p)
	if err != nil {
		return "", fileError(err, p)
	}
	if c == "." && !dir {
		return "", apierror.Invalid("path", "path %q names the workspace itself: name a file", p)
	}
	if err := checkPathLength(c); err != nil {
		return "", apierror.Invalid("path", "%v", err)
	}
	return c, nil
}

// maxNameBytes and maxPathBytes are the file system's limits on one name
// and a whole path (NAME_MAX, PATH_MAX less its NUL). A person's change is
// journaled before it is applied, and applied again on every restore: a
// path no copy can hold would fail every time, and keep the copy from
// ever being current again, so it is refused before.
const (
	maxNameBytes = 255
	maxPathBytes = 4095
)

// checkPathLength checks the clean path c against those limits.
func checkPathLength(c string) error {
	if len(c) > maxPathBytes {
		return fmt.Errorf("path is %d bytes long: at most %d", len(c), maxPathBytes)
	}
	for name := range strings.SplitSeq(filepath.ToSlash(c), "/") {
		if len(name) > maxNameBytes {
			return fmt.Errorf("path has a name of %d bytes (%.40q…): at most %d", len(name), name, maxNameBytes)
		}
	}
	return nil
}

// readView brings this node's copy of the session's workspace up to date
// and opens it, or, when this node's runner of the session holds it, opens
// it as it is (the live copy). A workspace sub-agents share (a sub-agent's,
// or that of a root whose sub-agents run) is read as it is too: a read
// never restores files under a running agent. Close the Dir, then call
// done.
func (e *Engine) readView(ctx context.Context, sessionID string) (*journal.State, *workspace.Dir, func(), error) {
	_, st, err := e.loadState(ctx, sessionID)
	if err != nil {
		return nil, nil, nil, notFound(err, "session", sessionID)
	}
	var done func()
	shared := st.Workspace != "" || st.RunningChildren() > 0
	if unlock, ok := e.wsLocks.tryExclusive(sessionID); ok && !shared {
		done = unlock
		if _, err := e.syncWorkspace(ctx, st); err != nil {
			done()
			return nil, nil, nil, err
		}
	} else {
		// A runner works in it here (or a person's change is being
		// made, which leaves it current), or sub-agents share it: it
		// is read as it is, never restored under them.
		if ok {
			unlock()
		}
		done = e.wsLocks.share(sessionID)
		if !shared {
			if st, done, err = e.readAfterDiscard(ctx, st, done); err != nil {
				return nil, nil, nil, err
			}
		}
		if _, err := e.spaces.Ensure(st.WorkspaceID()); err != nil {
			done()
			return nil, nil, nil, err
		}
	}
	d, err := e.spaces.Open(st.WorkspaceID())
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return st, d, done, nil
}

// readAfterDiscard is readView's answer to a copy gone while it waited
// for the workspace's lock (held, done: shared): this node discarded its
// copy of a stopped environment (stalecopies.go) meanwhile. Read as it is,
// the copy would be an empty workspace; it is brought back like any stale
// copy instead, from the journal read again (the stop's snapshot and the
// people's changes since), holding the lock alone. A copy missing while the
// environment is not stopped was not discarded, and is read as it is.
// Should the lock not come (this node's runner of the session holds it,
// bringing the copy back), the read is a 503 to try again, never an empty
// listing. It returns the state read and the lock's release.
func (e *Engine) readAfterDiscard(ctx context.Context, st *journal.State, done func()) (*journal.State, func(), error) {
	if _, err := os.Lstat(e.spaces.Path(st.WorkspaceID())); !errors.Is(err, fs.ErrNotExist) {
		return st, done, nil
	}
	// Only a stopped environment's copy is discarded: any other copy not
	// made yet (a session this node's runner just claimed) is read as it
	// is, without waiting for the runner.
	_, now, err := e.loadState(ctx, st.Session.ID)
	if err != nil {
		done()
		return nil, nil, err
	}
	if !now.EnvironmentStopped {
		return st, done, nil
	}
	done()
	lockCtx, cancel := context.WithTimeout(ctx, lockWait)
	unlock, ok := e.wsLocks.exclusive(lockCtx, st.Session.ID)
	cancel()
	if !ok {
		// Held meanwhile (a claim of this node recreating the copy): not
		// read as it is, which would list an empty workspace.
		return nil, nil, apierror.Unavailable("the workspace of session %s is being brought back from its snapshot: try again", st.Session.ID)
	}
	// Read again under the lock: a claim may have recreated it meanwhile.
	_, again, err := e.loadState(ctx, st.Session.ID)
	if err == nil {
		_, err = e.syncWorkspace(ctx, again)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return again, unlock, nil
}

// ListFiles lists directory dir of the session's workspace (up to
// workspace.DefaultListMax entries by name, with each file's SHA-256).
// While the session runs on another node, this node's copy shows it as of
// its last checkpoint (and the people's changes since).
func (e *Engine) ListFiles(ctx context.Context, sessionID, dir string) (*lt.FileListing, error) {
	c, err := cleanFilesPath(dir, true)
	if err != nil {
		return nil, err
	}
	if v, err := e.runnerFilesOf(ctx, sessionID); err != nil || v != nil {
		if err != nil {
			return nil, err
		}
		defer v.close()
		return e.listRunnerFiles(ctx, v, sessionID, dir, c)
	}
	st, d, done, err := e.readView(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	defer done()
	defer d.Close()
	l, err := d.List(c, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, workspace.ErrEscapes) || errors.Is(err, workspace.ErrInvalidPath) || errors.Is(err, syscall.ENAMETOOLONG) {
			return nil, fileError(err, dir)
		}
		if strings.Contains(err.Error(), "not a directory") {
			return nil, apierror.Invalid("path", "path %q is not a directory: read it with GET /v1/sessions/%s/files/%s", dir, sessionID, filepath.ToSlash(c))
		}
		return nil, err
	}
	out := &lt.FileListing{Path: filepath.ToSlash(c), Entries: make([]lt.FileEntry, 0, len(l.Entries)), Total: l.Total, Truncated: l.Truncated,
		Writable: filesWritable(st) == nil}
	hashBudget := int64(listHashBytes)
	for _, en := range l.Entries {
		p := en.Name
		if c != "." {
			p = filepath.Join(c, en.Name)
		}
		fe := lt.FileEntry{Name: en.Name, Path: filepath.ToSlash(p), Type: string(en.Type), Target: en.Target}
		if fi, err := d.Lstat(p); err == nil {
			t := fi.ModTime().UTC()
			fe.ModTime = &t
			if en.Type != workspace.EntrySymlink {
				fe.Mode = fmt.Sprintf("%04o", fi.Mode().Perm())
			}
		}
		if en.Type == workspace.EntryFile {
			fe.Size = en.Size
			if en.Size <= MaxFileBytes && en.Size <= hashBudget {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if sum, err := fileSHA256(d, p); err == nil {
					fe.SHA256 = sum
					hashBudget -= en.Size
				}
			}
		}
		out.Entries = append(out.Entries, fe)
	}
	return out, nil
}

// listHashBytes bounds how much of the files a listing reads to give their
// digests. A model can make any number of huge sparse files in an instant
// (no disk used, each at the sandbox's file size limit): read through,
// they would hold the workspace's lock and a core for as long as the
// listing lasts, on every visit of the file browser. A file over
// MaxFileBytes, or past the budget, is listed without its sha256 (its
// download's ETag has it).
const listHashBytes = 4 * MaxFileBytes

// OpenFile opens a file of the session's workspace for reading (symlinks
// inside the workspace are followed; a directory is a 400 naming path).
// The caller closes the reader.
func (e *Engine) OpenFile(ctx context.Context, sessionID, path string) (*lt.FileEntry, io.ReadCloser, error) {
	c, err := cleanFilesPath(path, false)
	if err != nil {
		return nil, nil, err
	}
	if v, err := e.runnerFilesOf(ctx, sessionID); err != nil || v != nil {
		if err != nil {
			return nil, nil, err
		}
		defer v.close()
		return e.openRunnerFile(ctx, v, sessionID, path, c)
	}
	_, d, done, err := e.readView(ctx, sessionID)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	defer d.Close()
	f, fi, err := d.OpenFile(c)
	if err != nil {
		if errors.Is(err, workspace.ErrInvalidPath) && strings.Contains(err.Error(), "is a directory") {
			return nil, nil, apierror.Invalid("path", "path %q is a directory: list it with GET /v1/sessions/%s/files?path=%s", path, sessionID, filepath.ToSlash(c))
		}
		return nil, nil, fileError(err, path)
	}
	// The open file stays readable whatever happens to the workspace
	// once the lock is given back.
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		f.Close()
		return nil, nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	t := fi.ModTime().UTC()
	return &lt.FileEntry{Name: filepath.Base(c), Path: filepath.ToSlash(c), Type: lt.FileTypeFile, Size: fi.Size(),
		SHA256: hex.EncodeToString(h.Sum(nil)), Mode: fmt.Sprintf("%04o", fi.Mode().Perm()), ModTime: &t}, f, nil
}

// WriteFile is a person's upload or edit: data replaces (or creates) the
// file at path. It journals workspace.changed (by "person", the path, the
// new SHA-256 and size; the content as a blob in the same transaction)
// before it answers and, with actionID, resolves that pending input action
// of kind "file" in the same append. 409 unless the session is paused,
// idle, waiting or requires_action; 400 naming path for a path that leaves
// the workspace or goes through a symlink; 413 over MaxFileBytes or the
// workspace's quota; 409 when the workspace cannot be measured against
// its quota.
func (e *Engine) WriteFile(ctx context.Context, sessionID, path string, data []byte, actionID string) (*lt.WorkspaceChange, error) {
	return e.WriteFileIfMatch(ctx, sessionID, path, data, actionID, "")
}

// WriteFileIfMatch is WriteFile on a condition: with ifMatch (an If-Match
// header: the quoted SHA-256 a download's ETag gave, or "*"), the write is
// made only while the file still holds those bytes ("*": while it
// exists), else it is a 409 naming If-Match. A person who edits what they
// read never overwrites, unseen, what another person (or the agent, run
// meanwhile) wrote since.
func (e *Engine) WriteFileIfMatch(ctx context.Context, sessionID, path string, data []byte, actionID, ifMatch string) (*lt.WorkspaceChange, error) {
	c, err := cleanFilesPath(path, false)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > MaxFileBytes {
		return nil, apierror.TooLarge("the file is larger than %d bytes", MaxFileBytes)
	}
	return e.changeFile(ctx, sessionID, lt.WorkspaceWrite, c, data, actionID, ifMatch)
}

// DeleteFile deletes a file (or a symlink, never its target) of the
// session's workspace, journaled as workspace.changed with op "delete";
// the same rules as WriteFile. A directory is a 400; a missing path a 404.
func (e *Engine) DeleteFile(ctx context.Context, sessionID, path string) (*lt.WorkspaceChange, error) {
	return e.DeleteFileIfMatch(ctx, sessionID, path, "")
}

// DeleteFileIfMatch is DeleteFile on the condition WriteFileIfMatch says.
func (e *Engine) DeleteFileIfMatch(ctx context.Context, sessionID, path, ifMatch string) (*lt.WorkspaceChange, error) {
	c, err := cleanFilesPath(path, false)
	if err != nil {
		return nil, err
	}
	return e.changeFile(ctx, sessionID, lt.WorkspaceDelete, c, nil, "", ifMatch)
}

// checkIfMatch checks an If-Match header against what the path holds
// (previous: its SHA-256, "" when it is no regular file).
func checkIfMatch(ifMatch, path, previous string) error {
	if ifMatch == "" {
		return nil
	}
	for tag := range strings.SplitSeq(ifMatch, ",") {
		tag = strings.TrimSpace(tag)
		if previous != "" && (tag == "*" || tag == strconv.Quote(previous)) {
			return nil
		}
	}
	e := apierror.Conflict("path %q no longer holds the bytes If-Match names (it holds %s): read it again and redo the change on what it holds now", path, describeSHA(previous))
	e.Field = "If-Match"
	return e
}

func describeSHA(sum string) string {
	if sum == "" {
		return "no file"
	}
	return "sha256 " + sum
}

// changeFile journals and applies one person's change (workspacesync.go
// says why in this order).
func (e *Engine) changeFile(ctx context.Context, sessionID, op, c string, data []byte, actionID, ifMatch string) (*lt.WorkspaceChange, error) {
	row, st, err := e.loadState(ctx, sessionID)
	if err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	if err := filesWritable(st); err != nil {
		return nil, err
	}
	// A runner of this node that just parked the session may not have let
	// go of it yet, or another change is being made: wait a little.
	lockCtx, cancel := context.WithTimeout(ctx, lockWait)
	unlock, ok := e.wsLocks.exclusive(lockCtx, sessionID)
	cancel()
	if !ok {
		return nil, apierror.Conflict("session %s is still being worked on by this node: try again", sessionID)
	}
	defer unlock()
	var spec lt.AgentSpec
	if err := json.Unmarshal(row.Spec, &spec); err != nil {
		return nil, fmt.Errorf("decode agent spec of %s: %w", sessionID, err)
	}
	slash := filepath.ToSlash(c)
	// Each attempt opens its own view of a runner's workspace and closes
	// the one before: an open environment holds one of the runner's
	// slots, and there may be many attempts.
	var v *runnerFiles
	defer func() { v.close() }()
	for attempt := 0; ; attempt++ {
		v.close()
		v = nil
		row, st, err := e.loadState(ctx, sessionID)
		if err != nil {
			return nil, notFound(err, "session", sessionID)
		}
		var act *lt.Action
		if actionID != "" {
			if act, err = fileAction(st, actionID, slash); err != nil {
				return nil, err
			}
		}
		if err := filesWritable(st); err != nil {
			return nil, err
		}
		var (
			ws     string
			change *lt.WorkspaceChange
		)
		if spec.Environment != nil && spec.Environment.Runner != nil {
			// On a runner: checked against the runner's workspace, or
			// the journal's snapshot (runnerfiles.go).
			if v, err = e.openRunnerFiles(ctx, row, st); err != nil {
				return nil, err
			}
			change, err = e.prepareRunnerChange(ctx, v, op, c, data)
		} else {
			if ws, err = e.syncWorkspace(ctx, st); err != nil {
				return nil, err
			}
			change, err = e.prepareChange(ws, st, &spec, op, c, data)
		}
		if err != nil {
			return nil, err
		}
		// A write of the bytes the file holds already meets its purpose
		// whatever If-Match says: it is how a conditional upload whose
		// answer was lost looks when the client sends it again.
		if op != lt.WorkspaceWrite || change.PreviousSHA256 != change.SHA256 {
			if err := checkIfMatch(ifMatch, slash, change.PreviousSHA256); err != nil {
				return nil, err
			}
		}
		change.ActionID, change.Actor = actionID, actorOf(ctx)
		live := st.WorkspaceNode == "" || st.WorkspaceNode == e.cfg.NodeID
		if v != nil {
			live = v.env != nil // the runner's workspace itself
		}
		if act == nil && op == lt.WorkspaceWrite && change.PreviousSHA256 == change.SHA256 && live {
			// The same bytes again (a retried upload): nothing changed,
			// nothing to tell the model. Only this node's copy, when it
			// is the live one, says so: another node's may hold what the
			// agent did since the last snapshot, which the journaled
			// change then replaces there.
			change.Unchanged = true
			return change, nil
		}
		b := e.newBatch(ctx, st, e.cfg.NodeID)
		turnID, step := "", 0
		if act != nil {
			turnID, step = act.TurnID, act.Step
		}
		if op == lt.WorkspaceWrite {
			b.blob(data)
		}
		if err := b.add(lt.EventWorkspaceChanged, turnID, step, change); err != nil {
			return nil, err
		}
		seq := b.st.Session.LastEventSeq
		if act != nil {
			if err := resolveFileAction(b, act, change); err != nil {
				return nil, err
			}
		}
		p, err := b.appendParams(row.LastSeq, nil, false)
		if err != nil {
			return nil, err
		}
		if _, err := e.store.EventAppend(ctx, p); err != nil {
			if errors.Is(err, store.ErrConflict) && attempt < 20 {
				continue // the journal moved: check again on the newer state
			}
			return nil, fmt.Errorf("append to session %s: %w", sessionID, err)
		}
		change.Seq = seq
		// Journaled: now this node's copy. Should it fail (or the node
		// die first), the copy lacks the change's marker and is restored
		// with it before anyone uses it.
		applied := journal.PersonChange{Seq: seq, Op: op, Path: change.Path, SHA256: change.SHA256, Size: change.Size, BasedOn: change.BasedOn}
		if v != nil {
			e.applyRunnerChange(ctx, v, b.st, applied)
			return change, nil
		}
		if failed := e.applyPersonChanges(ctx, b.st, ws, []journal.PersonChange{applied}); len(failed) > 0 {
			e.log.Warn("apply a person's change to this node's copy; it is restored before its next use", "session", sessionID, "err", failed[0])
		}
		return change, nil
	}
}

// prepareChange checks a change against this node's (current) copy and
// describes it: the path is reached through no symlink, a write goes to a
// regular file or a new one, and fits the workspace's quota; a delete
// names a file or a symlink that exists.
func (e *Engine) prepareChange(ws string, st *journal.State, spec *lt.AgentSpec, op, c string, data []byte) (*lt.WorkspaceChange, error) {
	d, err := workspace.Open(ws)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	slash := filepath.ToSlash(c)
	_, fi, err := d.ResolveDirect(c)
	if err != nil {
		return nil, fileError(err, slash)
	}
	change := &lt.WorkspaceChange{By: lt.ChangedByPerson, Op: op, Path: slash}
	switch {
	case fi == nil && op == lt.WorkspaceDelete:
		return nil, fileError(fs.ErrNotExist, slash)
	case fi == nil:
	case fi.IsDir():
		return nil, apierror.Invalid("path", "path %q is a directory", slash)
	case fi.Mode()&fs.ModeSymlink != 0 && op == lt.WorkspaceWrite:
		return nil, apierror.Invalid("path", "path %q is a symlink: write to the path of its target instead", slash)
	case fi.Mode()&fs.ModeSymlink != 0:
	case !fi.Mode().IsRegular():
		return nil, apierror.Invalid("path", "path %q is not a regular file (%s)", slash, fi.Mode().Type())
	default:
		sum, err := fileSHA256(d, c)
		if err != nil {
			return nil, fileError(err, slash)
		}
		change.PreviousSHA256 = sum
	}
	if op == lt.WorkspaceWrite {
		change.SHA256, change.Size = sha256Hex(data), int64(len(data))
		if e.cfg.Sandbox != nil {
			x := e.cfg.Sandbox.Exec(sandbox.Spec{SessionID: st.Session.ID, Workspace: ws, Limits: sandboxLimits(spec.Environment)})
			if q, ok := x.(tool.DiskQuota); ok {
				if err := q.CheckWrite(change.Size); err != nil {
					if errors.Is(err, tool.ErrUnmeasurable) {
						return nil, unmeasurable(slash, err)
					}
					return nil, apierror.TooLarge("write %q: %v", slash, err)
				}
			}
		}
	}
	return change, nil
}

// unmeasurable refuses a person's write to a workspace that cannot be
// measured against its disk quota: the quota fails closed, but the
// workspace is not known to be over it, so it is no 413 "quota" but a 409
// that says what is wrong (the model, or a command, must remove what
// cannot be measured first).
func unmeasurable(slash string, err error) error {
	return apierror.Conflict("write %q: nothing was written: %v", slash, err)
}

// fileAction returns the pending input action of kind "file" actionID
// asks, for path: 404 for an unknown action, 409 for one that is not
// pending, not a file input, or asks for another path.
func fileAction(st *journal.State, actionID, path string) (*lt.Action, error) {
	a, _ := st.PendingAction(actionID)
	if a == nil {
		return nil, apierror.Conflict("action %s is not a pending action of session %s", actionID, st.Session.ID)
	}
	if a.Type != lt.ActionInput || a.Kind != lt.InputFile {
		return nil, apierror.Conflict("action %s does not ask for a file: decide it with POST /v1/sessions/%s/actions/%s", actionID, st.Session.ID, actionID)
	}
	if a.Path != path {
		return nil, apierror.Conflict("action %s asks for the file %q, not %q", actionID, a.Path, path)
	}
	act := *a
	return &act, nil
}

// resolveFileAction answers the file input action with the upload: the
// ask_human call returns the path, SHA-256 and size, and the session runs
// again once nothing else is pending.
func resolveFileAction(b *batch, a *lt.Action, change *lt.WorkspaceChange) error {
	call := b.st.CallByID(a.Step, a.CallID)
	if call == nil {
		return apierror.Conflict("action %s no longer matches a tool call", a.ID)
	}
	answer := fmt.Sprintf("uploaded %s (%d bytes, sha256 %s)", change.Path, change.Size, change.SHA256)
	d := lt.Decision{Answer: answer}
	sum, err := decisionSHA256(&d)
	if err != nil {
		return err
	}
	if err := b.add(lt.EventActionResolved, a.TurnID, a.Step, lt.ActionResolvedData{ActionID: a.ID, Type: string(a.Type), CallID: a.CallID, Decision: d, DecisionSHA256: sum, Actor: b.actor()}); err != nil {
		return err
	}
	out, err := json.Marshal(map[string]any{"answer": answer, "path": change.Path, "sha256": change.SHA256, "size": change.Size})
	if err != nil {
		return err
	}
	if err := b.add(lt.EventToolCompleted, a.TurnID, a.Step, lt.ToolCompletedData{Step: a.Step, Index: call.Index, CallID: call.ID, Tool: call.Tool, Output: out}); err != nil {
		return err
	}
	if len(b.st.Pending) == 0 && b.st.Session.Status == lt.SessionRequiresAction {
		return b.status(lt.SessionRunning, "")
	}
	return nil
}

// ListCheckpointFiles lists directory dir of a checkpoint's workspace
// snapshot (read only; symlinks are described, never followed).
func (e *Engine) ListCheckpointFiles(ctx context.Context, sessionID, checkpointID, dir string) (*lt.FileListing, error) {
	c, err := cleanFilesPath(dir, true)
	if err != nil {
		return nil, err
	}
	cp, err := e.checkpointSnapshot(ctx, sessionID, checkpointID)
	if err != nil {
		return nil, err
	}
	entries, err := snapshot.ListDir(ctx, e.store, cp.Snapshot, filepath.ToSlash(c))
	if err != nil {
		if strings.Contains(err.Error(), "not a directory") && !errors.Is(err, fs.ErrNotExist) {
			return nil, apierror.Invalid("path", "path %q is not a directory", dir)
		}
		return nil, fileError(err, dir)
	}
	out := &lt.FileListing{Path: filepath.ToSlash(c), CheckpointID: cp.ID, Snapshot: cp.Snapshot, Total: len(entries)}
	if len(entries) > workspace.DefaultListMax {
		// Bounded as a live listing is: a directory holds what the model
		// chose to make.
		entries, out.Truncated = entries[:workspace.DefaultListMax], true
	}
	out.Entries = make([]lt.FileEntry, 0, len(entries))
	for _, en := range entries {
		out.Entries = append(out.Entries, snapshotEntry(&en))
	}
	return out, nil
}

// OpenCheckpointFile reads a file of a checkpoint's snapshot; its bytes
// are checked against their digests as they are read.
func (e *Engine) OpenCheckpointFile(ctx context.Context, sessionID, checkpointID, path string) (*lt.FileEntry, io.ReadCloser, error) {
	c, err := cleanFilesPath(path, false)
	if err != nil {
		return nil, nil, err
	}
	cp, err := e.checkpointSnapshot(ctx, sessionID, checkpointID)
	if err != nil {
		return nil, nil, err
	}
	en, err := snapshot.Lookup(ctx, e.store, cp.Snapshot, filepath.ToSlash(c))
	if err != nil {
		return nil, nil, fileError(err, path)
	}
	switch en.Type {
	case snapshot.TypeDir:
		return nil, nil, apierror.Invalid("path", "path %q is a directory: list it with GET /v1/sessions/%s/checkpoints/%s/files?path=%s", path, sessionID, checkpointID, en.Path)
	case snapshot.TypeSymlink:
		return nil, nil, apierror.Invalid("path", "path %q is a symlink (to %q): snapshots are read without following symlinks", path, en.Target)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(snapshot.CopyFile(context.WithoutCancel(ctx), e.store, en, pw))
	}()
	fe := snapshotEntry(en)
	return &fe, pr, nil
}

// checkpointSnapshot returns the checkpoint, which must have a snapshot
// the session's project owns: a snapshot id journaled by a checkpoint is
// not proof of its blobs (one journaled before owners were kept, or a
// journal that names another project's tree), so it is served only as
// the session files' snapshot view is, once the project is known to own
// it (409 otherwise).
func (e *Engine) checkpointSnapshot(ctx context.Context, sessionID, checkpointID string) (*lt.Checkpoint, error) {
	row, err := e.store.SessionGet(ctx, sessionID)
	if err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	cps, err := e.ListCheckpoints(ctx, sessionID)
	if err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	for i := range cps {
		if cps[i].ID != checkpointID {
			continue
		}
		if cps[i].Snapshot == "" {
			return nil, apierror.Conflict("checkpoint %s has no snapshot of the workspace: %s", checkpointID, cps[i].SnapshotError)
		}
		project := row.Project
		if project == "" {
			project = lt.DefaultProject
		}
		owned, err := snapshot.Owned(ctx, e.store, project, cps[i].Snapshot)
		if err != nil {
			return nil, err
		}
		if !owned {
			return nil, apierror.Conflict("the workspace snapshot %s of checkpoint %s is not its session's project's: it is not served", cps[i].Snapshot, checkpointID)
		}
		return &cps[i], nil
	}
	return nil, apierror.NotFound("checkpoint %s not found in session %s", checkpointID, sessionID)
}

func snapshotEntry(en *snapshot.Entry) lt.FileEntry {
	fe := lt.FileEntry{Name: filepath.Base(en.Path), Path: en.Path, Type: en.Type, Target: en.Target}
	if en.Type == snapshot.TypeFile {
		fe.Size, fe.SHA256 = en.Size, en.SHA256
	}
	if en.Type != snapshot.TypeSymlink {
		fe.Mode = fmt.Sprintf("%04o", en.Mode.Perm())
	}
	return fe
}

// fileSHA256 hashes the regular file rel of d.
func fileSHA256(d *workspace.Dir, rel string) (string, error) {
	f, _, err := d.OpenFile(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// askFilePath checks the path an ask_human call of kind "file" asks for:
// inside the workspace, naming a file.
func askFilePath(args askHumanArgs) (string, error) {
	if len(args.Choices) > 0 {
		return "", fmt.Errorf("ask_human: choices do not go with kind %q", lt.InputFile)
	}
	if args.Path == "" {
		return "", fmt.Errorf("ask_human: kind %q needs path, where the person's file goes", lt.InputFile)
	}
	c, err := workspace.CleanPath(args.Path)
	if err != nil {
		return "", fmt.Errorf("ask_human: %w", err)
	}
	if c == "." {
		return "", fmt.Errorf("ask_human: path %q names the workspace itself: name a file", args.Path)
	}
	if err := checkPathLength(c); err != nil {
		return "", fmt.Errorf("ask_human: %w", err)
	}
	return filepath.ToSlash(c), nil
}
