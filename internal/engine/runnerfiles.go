package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// A person's file operations on a session whose environment lives on a
// self-managed runner (its agent's environment.runner). The server's own
// copy of such a workspace is no one's: it is never read, written or
// restored for it. Instead:
//
//   - A read (a listing, a download) comes from the runner's workspace,
//     reached through the session's Environment, when this node can reach
//     the runner (it holds the runner's connection, or the router hands
//     the call to the node that does) and that workspace is known to hold
//     the journal's snapshot (Environment.Holds): one the runner made
//     anew is no one's, and an open that made it removes it again, so
//     that a person's read leaves nothing on the runner. Otherwise, and
//     always while the environment is stopped (an idle stop: nothing is rebuilt by a read),
//     it comes from the session's latest journaled snapshot (the stop's
//     one while stopped), read from the server's blobs once the session's
//     project is checked to own it, with the people's changes journaled
//     since laid over it. The answer says which (FileListing.Source, the
//     download's Longhaul-Files-Source header).
//   - A write or delete is journaled first, as on the server's nodes
//     (workspacesync.go), checked against what the same read sees. It is
//     then applied to the runner's workspace at once when this node
//     reaches it, and its marker recorded there (Environment.Record);
//     otherwise (or when it does not hold the journal's snapshot) the
//     node that runs the session next applies it before its next tool
//     call (runner.catchUpPersonChanges, after a restore if needed).
//
// Such an open counts as one on the runner while the request lasts, and
// the runner refuses to stop an environment whose workspace another has
// open (ErrBusy): an idle stop of the session meanwhile waits for the
// request to end (personopens.go, at most personOpenWait) and stops then,
// journaling no refusal.

// remoteListHashBytes bounds how much of the files a live listing of a
// runner's workspace reads to give their digests: they cross the link.
const remoteListHashBytes = 8 << 20

// runnerFiles is what a person's file operation reads on a session on a
// runner: its Environment (env), or a snapshot (snap, "" for an empty
// workspace) with the people's changes since.
type runnerFiles struct {
	st      *journal.State
	project string
	env     environment.Environment
	snap    string
	// changes are the people's changes journaled after snap, by path
	// (the last one of each).
	changes map[string]journal.PersonChange
	// elsewhere is set when the runner holding the workspace is
	// connected to another node: the snapshot is only what a read may
	// show, never what a change may be checked against (refuseElsewhere).
	elsewhere *environment.ElsewhereError
	// diskBytes is the agent's environment.disk_mb in bytes (0: the
	// runner's default, not known here).
	diskBytes int64
	// ended uncounts env from the engine's personOpens (nil: none).
	ended func()
}

// close closes the environment v read (if any); safe to call twice and
// on nil.
func (v *runnerFiles) close() {
	if v != nil && v.env != nil {
		_ = v.env.Close()
	}
	if v != nil && v.ended != nil {
		v.ended()
	}
}

func (v *runnerFiles) source() string {
	if v.env != nil {
		return lt.FilesFromEnvironment
	}
	return lt.FilesFromSnapshot
}

// onRunner returns the runner selector of a session's agent, nil for a
// session whose environment is on the server's nodes.
func onRunner(row *store.SessionRow) (*lt.Environment, error) {
	var spec lt.AgentSpec
	if err := json.Unmarshal(row.Spec, &spec); err != nil {
		return nil, fmt.Errorf("decode agent spec of %s: %w", row.ID, err)
	}
	if spec.Environment == nil || spec.Environment.Runner == nil {
		return nil, nil
	}
	return spec.Environment, nil
}

// openRunnerFiles opens what a person's file operation on st reads (see
// above); nil when st's environment is not on a runner.
func (e *Engine) openRunnerFiles(ctx context.Context, row *store.SessionRow, st *journal.State) (*runnerFiles, error) {
	envSpec, err := onRunner(row)
	if err != nil || envSpec == nil {
		return nil, err
	}
	sel := envSpec.Runner
	v := &runnerFiles{st: st, project: st.Project(), diskBytes: sandboxLimits(envSpec).DiskBytes}
	pin, err := e.environmentPin(ctx, st)
	if err != nil {
		return nil, err
	}
	if !st.EnvironmentStopped && pin.runner != "" {
		env, err := e.envs.Open(ctx, &environment.OpenParams{
			Workspace: st.WorkspaceID(), Session: st.Session.ID, Snapshot: snapshotLimits, Project: v.project,
			// The agent's quota, as its own opens ask: a person's write is
			// checked against it (checkRunnerQuota) and applied under it.
			Limits: sandboxLimits(envSpec),
			Runner: &environment.RunnerSelector{Name: sel.Name, Labels: sel.Labels}, Pinned: pin.runner, PinnedKey: pin.key,
		})
		switch {
		case err == nil && env.Info().Provisioned:
			// The runner had lost the workspace: nothing there is the
			// session's yet (its next claim restores it).
			e.discardProvisioned(ctx, st, env)
		case err == nil:
			held, err := holdsJournalsWorkspace(ctx, env, st)
			if err == nil && held {
				v.env = env
				v.ended = e.personOpens.begin(st.WorkspaceID())
				return v, nil
			}
			_ = env.Close()
			if err != nil && !environmentGone(err) {
				return nil, fmt.Errorf("check the environment of session %s: %w", st.Session.ID, err)
			}
			// Not known to hold the journal's snapshot (the runner lost
			// the workspace and something opened it anew since): what
			// it holds is no one's, and a write applied to it would make
			// it look up to date. Or it lacks a person's change journaled
			// while it was out of reach. The snapshot view is read; a
			// write is only journaled, for the session's next claim,
			// which restores the workspace or applies the changes in
			// order first.
		case errors.Is(err, environment.ErrUnavailable):
			errors.As(err, &v.elsewhere)
		default:
			return nil, fmt.Errorf("open the environment of session %s: %w", st.Session.ID, err)
		}
	}
	// Never opened, stopped, or out of reach: the journal's snapshot.
	v.snap = st.WorkspaceSnapshot()
	if v.snap != "" {
		owned, err := snapshot.Owned(ctx, e.store, v.project, v.snap)
		if err != nil {
			return nil, err
		}
		if !owned {
			return nil, apierror.Conflict("the workspace snapshot %s of session %s is not its project's: it is not served", v.snap, st.Session.ID)
		}
	}
	changes := st.ChangesToApply() // those the snapshot lacks
	v.changes = make(map[string]journal.PersonChange, len(changes))
	for _, c := range changes {
		v.changes[c.Path] = c
	}
	return v, nil
}

// holdsJournalsWorkspace reports whether env is known to hold the
// journal's workspace snapshot and every person's change journaled since
// (the last one's marker): only then is it the session's workspace (the
// snapshot true when there is none yet: whatever the session did is there
// only). A change journaled while the runner was out of reach is not
// there yet: a later change applied live over it would carry a marker
// that says it was, and the session's claim would never apply it.
func holdsJournalsWorkspace(ctx context.Context, env environment.Environment, st *journal.State) (bool, error) {
	if snap := st.WorkspaceSnapshot(); snap != "" {
		held, err := env.Holds(ctx, snap)
		if err != nil || !held {
			return false, err
		}
	}
	changes := st.ChangesToApply()
	if len(changes) == 0 {
		return true, nil
	}
	return env.Holds(ctx, changeMarker(changes[len(changes)-1].Seq))
}

// environmentGone reports whether err says the environment cannot be
// reached (or went away) rather than that something failed in it.
func environmentGone(err error) bool {
	return errors.Is(err, environment.ErrLost) || errors.Is(err, environment.ErrUnavailable) || errors.Is(err, environment.ErrClosed)
}

// discardProvisioned removes again the empty workspace a person's file
// operation made on the runner by opening its environment (the seam has
// no open that does not provision): left there, it would be found by the
// next open as a workspace that was not lost. The empty workspace is
// stopped at its own snapshot; should anything else have it open
// meanwhile (the session's claim, which restores it), the stop is refused
// and it is only closed.
func (e *Engine) discardProvisioned(ctx context.Context, st *journal.State, env environment.Environment) {
	id, _, err := env.Snapshot(ctx)
	if err == nil {
		err = env.Stop(ctx, id)
	}
	if err != nil {
		e.log.Debug("remove the empty workspace a person's file operation made on the runner", "session", st.Session.ID, "err", err)
		_ = env.Close()
	}
}

// runnerFilesOf opens what a person's read of session sessionID reads
// when its environment is on a runner; nil when it is not.
func (e *Engine) runnerFilesOf(ctx context.Context, sessionID string) (*runnerFiles, error) {
	row, st, err := e.loadState(ctx, sessionID)
	if err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	return e.openRunnerFiles(ctx, row, st)
}

// list lists directory c (clean, "." for the root).
func (v *runnerFiles) list(ctx context.Context, e *Engine, c string) (*lt.FileListing, error) {
	out := &lt.FileListing{Path: filepath.ToSlash(c), Writable: filesWritable(v.st) == nil, Source: v.source()}
	if v.env == nil {
		return v.listSnapshot(ctx, e, out)
	}
	l, err := v.env.List(ctx, c, 0)
	if err != nil {
		return nil, err
	}
	out.Total, out.Truncated = l.Total, l.Truncated
	budget := int64(remoteListHashBytes)
	for _, en := range l.Entries {
		p := en.Name
		if c != "." {
			p = path.Join(filepath.ToSlash(c), en.Name)
		}
		fe := lt.FileEntry{Name: en.Name, Path: p, Type: string(en.Type), Target: en.Target}
		if en.Type == workspace.EntryFile {
			fe.Size = en.Size
			if en.Size <= budget {
				if r, err := v.env.ReadFile(ctx, p, 0, en.Size+1); err == nil && !r.Truncated {
					fe.SHA256 = sha256Hex(r.Data)
					budget -= en.Size
				}
			}
		}
		out.Entries = append(out.Entries, fe)
	}
	if out.Entries == nil {
		out.Entries = []lt.FileEntry{}
	}
	return out, nil
}

// listSnapshot lists out.Path in the snapshot, with the people's changes
// since laid over it.
func (v *runnerFiles) listSnapshot(ctx context.Context, e *Engine, out *lt.FileListing) (*lt.FileListing, error) {
	dir := out.Path
	out.Snapshot = v.snap
	byName := map[string]lt.FileEntry{}
	if v.snap != "" {
		entries, err := snapshot.ListDir(ctx, e.store, v.snap, dir)
		switch {
		case err == nil:
			for i := range entries {
				byName[path.Base(entries[i].Path)] = snapshotEntry(&entries[i])
			}
		case errors.Is(err, fs.ErrNotExist) && v.changedUnder(dir):
		default:
			return nil, err
		}
	} else if dir != "." && !v.changedUnder(dir) {
		return nil, fs.ErrNotExist
	}
	for p, c := range v.changes {
		rel, under := p, dir == "."
		if !under && strings.HasPrefix(p, dir+"/") {
			rel, under = p[len(dir)+1:], true
		}
		if !under {
			continue
		}
		if first, _, deeper := strings.Cut(rel, "/"); deeper {
			// A directory a person's write made, which the snapshot
			// lacks: listed, as it is listable.
			if _, ok := byName[first]; !ok && c.Op == lt.WorkspaceWrite {
				byName[first] = lt.FileEntry{Name: first, Path: path.Join(dir, first), Type: lt.FileTypeDir}
			}
			continue
		}
		name := rel
		if c.Op == lt.WorkspaceDelete {
			delete(byName, name)
			continue
		}
		data, err := e.personBlob(ctx, c.SHA256)
		if err != nil {
			return nil, err
		}
		byName[name] = lt.FileEntry{Name: name, Path: p, Type: lt.FileTypeFile, Size: int64(len(data)), SHA256: c.SHA256}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	out.Total = len(names)
	if len(names) > workspace.DefaultListMax {
		names, out.Truncated = names[:workspace.DefaultListMax], true
	}
	out.Entries = make([]lt.FileEntry, 0, len(names))
	for _, n := range names {
		out.Entries = append(out.Entries, byName[n])
	}
	return out, nil
}

// changedUnder reports whether a person wrote a file under dir since the
// snapshot (a directory the snapshot lacks that a change made).
func (v *runnerFiles) changedUnder(dir string) bool {
	for p, c := range v.changes {
		if c.Op == lt.WorkspaceWrite && strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// read returns the file c's bytes (at most MaxFileBytes) and its entry.
func (v *runnerFiles) read(ctx context.Context, e *Engine, c string) (*lt.FileEntry, []byte, error) {
	slash := filepath.ToSlash(c)
	if v.env != nil {
		r, err := v.env.ReadFile(ctx, c, 0, MaxFileBytes)
		if err != nil {
			return nil, nil, err
		}
		if r.Truncated {
			return nil, nil, apierror.TooLarge("path %q is larger than %d bytes: read it from a checkpoint's snapshot", slash, MaxFileBytes)
		}
		return &lt.FileEntry{Name: path.Base(slash), Path: slash, Type: lt.FileTypeFile, Size: int64(len(r.Data)), SHA256: sha256Hex(r.Data),
			Source: lt.FilesFromEnvironment}, r.Data, nil
	}
	fe := &lt.FileEntry{Name: path.Base(slash), Path: slash, Type: lt.FileTypeFile, Source: lt.FilesFromSnapshot, FromSnapshot: v.snap}
	if c, ok := v.changes[slash]; ok {
		if c.Op == lt.WorkspaceDelete {
			return nil, nil, fs.ErrNotExist
		}
		data, err := e.personBlob(ctx, c.SHA256)
		if err != nil {
			return nil, nil, err
		}
		fe.Size, fe.SHA256 = int64(len(data)), c.SHA256
		return fe, data, nil
	}
	if v.snap == "" {
		return nil, nil, fs.ErrNotExist
	}
	en, err := snapshot.Lookup(ctx, e.store, v.snap, slash)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case en.Type == snapshot.TypeDir:
		return nil, nil, fmt.Errorf("%w: %q is a directory", workspace.ErrInvalidPath, slash)
	case en.Type == snapshot.TypeSymlink:
		return nil, nil, apierror.Invalid("path", "path %q is a symlink (to %q): the snapshot is read without following symlinks", slash, en.Target)
	case en.Size > MaxFileBytes:
		return nil, nil, apierror.TooLarge("path %q is larger than %d bytes: read it from a checkpoint's snapshot", slash, MaxFileBytes)
	}
	var buf bytes.Buffer
	if err := snapshot.CopyFile(ctx, e.store, en, &buf); err != nil {
		return nil, nil, err
	}
	fe.Size, fe.SHA256, fe.Mode = en.Size, en.SHA256, fmt.Sprintf("%04o", en.Mode.Perm())
	return fe, buf.Bytes(), nil
}

// listRunnerFiles is ListFiles for a session on a runner.
func (e *Engine) listRunnerFiles(ctx context.Context, v *runnerFiles, sessionID, dir, c string) (*lt.FileListing, error) {
	l, err := v.list(ctx, e, c)
	if err != nil {
		if strings.Contains(err.Error(), "not a directory") && !errors.Is(err, fs.ErrNotExist) {
			return nil, apierror.Invalid("path", "path %q is not a directory: read it with GET /v1/sessions/%s/files/%s", dir, sessionID, filepath.ToSlash(c))
		}
		return nil, fileError(err, dir)
	}
	return l, nil
}

// openRunnerFile is OpenFile for a session on a runner.
func (e *Engine) openRunnerFile(ctx context.Context, v *runnerFiles, sessionID, p, c string) (*lt.FileEntry, io.ReadCloser, error) {
	fe, data, err := v.read(ctx, e, c)
	if err != nil {
		if errors.Is(err, workspace.ErrInvalidPath) && strings.Contains(err.Error(), "is a directory") {
			return nil, nil, apierror.Invalid("path", "path %q is a directory: list it with GET /v1/sessions/%s/files?path=%s", p, sessionID, filepath.ToSlash(c))
		}
		return nil, nil, fileError(err, p)
	}
	return fe, io.NopCloser(bytes.NewReader(data)), nil
}

// prepareRunnerChange is prepareChange for a session on a runner: the
// change is checked against what a read sees, a write against the
// runner's disk quota (checkRunnerQuota), and, on the runner's
// workspace, held to the same rule as on the server's copy: the
// path goes through no symlink, and a write is not made through one
// (Environment.StatDirect; applied by WriteFileDirect).
func (e *Engine) prepareRunnerChange(ctx context.Context, v *runnerFiles, op, c string, data []byte) (*lt.WorkspaceChange, error) {
	slash := filepath.ToSlash(c)
	if err := v.refuseElsewhere(); err != nil {
		return nil, err
	}
	change := &lt.WorkspaceChange{By: lt.ChangedByPerson, Op: op, Path: slash}
	if v.env != nil {
		en, err := v.env.StatDirect(ctx, c)
		if err != nil {
			return nil, fileError(err, slash)
		}
		switch {
		case en == nil:
		case en.Type == workspace.EntryDir:
			return nil, apierror.Invalid("path", "path %q is a directory", slash)
		case en.Type == workspace.EntrySymlink && op == lt.WorkspaceWrite:
			return nil, apierror.Invalid("path", "path %q is a symlink: write to the path of its target instead", slash)
		case en.Type == workspace.EntrySymlink:
			// The link itself is deleted, never its target, nor a file
			// a program puts in its place before the delete is made.
			change.BasedOn = lt.BasedOnSymlink
			return change, nil
		case en.Type != workspace.EntryFile:
			return nil, apierror.Invalid("path", "path %q is not a regular file (%s)", slash, en.Type)
		}
	}
	fe, _, err := v.read(ctx, e, c)
	switch {
	case err == nil:
		change.PreviousSHA256 = fe.SHA256
	case errors.Is(err, fs.ErrNotExist) && op == lt.WorkspaceWrite:
	case errors.Is(err, workspace.ErrInvalidPath) && strings.Contains(err.Error(), "is a directory"):
		return nil, apierror.Invalid("path", "path %q is a directory", slash)
	default:
		return nil, fileError(err, slash)
	}
	// What the person saw: the snapshot view (the runner may still hold
	// a workspace the agent wrote since), or the live file, which a
	// program of the environment may write before the change is applied.
	// The change is made only where the file still is that, compared and
	// written at once on the runner (applyChanges, Environment.WriteFileIf),
	// never over a later write.
	change.BasedOn = basisOfSHA(change.PreviousSHA256)
	if op == lt.WorkspaceWrite {
		change.SHA256, change.Size = sha256Hex(data), int64(len(data))
		if err := e.checkRunnerQuota(ctx, v, slash, change.Size); err != nil {
			return nil, err
		}
	}
	return change, nil
}

// checkRunnerQuota refuses (413) a person's write that would take the
// runner's workspace over its disk quota, before it is journaled: refused
// only when applied, it would be journaled, reported to the model, and
// never be in the workspace. The runner's workspace answers when this
// node reaches it (Environment.CheckWrite: its usage and the quota it
// granted); otherwise the usage is estimated from the snapshot view
// (viewBytes) against the quota the agent asks (environment.disk_mb),
// the new file counted whole as the runner's own check does. A runner
// too old to answer leaves the check to the write itself.
func (e *Engine) checkRunnerQuota(ctx context.Context, v *runnerFiles, slash string, size int64) error {
	if v.env == nil {
		if v.diskBytes <= 0 {
			return nil // the runner's default quota: not known here
		}
		used, dirs, err := v.viewBytes(ctx, e)
		if err != nil {
			return fmt.Errorf("estimate the disk use of session %s's workspace: %w", v.st.Session.ID, err)
		}
		n := newParents(slash, func(dir string) (bool, error) { return dirs[dir], nil })
		if used+writeBytes(size, n) > v.diskBytes {
			return apierror.TooLarge("write %q: %d bytes (and %d new directories) would take the workspace (about %d bytes used, as its last snapshot and the people's changes since say) over its disk quota of %d MiB (environment.disk_mb)",
				slash, size, n, used, v.diskBytes>>20)
		}
		return nil
	}
	n := newParents(slash, func(dir string) (bool, error) {
		en, err := v.env.StatDirect(ctx, dir)
		return en != nil, err
	})
	// The runner counts the file at least sandbox.MinEntryBytes; the
	// directories the write makes are added here, as much each.
	err := v.env.CheckWrite(ctx, size+int64(n)*sandbox.MinEntryBytes)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, environment.ErrUnmeasurable):
		return unmeasurable(slash, err)
	case errors.Is(err, environment.ErrDiskQuota):
		return apierror.TooLarge("write %q: %v", slash, err)
	case environmentGone(err):
		return fmt.Errorf("check the disk quota of session %s's workspace: %w", v.st.Session.ID, err)
	default:
		e.log.Warn("the runner did not check a person's write against its disk quota; the write checks it when applied", "session", v.st.Session.ID, "err", err)
		return nil
	}
}

// viewBytes estimates the disk use of the workspace as the snapshot view
// shows it: the sizes of the snapshot's files, those the people's
// changes since replace or delete taken out and their writes counted, with
// the directories those writes make. It returns the directories of the
// view too (slash paths). What the agent wrote after the snapshot is not
// in it: the write is checked against that when it is applied.
func (v *runnerFiles) viewBytes(ctx context.Context, e *Engine) (int64, map[string]bool, error) {
	var used int64
	dirs := map[string]bool{}
	if v.snap != "" {
		m, err := snapshot.Load(ctx, e.store, v.snap)
		if err != nil {
			return 0, nil, err
		}
		// Each entry (file, directory, link) counts as the runner's
		// quota counts it: at least sandbox.MinEntryBytes.
		for i := range m.Entries {
			en := &m.Entries[i]
			if en.Type == snapshot.TypeDir {
				dirs[en.Path] = true
			}
			if _, changed := v.changes[en.Path]; !changed || en.Type != snapshot.TypeFile {
				used += max(en.Size, sandbox.MinEntryBytes)
			}
		}
	}
	paths := slices.Sorted(maps.Keys(v.changes)) // the same count whatever the map's order
	for _, p := range paths {
		if c := v.changes[p]; c.Op == lt.WorkspaceWrite {
			n := newParents(p, func(dir string) (bool, error) { return dirs[dir], nil })
			used += writeBytes(c.Size, n)
			for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
				dirs[d] = true
			}
		}
	}
	return used, dirs, nil
}

// writeBytes is what a write of size bytes that makes dirs new
// directories counts for in a workspace's usage, as the runner's quota
// counts entries: each at least sandbox.MinEntryBytes.
func writeBytes(size int64, dirs int) int64 {
	return max(size, sandbox.MinEntryBytes) + int64(dirs)*sandbox.MinEntryBytes
}

// newParents counts the parent directories of the slash path p that a
// write of it would make: those exists says are not there, from the
// deepest up to the first that is. A failure of exists counts the rest
// as there (the write itself is checked when applied).
func newParents(p string, exists func(dir string) (bool, error)) int {
	n := 0
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		ok, err := exists(d)
		if ok || err != nil {
			break
		}
		n++
	}
	return n
}

// refuseElsewhere refuses a person's change made through a node that does
// not hold the connection of the runner whose workspace it is (a runner
// holds one connection, to one node, and nodes relay no request to each
// other). That runner's workspace is live: the agent may have written
// since the journal's snapshot, so the change could be checked (If-Match,
// previous_sha256) only against a stale view, and applied later over what
// the agent wrote. It is refused (409) and nothing is journaled: sent
// again, the request may reach the runner's node.
func (v *runnerFiles) refuseElsewhere() error {
	if v.elsewhere == nil {
		return nil
	}
	return apierror.Conflict("the workspace of session %s is live on runner %s, which is connected to another node of this deployment (%s), not to the one that answered: nothing was changed. Send the change again so that it reaches that node (a download's Longhaul-Files-Source header says %q when the answering node reaches the runner)",
		v.st.Session.ID, v.elsewhere.Runner, v.elsewhere.Node, lt.FilesFromEnvironment)
}

// applyRunnerChange applies a journaled change to the runner's workspace
// when this node reaches it; otherwise it waits for the session's next
// claim (catchUpPersonChanges). A change found not applicable (the file
// written since it was checked, a symlink planted on its path) is
// journaled as not applied at once (journalNotAppliedNow).
func (e *Engine) applyRunnerChange(ctx context.Context, v *runnerFiles, st *journal.State, c journal.PersonChange) {
	if v.env == nil {
		return
	}
	// Journaled already: a client gone now must not leave it without its
	// marker (the live workspace would then not be used until a claim).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	failed, notApplied, err := e.applyChanges(ctx, st, v.env, []journal.PersonChange{c})
	if err == nil && len(notApplied) > 0 {
		err = e.journalNotAppliedNow(ctx, st.Session.ID, notApplied)
	}
	if err == nil && len(failed) > 0 {
		err = errors.New(failed[0])
	}
	if err != nil {
		e.log.Warn("apply a person's change to the runner's workspace; the session's next claim applies it", "session", st.Session.ID, "err", err)
	}
}

// journalNotAppliedNow journals, from an API request, people's changes
// found not applicable (workspace.change_not_applied), each only while it
// is still to apply: a claim that judged it meanwhile journaled it
// already. The runner's workspace decided under its lock, with the
// change's marker, so a change judged so here was never made there.
func (e *Engine) journalNotAppliedNow(ctx context.Context, sessionID string, ds []lt.WorkspaceChangeNotAppliedData) error {
	for attempt := 0; ; attempt++ {
		row, st, err := e.loadState(ctx, sessionID)
		if err != nil {
			return err
		}
		pending := make(map[int64]bool)
		for _, c := range st.PersonChanges {
			pending[c.Seq] = true
		}
		b := e.newBatch(ctx, st, e.cfg.NodeID)
		turnID, step := "", 0
		if t := st.CurrentTurn(); t != nil {
			turnID = t.ID
			if st.Step != nil {
				step = st.Step.N
			}
		}
		n := 0
		for _, d := range ds {
			if !pending[d.ChangeSeq] {
				continue
			}
			if err := b.add(lt.EventWorkspaceChangeNotApplied, turnID, step, d); err != nil {
				return err
			}
			n++
		}
		if n == 0 {
			return nil
		}
		p, err := b.appendParams(row.LastSeq, nil, false)
		if err != nil {
			return err
		}
		if _, err := e.store.EventAppend(ctx, p); err != nil {
			if errors.Is(err, store.ErrConflict) && attempt < 20 {
				continue // the journal moved: judged again on the newer state
			}
			return fmt.Errorf("append to session %s: %w", sessionID, err)
		}
		return nil
	}
}
