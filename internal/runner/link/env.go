package link

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The methods of a remote environment (docs/dev/environments.md, "The wire
// to a runner"). The server calls the runner's; the runner calls the
// server's network.event and blob.* (and nothing else).
const (
	// MethodRunnerInfo: what the runner's sandbox is (RunnerInfo).
	MethodRunnerInfo = "runner.info"

	// MethodEnvOpen opens an environment on the runner under the handle
	// the server chose (EnvOpenParams, EnvOpenResult); every later call of
	// that environment names the handle (EnvID).
	MethodEnvOpen  = "env.open"
	MethodEnvClose = "env.close" // EnvRef
	// MethodEnvClaim (EnvRef) tells the runner the server holds the handle
	// of an environment it just opened: one no call names within the
	// runner's bound after its open is closed, its slot freed.
	MethodEnvClaim = "env.claim"
	// MethodEnvAbandoned (runner → server, EnvRef; protocol 4) reports an
	// environment the runner closed because no call named it within its
	// bound after its open: its slot is free again.
	MethodEnvAbandoned = "env.abandoned"
	MethodEnvStop      = "env.stop" // EnvStopParams; codes changed, workspace_busy

	// A long-lived program (an MCP stdio server): process.start starts it
	// and answers once it runs; process.wait streams its stdout as output
	// frames and ends with its exit (ProcessWaitResult); write and
	// close_stdin feed its stdin; stop ends it.
	MethodProcessStart      = "process.start"
	MethodProcessWait       = "process.wait"
	MethodProcessWrite      = "process.write"
	MethodProcessCloseStdin = "process.close_stdin"
	MethodProcessStop       = "process.stop"

	// The file tools' operations; results are the workspace package's
	// ReadResult and Listing.
	MethodFSRead   = "fs.read"
	MethodFSWrite  = "fs.write"
	MethodFSList   = "fs.list"
	MethodFSRemove = "fs.remove" // FSRemoveParams
	// MethodFSStatDirect: FSPathParams → a workspace.Entry, or null when
	// the path does not exist (environment.Environment.StatDirect).
	MethodFSStatDirect = "fs.stat_direct"
	// MethodFSCheckWrite: FSCheckWriteParams → null, or code disk_quota
	// when a write of that size would take the workspace over its quota
	// (environment.Environment.CheckWrite).
	MethodFSCheckWrite = "fs.check_write"

	MethodSnapshotTake    = "snapshot.take"    // EnvRef → SnapshotResult
	MethodSnapshotRestore = "snapshot.restore" // SnapshotParams → SnapshotResult
	MethodSnapshotHolds   = "snapshot.holds"   // SnapshotParams → bool
	MethodSnapshotRecord  = "snapshot.record"  // SnapshotParams: Environment.Record
	// MethodSQLiteQuery runs sqlite_query on the runner's workspace:
	// SQLiteParams → tool.SQLiteAnswer.
	MethodSQLiteQuery = "sqlite.query"

	// Runner → server.
	MethodNetworkEvent = "network.event" // NetworkEventParams
	MethodBlobHas      = "blob.has"      // BlobHasParams → BlobHasResult
	MethodBlobPut      = "blob.put"      // BlobPutParams
	MethodBlobGet      = "blob.get"      // BlobGetParams; the blob as stdout output frames
)

// Error codes of the environment methods: each maps back to the sentinel
// error the environment package (or workspace, snapshot, io/fs) defines, so
// the server's caller matches errors.Is as with a local environment. The
// messages name only workspace-relative paths.
const (
	CodeEscapes       = "escapes"        // workspace.ErrEscapes
	CodeInvalidPath   = "invalid_path"   // workspace.ErrInvalidPath
	CodeNotFound      = "not_found"      // fs.ErrNotExist
	CodeDiskQuota     = "disk_quota"     // environment.ErrDiskQuota
	CodeUnmeasurable  = "unmeasurable"   // environment.ErrUnmeasurable
	CodeChanged       = "changed"        // environment.ErrChanged
	CodeWorkspaceBusy = "workspace_busy" // environment.ErrBusy (not CodeBusy: the link's capacity)
	CodeClosed        = "closed"         // environment.ErrClosed (an unknown handle too)
	CodeTooLarge      = "too_large"      // snapshot.ErrTooLarge
	// CodeFull: env.open refused, the runner holds as many environments
	// as it takes (its capacity, or MaxStopOpens of those opened to be
	// stopped); environment.ErrFull.
	CodeFull = "full"
)

// Bounds of the environment methods.
const (
	// MaxBlobBytes bounds one blob (a chunk is at most 4 MiB, a tree of a
	// very large directory may be more).
	MaxBlobBytes = 32 << 20
	// MaxDigestsPerHas bounds one blob.has batch: the server looks each up
	// in its store, one by one (as many as snapshot.Take asks at once).
	MaxDigestsPerHas = 256
	// MaxFileBytes bounds one fs.write (all its chunks).
	MaxFileBytes = 256 << 20
)

// RunnerInfo says what the runner's sandbox is.
type RunnerInfo struct {
	Sandbox         string `json:"sandbox"`
	ConfinesNetwork bool   `json:"confines_network"`
}

// Limits are sandbox.Limits on the wire (zero: the runner's default).
type Limits struct {
	CPUSeconds  int   `json:"cpu_seconds,omitempty"`
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	Processes   int   `json:"processes,omitempty"`
	OutputBytes int   `json:"output_bytes,omitempty"`
	WallMS      int64 `json:"wall_ms,omitempty"`
	FileBytes   int64 `json:"file_bytes,omitempty"`
	TmpBytes    int64 `json:"tmp_bytes,omitempty"`
	ShmBytes    int64 `json:"shm_bytes,omitempty"`
	DiskBytes   int64 `json:"disk_bytes,omitempty"`
}

// Network is an environment's egress: what the runner's proxy lets
// through. ControlPlane holds the server's addresses ("host:port"),
// refused whatever Allow says; never a credential.
type Network struct {
	Allow        []string `json:"allow"`
	Ports        []int    `json:"ports,omitempty"`
	ControlPlane []string `json:"control_plane,omitempty"`
}

// SnapshotLimits are environment.SnapshotLimits on the wire.
type SnapshotLimits struct {
	MaxFileBytes  int64    `json:"max_file_bytes,omitempty"`
	MaxTotalBytes int64    `json:"max_total_bytes,omitempty"`
	Exclude       []string `json:"exclude,omitempty"`
}

// EnvOpenParams open an environment.
type EnvOpenParams struct {
	EnvID     string         `json:"env_id"`
	Workspace string         `json:"workspace"`
	Session   string         `json:"session"`
	Limits    Limits         `json:"limits"`
	Network   *Network       `json:"network,omitempty"`
	Snapshot  SnapshotLimits `json:"snapshot"`
	// ForStop opens the environment only to be snapshotted and stopped
	// (environment.OpenParams.ForStop): the runner does not count it
	// against its capacity but against a bound of its own
	// (environment.MaxStopOpens), and refuses on it every call but
	// snapshot.take, snapshot.holds, env.stop and env.close.
	ForStop bool `json:"for_stop,omitempty"`
}

// EnvOpenResult: whether the workspace was made empty, the runner's
// backend, and the limits it applied (the asked ones capped by its
// operator's maxima).
type EnvOpenResult struct {
	Provisioned bool   `json:"provisioned"`
	Backend     string `json:"backend"`
	Limits      Limits `json:"limits"`
}

// EnvRef names an open environment.
type EnvRef struct {
	EnvID string `json:"env_id"`
}

// EnvStopParams: stop the environment if its workspace is Snapshot.
type EnvStopParams struct {
	EnvID    string `json:"env_id"`
	Snapshot string `json:"snapshot"`
}

// ProcessStartParams start a program in an environment under the id the
// server chose.
type ProcessStartParams struct {
	EnvID          string            `json:"env_id"`
	Process        string            `json:"process"`
	Command        string            `json:"command"`
	Program        string            `json:"program,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	MaxStderrBytes int               `json:"max_stderr_bytes,omitempty"`
}

// ProcessRef names a program.
type ProcessRef struct {
	EnvID   string `json:"env_id"`
	Process string `json:"process"`
}

// ProcessWriteParams: bytes for a program's stdin.
type ProcessWriteParams struct {
	EnvID   string `json:"env_id"`
	Process string `json:"process"`
	Data    []byte `json:"data"`
}

// ProcessStopParams: close stdin, wait up to GraceMS, kill (Kill: at once).
type ProcessStopParams struct {
	EnvID   string `json:"env_id"`
	Process string `json:"process"`
	GraceMS int64  `json:"grace_ms,omitempty"`
	Kill    bool   `json:"kill,omitempty"`
}

// ProcessWaitResult: how the program ended.
type ProcessWaitResult struct {
	Exit   string `json:"exit"`
	Stderr string `json:"stderr,omitempty"`
}

// FSReadParams read a file.
type FSReadParams struct {
	EnvID  string `json:"env_id"`
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Limit  int64  `json:"limit"`
}

// FSWriteParams write a file. Data larger than a frame is sent in parts
// of one Upload (the server's id): each part at Offset, the last with Last
// set, when the runner writes the whole file at once (atomic, quota
// checked); a write in one part has no Upload.
type FSWriteParams struct {
	EnvID  string `json:"env_id"`
	Path   string `json:"path"`
	Data   []byte `json:"data,omitempty"`
	Upload string `json:"upload,omitempty"`
	Offset int64  `json:"offset,omitempty"`
	Last   bool   `json:"last,omitempty"`
	// Direct: a person's write (environment.Environment.WriteFileDirect),
	// which follows no symlink; checked when the whole file is written.
	Direct bool `json:"direct,omitempty"`
	// IfBasis and Marker (protocol 3) make a person's write conditional
	// (environment.Environment.WriteFileIf, implying Direct): made only
	// where the path holds IfBasis, compared and written under one lock,
	// and Marker recorded with it. The answer (of the last part) is an
	// FSChangeResult.
	IfBasis string `json:"if_basis,omitempty"`
	Marker  string `json:"marker,omitempty"`
}

// Conditional reports whether p is a conditional write (protocol 3).
func (p *FSWriteParams) Conditional() bool { return p.IfBasis != "" || p.Marker != "" }

// FSRemoveParams remove a file or symlink (fs.remove); IfBasis and Marker
// (protocol 3) make it conditional, as FSWriteParams' do
// (environment.Environment.RemoveIf), answered by an FSChangeResult.
type FSRemoveParams struct {
	EnvID   string `json:"env_id"`
	Path    string `json:"path"`
	IfBasis string `json:"if_basis,omitempty"`
	Marker  string `json:"marker,omitempty"`
}

// FSChangeResult answers a conditional fs.write or fs.remove: Conflict
// when the path did not hold if_basis (nothing was changed, the marker not
// recorded), Found saying what it held ("sha256:<hex>", "absent", the kind
// of entry, or "changing").
type FSChangeResult struct {
	Conflict bool   `json:"conflict,omitempty"`
	Found    string `json:"found,omitempty"`
}

// BasisAbsent is the basis of a path where nothing is.
const BasisAbsent = "absent"

// BasisSymlink is the basis of a symlink (the delete of one: no file put
// in its place is deleted).
const BasisSymlink = "symlink"

// CheckBasis reports why s is not a basis: "absent", "symlink" or
// "sha256:<hex>" ("" is none).
func CheckBasis(field, s string) error {
	if s == "" || s == BasisAbsent || s == BasisSymlink {
		return nil
	}
	if hex, ok := strings.CutPrefix(s, "sha256:"); ok && digestPattern.MatchString(hex) {
		return nil
	}
	return fmt.Errorf("%s: %q is neither %q nor \"sha256:<hex>\"", field, truncate(s), BasisAbsent)
}

// FSPathParams name a path (fs.list: at most Max entries; fs.remove).
type FSPathParams struct {
	EnvID string `json:"env_id"`
	Path  string `json:"path"`
	Max   int    `json:"max,omitempty"`
}

// FSCheckWriteParams: would a write of Size bytes fit the environment's
// disk quota.
type FSCheckWriteParams struct {
	EnvID string `json:"env_id"`
	Size  int64  `json:"size"`
}

// SQLiteParams: one sqlite_query on an environment's workspace.
type SQLiteParams struct {
	EnvID string `json:"env_id"`
	// Request is a tool.SQLiteRequest (checked again by the runner).
	Request json.RawMessage `json:"request"`
}

// SnapshotParams name a snapshot of an environment's workspace.
type SnapshotParams struct {
	EnvID    string `json:"env_id"`
	Snapshot string `json:"snapshot"`
}

// SnapshotResult: a snapshot's id and snapshot.Stats.
type SnapshotResult struct {
	ID    string          `json:"id,omitempty"`
	Stats json.RawMessage `json:"stats"`
}

// NetworkEvent is one decision of a runner's egress proxy
// (tool.NetworkEvent).
type NetworkEvent struct {
	Via     string `json:"via"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Address string `json:"address,omitempty"`
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
}

// NetworkEventParams report a decision of an environment's proxy.
type NetworkEventParams struct {
	EnvID string       `json:"env_id"`
	Event NetworkEvent `json:"event"`
}

// BlobHasParams ask which of Digests the server lacks.
type BlobHasParams struct {
	Digests []string `json:"digests"`
}

// BlobHasResult lists the digests the server lacks.
type BlobHasResult struct {
	Missing []string `json:"missing"`
}

// BlobPutParams send one blob, in parts when it is larger than a frame:
// Size is the whole blob's, Offset this part's; the server checks the
// digest once it has Size bytes.
type BlobPutParams struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
}

// BlobGetParams ask for one blob.
type BlobGetParams struct {
	Digest string `json:"digest"`
}

var (
	handlePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	digestPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// CheckHandle reports why s is not an environment, process or upload
// handle (a short id the server chose).
func CheckHandle(field, s string) error {
	if !handlePattern.MatchString(s) {
		return fmt.Errorf("%s: %q is not a handle", field, truncate(s))
	}
	return nil
}

// CheckDigest reports why s is not a lowercase hex SHA-256.
func CheckDigest(field, s string) error {
	if !digestPattern.MatchString(s) {
		return fmt.Errorf("%s: %q is not a sha256 digest", field, truncate(s))
	}
	return nil
}
