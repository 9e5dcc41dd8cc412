package longhaultype

import "time"

// EventWorkspaceChanged: a person wrote or deleted a file of the session's
// workspace through the API (data: WorkspaceChange). The change is in the
// store before the API answers; the model is told at its next call.
const EventWorkspaceChanged = "workspace.changed"

// EventWorkspaceChangeNotApplied: a person's change (workspace.changed)
// was not applied, and never will be: it was checked against a snapshot
// of a runner's workspace while the runner was out of reach (BasedOn),
// and when it came to be applied the live file was no longer what the
// person saw (the agent wrote it since). What the agent wrote is kept
// (data: WorkspaceChangeNotAppliedData).
const EventWorkspaceChangeNotApplied = "workspace.change_not_applied"

// NotAppliedConflict is the reason of a change not applied because the
// file changed since the person saw it.
const NotAppliedConflict = "conflict"

// NotAppliedFailed is the reason of a change to a runner's workspace that
// cannot be applied for a reason of its own, which trying again would
// not change: it no longer fits the disk quota (the agent filled the
// workspace since), or its path now goes through a symlink or names a
// directory. Its Error says which.
const NotAppliedFailed = "failed"

// BasedOnAbsent is a WorkspaceChange.BasedOn (and a
// WorkspaceChangeNotAppliedData.Found) saying the path held nothing.
const BasedOnAbsent = "absent"

// BasedOnSymlink is the BasedOn of the delete of a symlink: only a symlink
// is deleted, never a file a program put in its place since.
const BasedOnSymlink = "symlink"

// WorkspaceChange ops.
const (
	WorkspaceWrite  = "write"
	WorkspaceDelete = "delete"
)

// ChangedByPerson is the "by" of a change made through the API.
const ChangedByPerson = "person"

// WorkspaceChange is the data of workspace.changed and the answer of a
// file upload or delete (PUT and DELETE /v1/sessions/{id}/files/{path}).
type WorkspaceChange struct {
	// By is who made the change: "person".
	By string `json:"by"`
	// Actor is which person (nil for changes journaled before actors
	// were recorded).
	Actor *Actor `json:"actor,omitempty"`
	// Op is "write" or "delete".
	Op string `json:"op"`
	// Path is the workspace-relative path, clean, with "/" separators.
	Path string `json:"path"`
	// SHA256 and Size are the new content's (a write); the content is the
	// blob named SHA256 (GET /v1/blobs/{sha256}).
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size"`
	// PreviousSHA256 is the content the path held before ("" when it did
	// not exist).
	PreviousSHA256 string `json:"previous_sha256,omitempty"`
	// ActionID is the input action (kind "file") the upload answered.
	ActionID string `json:"action_id,omitempty"`
	// BasedOn is set on a change of a runner's workspace: what the path
	// held when the change was checked, live or (the runner out of reach)
	// in a snapshot view, "sha256:<hex>", "absent", or "symlink" (the
	// delete of a symlink: never of a file put in its place). It is applied only where the live file still holds that;
	// otherwise workspace.change_not_applied says so and the agent's file
	// is kept.
	BasedOn string `json:"based_on,omitempty"`
	// Unchanged is set (in API answers only) when an upload held the bytes
	// the file already had: nothing was journaled.
	Unchanged bool `json:"unchanged,omitempty"`
	// Seq is the journal position of the workspace.changed event (set in
	// API answers; the event's own seq says it in the journal).
	Seq int64 `json:"seq,omitempty"`
}

// WorkspaceChangeNotAppliedData is the data of workspace.change_not_applied.
type WorkspaceChangeNotAppliedData struct {
	// ChangeSeq is the seq of the workspace.changed event not applied.
	ChangeSeq int64  `json:"change_seq"`
	Op        string `json:"op"`
	Path      string `json:"path"`
	// Reason is "conflict": the file is no longer what the change was
	// based on; or "failed" (NotAppliedFailed).
	Reason string `json:"reason"`
	// BasedOn is what the person saw (the change's based_on); Found is
	// what the live workspace held when the change came to be applied
	// ("sha256:<hex>", "absent", the kind of entry: "dir", "symlink",
	// "other"; "a path through a symlink" (one planted on the way);
	// "changing" (written while it was compared); "changed since it was
	// found in conflict" (found in conflict before, never made after);
	// "unknown" (a runner's answer that was none of these)).
	BasedOn string `json:"based_on,omitempty"`
	Found   string `json:"found,omitempty"`
	// Error says why a change "failed" (never a path of a machine).
	Error string `json:"error,omitempty"`
}

// File entry types.
const (
	FileTypeFile    = "file"
	FileTypeDir     = "dir"
	FileTypeSymlink = "symlink"
	FileTypeOther   = "other"
)

// FileEntry is one entry of a workspace or snapshot listing.
type FileEntry struct {
	Name string `json:"name"`
	// Path is relative to the workspace root, with "/" separators.
	Path string `json:"path"`
	// Type is file, dir, symlink or other (a device, FIFO or socket).
	Type string `json:"type"`
	// Size is a file's length in bytes (0 for others).
	Size int64 `json:"size"`
	// SHA256 is a file's content digest (a live listing leaves it out for
	// files too large to hash there).
	SHA256 string `json:"sha256,omitempty"`
	// Target is a symlink's target, as stored; never followed.
	Target string `json:"target,omitempty"`
	// Mode holds the permission bits, in octal ("0644").
	Mode string `json:"mode,omitempty"`
	// ModTime is a live workspace file's modification time (snapshots keep
	// no times).
	ModTime *time.Time `json:"mtime,omitempty"`
	// Source and FromSnapshot say where a live download of a session on
	// a runner came from: the HTTP API sends them as FilesSourceHeader and
	// FilesSnapshotHeader, not in a listing's entries.
	Source       string `json:"-"`
	FromSnapshot string `json:"-"`
}

// FileListing is the answer of GET /v1/sessions/{id}/files?path=DIR (and of
// a checkpoint's snapshot).
type FileListing struct {
	// Path is the clean directory listed ("." for the workspace root).
	Path string `json:"path"`
	// CheckpointID and Snapshot are set when a checkpoint's snapshot was
	// listed.
	CheckpointID string `json:"checkpoint_id,omitempty"`
	Snapshot     string `json:"snapshot,omitempty"`
	// Entries are sorted by name.
	Entries []FileEntry `json:"entries"`
	// Total is how many entries the directory has; Truncated is set when
	// Entries holds fewer.
	Total     int  `json:"total"`
	Truncated bool `json:"truncated,omitempty"`
	// Writable says whether a person may change the workspace now (the
	// session is paused, idle, waiting or requires_action); false for a
	// snapshot.
	Writable bool `json:"writable"`
	// Source says where a live listing of a session whose environment is
	// on a runner came from (FilesFromEnvironment, or FilesFromSnapshot
	// with Snapshot set); empty for a workspace on the server's nodes.
	Source string `json:"source,omitempty"`
}

// Where a live file read of a session on a runner came from
// (FileListing.Source, and a download's FilesSourceHeader).
const (
	// FilesFromEnvironment: the runner's workspace itself.
	FilesFromEnvironment = "environment"
	// FilesFromSnapshot: the session's latest journaled snapshot (the
	// runner is not reachable from the node that answered, or the
	// environment is stopped), with the people's changes since.
	FilesFromSnapshot = "snapshot"
)

// FilesSourceHeader is the response header of a live download that says
// where it came from (FilesFromEnvironment or FilesFromSnapshot), and
// FilesSnapshotHeader the snapshot read in the second case.
const (
	FilesSourceHeader   = "Longhaul-Files-Source"
	FilesSnapshotHeader = "Longhaul-Files-Snapshot"
)

// Input action kinds (Action.Kind).
const (
	// InputText is an answer in words (the default).
	InputText = "text"
	// InputFile is a file a person uploads to Action.Path.
	InputFile = "file"
)
