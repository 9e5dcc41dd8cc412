package environment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// Errors every backend returns for the same situations, matched with
// errors.Is. They carry the engine's decision: what a failure means for the
// call that met it.
var (
	// ErrUnavailable: the backend cannot reach the place the environment
	// lives now (no matching runner is connected). Nothing was started:
	// the call may be made again as it is. The engine parks the session
	// with an environment_connection action.
	ErrUnavailable = errors.New("environment unavailable")
	// ErrLost: the environment went away while the call ran (its runner's
	// connection broke). Whether the call took effect is unknown: the
	// engine treats it as a crash of that call (read: run again;
	// idempotent: run again with its key; irreversible: in doubt).
	ErrLost = errors.New("environment lost during the call")
	// ErrClosed: the Environment was closed or stopped; open it again.
	ErrClosed = errors.New("environment closed")
	// ErrChanged: Stop was refused because the workspace is not the
	// snapshot the caller said it is; nothing was freed.
	ErrChanged = errors.New("workspace changed since the snapshot")
	// ErrBusy: Stop was refused because another Environment of the same
	// workspace is open (a sub-agent sharing it); nothing was freed.
	ErrBusy = errors.New("workspace in use by another environment")
	// ErrDiskQuota: a write_file or edit_file write would take the
	// workspace over its quota (Limits.DiskBytes). The message is for the
	// model.
	ErrDiskQuota = errors.New("over the workspace's disk quota")
	// ErrUnmeasurable: a write was refused because the workspace cannot
	// be measured against its quota (the quota fails closed), not because
	// it is over it. The message is for the model.
	ErrUnmeasurable = errors.New("the workspace cannot be measured against its disk quota")
	// ErrConflict: a conditional write or delete (WriteFileIf, RemoveIf)
	// found the path holding something other than its basis, and changed
	// nothing (a *ConflictError says what it found).
	ErrConflict = errors.New("the path no longer holds what the change was based on")
	// ErrPathTooLong: a path too long for the frames of a runner's
	// connection (with the bytes around it); it would be so at every try.
	ErrPathTooLong = errors.New("path: too long for a frame of the runner's connection")
)

// Condition makes a person's write or delete (WriteFileIf, RemoveIf)
// conditional on what the path holds, checked and acted on at once where
// the workspace is: no write of the environment's own (a tool's, another
// person's change, a sub-agent's) comes between the check and the change.
type Condition struct {
	// Basis is what the path must hold: "sha256:<hex>" of a regular file
	// or "absent" (workspace.BasisAbsent); "" puts no condition.
	Basis string
	// Marker names the change (an id for Record). When the change is made,
	// or found made already (the path holds what it makes), Marker is
	// recorded in the same critical section; a workspace that holds Marker
	// already is left as it is, so a change is never made twice. A change
	// found in conflict has ConflictMarker(Marker) recorded instead, and is
	// a conflict from then on, whatever the path holds later: two nodes
	// applying the same change (one at once, one at a claim) never see one
	// judge it a conflict and the other make it.
	Marker string
}

// ConflictMarker is the id a workspace records when the change marked
// marker was found in conflict there.
func ConflictMarker(marker string) string { return marker + "-conflict" }

// FoundChangedSinceConflict is a ConflictError's Found when the path holds
// the change's basis again, but the change was found in conflict before
// (Condition's Marker).
const FoundChangedSinceConflict = "changed since it was found in conflict"

// ConflictError is ErrConflict: the path held Found, not Basis.
type ConflictError struct {
	Path  string
	Basis string
	// Found is what the path held: "sha256:<hex>", "absent", the kind of
	// entry ("dir", "symlink", "other"), "changing" (a file being
	// written while it was compared), FoundChangedSinceConflict, or
	// "unknown" (a runner's answer that was none of these).
	Found string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%q holds %s, not %s: %v", e.Path, e.Found, e.Basis, ErrConflict)
}

// Is makes a *ConflictError match ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// MaxStopOpens bounds the environments opened for a stop (OpenParams.ForStop)
// that a backend holds open on one runner at once beyond its capacity: a
// stop frees a slot's worth of disk in a round trip or two, and a server
// cannot use the exemption to run more than this many more environments
// there.
const MaxStopOpens = 2

// ErrFull is ErrUnavailable where the runners the environment may open on
// are connected but at their capacity: the session waits for one of their
// environments to close.
var ErrFull = fmt.Errorf("%w: the runners are at their capacity", ErrUnavailable)

// ErrPinnedKeyChanged is ErrUnavailable where the runner the environment
// lives on (its pin: a name and the key it connected with) is connected
// under that name with another key. Nothing goes to it: the name changed
// hands, or its key was revoked and replaced, and only a person can tell
// which (the environment_connection action's "unpin" decision).
var ErrPinnedKeyChanged = fmt.Errorf("%w: the runner's name is held by another key", ErrUnavailable)

// ElsewhereError is ErrUnavailable where the environment could open on
// another node of the deployment: the runner it needs is connected there,
// not to this node (a runner holds one connection, to one node). Nothing
// was started. The engine hands the session to that node (a claim
// affinity) rather than parking it.
type ElsewhereError struct {
	// Node is the id of the node the runner is connected to.
	Node string
	// Runner names that runner.
	Runner string
	// Session names the session, in the message.
	Session string
}

func (e *ElsewhereError) Error() string {
	return fmt.Sprintf("open environment of session %s: runner %s is connected to node %s, not this one: %v", e.Session, e.Runner, e.Node, ErrUnavailable)
}

// Unwrap makes it ErrUnavailable: a caller that cannot hand the session
// over treats it as no runner here.
func (e *ElsewhereError) Unwrap() error { return ErrUnavailable }

// Backend provisions and attaches environments of one kind: local bwrap,
// local plain, a remote runner, later a container or a Kubernetes pod.
// A Backend is safe for concurrent use.
type Backend interface {
	// Name is "bwrap", "local", "runner:NAME", ...: shown to operators.
	Name() string
	// ConfinesNetwork reports whether the environment's programs reach
	// the network only through the egress proxy Open starts for
	// OpenParams.Network (bwrap, a runner with bwrap); a backend that
	// does not confine its programs leaves them the network of its host.
	ConfinesNetwork() bool
	// Open provisions the environment of a workspace, or attaches the one
	// already there (the same workspace id opened again, by the next
	// claim of the session or by a sub-agent sharing it). The workspace
	// directory is made empty when missing (Info().Provisioned): the
	// caller then restores the last snapshot (Restore) if the journal has
	// one. A workspace OpenParams.Untouched says no tool reaches may be
	// left missing until something needs it, and is then not provisioned:
	// missing, it is empty. ctx bounds only the set-up.
	Open(ctx context.Context, p *OpenParams) (Environment, error)
}

// Router is a Backend that sends each session's environment to one of
// several backends (this node's own, or a runner: internal/environment/
// remote's router). Its ConfinesNetwork alone cannot tell which one a
// session's programs run in: ConfinesNetworkOf answers for the backend
// p's environment opens (or would open) on, and where that is not known
// yet (several runners match, none is connected) for the one that
// confines least.
type Router interface {
	Backend
	ConfinesNetworkOf(p *OpenParams) bool
}

// ConfinesNetworkOf reports whether the programs of the environment p
// opens on b reach the network only through the egress proxy: b's own
// answer, or a Router's for p.
func ConfinesNetworkOf(b Backend, p *OpenParams) bool {
	if r, ok := b.(Router); ok {
		return r.ConfinesNetworkOf(p)
	}
	return b.ConfinesNetwork()
}

// OpenParams say which environment to open and how it is bounded.
type OpenParams struct {
	// Workspace is the workspace id: the session's id, or its root's for
	// a sub-agent, which shares it (workspace.ValidateSessionID).
	Workspace string
	// Session names the session that opens it, in errors.
	Session string
	// Limits bound every program run (a zero field: the backend's
	// default).
	Limits sandbox.Limits
	// Network is the session's egress (environment.network); nil: no
	// network at all.
	Network *Network
	// Snapshot bounds the workspace's snapshots (every Snapshot and the
	// check of Stop); the zero value bounds nothing.
	Snapshot SnapshotLimits
	// Project is the session's project: the runners it may use are its
	// project's.
	Project string
	// Runner asks for the environment on a self-managed runner (the
	// agent's environment.runner); nil: on the backend's own machine. A
	// backend that runs no environment elsewhere refuses it.
	Runner *RunnerSelector
	// Pinned names the runner the session's environment lives on (the
	// journal's environment.opened): it wins over Runner's choice, so
	// that a session goes back to its workspace.
	Pinned string
	// ForStop says the environment is opened only to be snapshotted and
	// stopped (an idle stop of a parked session, which holds no slot):
	// a backend with a capacity does not count it against it (a runner at
	// its capacity can still free a workspace), within a bound of its own
	// (MaxStopOpens), and refuses anything but Holds, Snapshot, Stop and
	// Close on it (ErrBusy). Only for a pinned environment: one that lives
	// nowhere yet has nothing to stop.
	ForStop bool
	// PinnedKey is the key id Pinned connected with when the environment
	// was opened there: a runner of that name holding another key (one
	// that took the name once its holder left) is not the session's, and
	// is refused as no runner at all (ErrUnavailable). "": any key.
	PinnedKey string
	// Unshared says no other session works in the workspace: the session
	// is not a sub-agent and spawns none. The snapshots of its copy while
	// it is empty are then noted in memory only, with no list file made
	// beside it (workspace.Manager.RecordEmptySnapshot): a restart that
	// forgets them finds the copy empty, which holds them all the same,
	// while a copy shared with sub-agents must keep the root's entry on
	// disk before a sub-agent's files land in it.
	Unshared bool
	// Untouched says, of an Unshared workspace, that no tool of the
	// session reaches it: its tools are the application's functions, the
	// engine's own, MCP servers over HTTP and tools that say they never
	// touch it (tool.WorkspaceFree). Only a person's change (or a
	// restore) writes into such a copy, so a backend may leave its
	// directory unmade until something needs it: a copy missing is then
	// an empty one, which holds the empty snapshot and nothing else, and
	// is not a copy lost (Info().Provisioned stays false). A directory is
	// an inode, which on some file systems costs more than the rest of a
	// session's step.
	Untouched bool
}

// RunnerSelector picks a runner: the one named Name, or one with all of
// Labels (exactly one of them is set).
type RunnerSelector struct {
	Name   string
	Labels []string
}

// Matches reports whether the runner named name with labels is one s
// asks for: by name, or with all of s's labels among its own.
func (s *RunnerSelector) Matches(name string, labels []string) bool {
	switch {
	case s == nil:
		return false
	case s.Name != "":
		return name == s.Name
	case len(s.Labels) == 0:
		return false
	}
	for _, l := range s.Labels {
		if !slices.Contains(labels, l) {
			return false
		}
	}
	return true
}

// Check names the first field of p that is not valid (every backend's
// Open refuses the same params the same way).
func (p *OpenParams) Check() error {
	if p == nil {
		return errors.New("open environment: params: is nil")
	}
	if err := workspace.ValidateSessionID(p.Workspace); err != nil {
		return fmt.Errorf("open environment: params.workspace: %w", err)
	}
	if err := workspace.ValidateSessionID(p.Session); err != nil {
		return fmt.Errorf("open environment: params.session: %w", err)
	}
	if p.Untouched && !p.Unshared {
		// A sub-agent's tools may write into a shared copy at any time.
		return errors.New("open environment: params.untouched: only for an unshared workspace (params.unshared)")
	}
	return nil
}

// Network is what the egress proxy of an environment lets through, and
// where its decisions go. The allowlist and ports cross the wire to a
// runner (it runs the proxy next to the sandbox); the decisions come back.
type Network struct {
	// Allow and Ports: tool.NetworkPolicy's, validated by egress.NewPolicy.
	Allow []string
	Ports []int
	// ControlPlane: the server's own addresses, refused whatever Allow
	// says. A remote backend sends the addresses, never credentials.
	ControlPlane *egress.ControlPlane
	// OnEvent receives every connection decision (the engine journals
	// them with the call's outcome). It must not block.
	OnEvent func(tool.NetworkEvent)
}

// SnapshotLimits bound a workspace's snapshots (snapshot.Options').
type SnapshotLimits struct {
	MaxFileBytes  int64
	MaxTotalBytes int64
	// Exclude: snapshot.Options.Exclude.
	Exclude []string
}

// Info describes an open Environment.
type Info struct {
	// Backend is the Backend's Name.
	Backend string
	// Provisioned is true when Open found no workspace and made an empty
	// one: whatever the journal's last snapshot holds must be restored.
	Provisioned bool
	// Runner names the runner the environment lives on; "" when it lives
	// on the server's node.
	Runner string
	// RunnerKey is the id of the key that runner connected with.
	RunnerKey string
}

// Environment is one open environment: a workspace and the sandbox its
// programs run in. Every method but Info may block on the backend (a round
// trip to a runner) and fails with ErrClosed once Close or Stop ran, with
// ErrLost when the environment went away mid-call and with ErrUnavailable
// when it cannot be reached at all. It is safe for concurrent use.
type Environment interface {
	Info() Info

	// Run runs one command by `sh -c` in the workspace, under the
	// limits (tool.Exec: the shell tool's).
	Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error)
	// Start starts a long-lived program (an MCP stdio server) in the
	// sandbox; ctx bounds only its start. It runs until it exits, Stop or
	// Kill ends it, or the Environment is closed.
	Start(ctx context.Context, req *sandbox.StartRequest) (Process, error)

	// ReadFile, WriteFile and List are the file tools' operations, with
	// workspace.Dir's semantics: paths are workspace-relative, confined
	// to the workspace (workspace.ErrEscapes, workspace.ErrInvalidPath,
	// fs.ErrNotExist), and error messages name only those paths.
	// WriteFile is atomic, checks the disk quota first (ErrDiskQuota)
	// and tells the snapshot record which path it wrote.
	ReadFile(ctx context.Context, rel string, offset, limit int64) (*workspace.ReadResult, error)
	WriteFile(ctx context.Context, rel string, data []byte) error
	List(ctx context.Context, rel string, max int) (*workspace.Listing, error)
	// Remove deletes the file or symlink rel, reached without following
	// any symlink (workspace.Dir.Remove: a person's delete, applied again
	// after a restore); a directory is refused (workspace.ErrInvalidPath).
	Remove(ctx context.Context, rel string) error
	// StatDirect and WriteFileDirect are for a person's change (the
	// engine's file routes): rel is reached without following any
	// symlink (workspace.Dir.StatDirect, WriteDirect: a symlinked parent
	// is refused, workspace.ErrInvalidPath or an *EscapeError), so a
	// symlink the model planted cannot redirect it. StatDirect describes
	// rel's own entry (nil when it does not exist); WriteFileDirect is
	// WriteFile refusing a symlink at rel (ErrInvalidPath) rather than
	// writing through it.
	StatDirect(ctx context.Context, rel string) (*workspace.Entry, error)
	WriteFileDirect(ctx context.Context, rel string, data []byte) error
	// WriteFileIf and RemoveIf are WriteFileDirect and Remove made only
	// where rel holds c.Basis (a *ConflictError otherwise, nothing
	// changed), compared and made under one lock of the workspace where
	// it lives, and c.Marker recorded with them (Condition): a person's
	// change journaled against what the person saw. A path that already
	// holds what the change makes (the same bytes, or nothing for a
	// delete) is no conflict: only the marker is recorded.
	WriteFileIf(ctx context.Context, rel string, data []byte, c Condition) error
	RemoveIf(ctx context.Context, rel string, c Condition) error
	// CheckWrite reports, writing nothing, whether a write of size bytes
	// would take the workspace over its disk quota (ErrDiskQuota, as
	// WriteFile would fail): a person's change is checked where the
	// workspace is before it is journaled, and written later.
	CheckWrite(ctx context.Context, size int64) error
	// SQLiteQuery runs the sqlite_query tool's statement on a database
	// file of the workspace, where the workspace is (tool.RunSQLite:
	// read-only, confined to the workspace, within the request's limits,
	// checked again here). A problem of the query is the answer's Error;
	// an error is the environment's.
	SQLiteQuery(ctx context.Context, req *tool.SQLiteRequest) (*tool.SQLiteAnswer, error)

	// Snapshot takes an incremental, content-addressed snapshot of the
	// workspace into the backend's blobs and returns its id (only the
	// blobs the store lacks are sent).
	Snapshot(ctx context.Context) (string, snapshot.Stats, error)
	// Restore makes the workspace snapshot id (fetching only the blobs
	// this environment's side lacks), removing what id does not hold.
	Restore(ctx context.Context, id string) (snapshot.Stats, error)
	// Holds reports whether the workspace is known to be snapshot id
	// (this side took or restored it last and nothing was written
	// since): a false answer means "restore to be sure", not "different".
	Holds(ctx context.Context, id string) (bool, error)
	// Record notes that the workspace now holds id (not a snapshot: a
	// marker the engine names, such as a person's change it applied
	// through WriteFile or Remove), so that Holds(id) is true until the
	// workspace is provisioned anew. It lets the node that runs the
	// session know, wherever the workspace lives, which of the journal's
	// changes it already holds.
	Record(ctx context.Context, id string) error

	// Stop frees the environment between activity periods: it ends the
	// programs Start started (what they wrote must be in id or nowhere),
	// checks that the workspace is snapshot id (ErrChanged if not), stops
	// the proxy and removes the workspace; the next Open of the workspace
	// provisions it again, to be restored from id. Refused with ErrBusy
	// while another Environment of the workspace is open or a call of this
	// one is in flight (calls made while it runs get ErrBusy too). A
	// refused Stop leaves the Environment open (its programs ended); a
	// successful one closes it.
	Stop(ctx context.Context, id string) error
	// Close ends the programs Start started and the egress proxy, and
	// keeps the workspace for the next Open. It is safe to call twice.
	Close() error
}

// Process is a program Environment.Start started (*sandbox.Process is
// one; a remote backend's relays the program's stdin and stdout).
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.ReadCloser
	// Done is closed once the program has ended.
	Done() <-chan struct{}
	// Stderr is what it wrote to its standard error so far (bounded).
	Stderr() string
	// Exit says how it ended, "" while it runs.
	Exit() string
	// Stop closes its stdin, waits up to grace, then kills it.
	Stop(grace time.Duration)
	// Kill kills it at once.
	Kill()
}

var _ Process = (*sandbox.Process)(nil)

// Discarder is a Backend that can free a copy of a workspace it keeps on
// its own machine when no environment of it holds that copy open: a copy
// left behind on one node of a deployment after another node stopped the
// session's environment (an idle stop journaled there frees only the
// stopping node's copy).
type Discarder interface {
	// DiscardCopy removes this machine's copy of workspace if it has one
	// and no Environment of it is open, and only if stale confirms, asked
	// while no Open of the workspace can start, that the copy is not the
	// session's any more (its journal says its environment is stopped).
	// It reports whether a copy was removed.
	DiscardCopy(ctx context.Context, workspace string, stale func(context.Context) (bool, error)) (bool, error)
}
