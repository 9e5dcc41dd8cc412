package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// Config says which runner a Backend's environments live on.
type Config struct {
	// Hub holds the runner connections of this node. Required.
	Hub *hub.Hub
	// Project and Runner name the runner (its key's project, its Hello's
	// name). Required.
	Project, Runner string
	// Logger receives what goes wrong out of a call (a close that failed).
	// Default: discarded.
	Logger *slog.Logger
}

// New returns the backend of environments on the runner cfg names.
func New(cfg *Config) (environment.Backend, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("new remote environment backend: config is nil")
	case cfg.Hub == nil:
		return nil, errors.New("new remote environment backend: config.hub: is required")
	case cfg.Project == "":
		return nil, errors.New("new remote environment backend: config.project: is required")
	}
	if err := link.CheckName("config.runner", cfg.Runner); err != nil {
		return nil, fmt.Errorf("new remote environment backend: %w", err)
	}
	b := &backend{cfg: *cfg, id: strconv.FormatUint(backends.Add(1), 10)}
	if b.cfg.Logger == nil {
		b.cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

type backend struct {
	cfg Config
	// id and next make the handles of the environments it opens (eID_N):
	// unique in this process, so two backends of one runner never share
	// one on its connection.
	id   string
	next atomic.Uint64
}

// backends numbers the backends of this process.
var backends atomic.Uint64

func (b *backend) Name() string { return "runner:" + b.cfg.Runner }

// runner returns the runner's connection, ErrUnavailable without one.
func (b *backend) runner() (*hub.Runner, error) {
	r, ok := b.cfg.Hub.Get(b.cfg.Project, b.cfg.Runner)
	if !ok || r.Conn.Err() != nil {
		return nil, fmt.Errorf("runner %s: %w (not connected)", b.cfg.Runner, environment.ErrUnavailable)
	}
	return r, nil
}

// ConfinesNetwork asks the connected runner (once per connection); false
// when none is connected.
func (b *backend) ConfinesNetwork() bool {
	r, err := b.runner()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := hub.Info(ctx, r)
	return err == nil && info.ConfinesNetwork
}

// Open implements environment.Backend.
func (b *backend) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	r, err := b.runner()
	if err != nil {
		return nil, fmt.Errorf("open environment of session %s: %w", p.Session, err)
	}
	if err := checkPinnedKey(p, r); err != nil {
		return nil, err
	}
	e := &env{b: b, r: r, params: *p, id: "e" + b.id + "_" + strconv.FormatUint(b.next.Add(1), 10)}
	op := link.EnvOpenParams{
		EnvID: e.id, Workspace: p.Workspace, Session: p.Session, Limits: wireLimits(p.Limits),
		Snapshot: link.SnapshotLimits{MaxFileBytes: p.Snapshot.MaxFileBytes, MaxTotalBytes: p.Snapshot.MaxTotalBytes, Exclude: p.Snapshot.Exclude},
		// The runner keeps the stops' bound itself too (as the router
		// does: only a pinned environment is opened to be stopped).
		ForStop: p.ForStop && p.Pinned != "",
	}
	if n := p.Network; n != nil {
		// The addresses only: the proxy refuses them; nothing else of the
		// server's crosses.
		op.Network = &link.Network{Allow: n.Allow, Ports: n.Ports, ControlPlane: n.ControlPlane.Addresses()}
		if n.OnEvent != nil {
			e.unroute = r.OnNetworkEvent(e.id, func(ev link.NetworkEvent) { n.OnEvent(tool.NetworkEvent(ev)) })
		}
	}
	var res link.EnvOpenResult
	// Until claimed, the runner may close it as abandoned and say so.
	r.NoteOpening(e.id)
	if err := e.call(ctx, link.MethodEnvOpen, op, &res, nil); err != nil {
		if e.unroute != nil {
			e.unroute()
		}
		if errors.Is(err, environment.ErrLost) {
			// The runner closes what the connection opened when it ends:
			// nothing of this open is left to reason about.
			return nil, fmt.Errorf("open environment of session %s on runner %s: %w (its connection ended)", p.Session, b.cfg.Runner, environment.ErrUnavailable)
		}
		if ctx.Err() != nil {
			// The runner may have opened it after all: close it, or it
			// lives until the runner closes it as abandoned (and says so)
			// or the connection ends.
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if r.Conn.Call(cctx, link.MethodEnvClose, link.EnvRef{EnvID: e.id}, nil, nil) == nil {
				r.Claimed(e.id)
			}
			cancel()
		} else {
			r.Claimed(e.id) // answered: nothing is open under it
		}
		return nil, fmt.Errorf("open environment of session %s: %w", p.Session, err)
	}
	e.info = environment.Info{Backend: b.Name(), Provisioned: res.Provisioned, Runner: b.cfg.Runner, RunnerKey: r.Row.KeyID}
	// Counted before anything can close it (Close uncounts it).
	r.SessionOpened(p.Session) // listed with the runner (GET /v1/runners)
	// The runner closes an environment no call names soon after its open
	// (one whose open's answer never came back): it is named at once.
	// Every runner the hub takes knows env.claim (protocol 2).
	err = e.call(ctx, link.MethodEnvClaim, link.EnvRef{EnvID: e.id}, nil, nil)
	if err == nil {
		r.Claimed(e.id)
	}
	if err != nil {
		_ = e.Close()
		if errors.Is(err, environment.ErrLost) {
			// As a drop during the open: the runner closed what the
			// connection opened; the session waits for a runner again.
			return nil, fmt.Errorf("open environment of session %s on runner %s: %w (its connection ended)", p.Session, b.cfg.Runner, environment.ErrUnavailable)
		}
		return nil, fmt.Errorf("open environment of session %s: %w", p.Session, err)
	}
	// The runner caps what a session asks by its operator's maxima: a
	// workspace smaller than the session was promised is refused rather
	// than met by surprise as a full disk.
	if asked, granted := p.Limits.DiskBytes, res.Limits.DiskBytes; asked > 0 && granted > 0 && granted < asked {
		_ = e.Close()
		return nil, fmt.Errorf("open environment of session %s: params.limits.disk_bytes: runner %s grants at most %d bytes of disk, the session asks for %d (environment.disk_mb)",
			p.Session, b.cfg.Runner, granted, asked)
	}
	return e, nil
}

func wireLimits(l sandbox.Limits) link.Limits {
	return link.Limits{CPUSeconds: l.CPUSeconds, MemoryBytes: l.MemoryBytes, Processes: l.Processes, OutputBytes: l.OutputBytes,
		WallMS: l.Wall.Milliseconds(), FileBytes: l.FileBytes, TmpBytes: l.TmpBytes, ShmBytes: l.ShmBytes, DiskBytes: l.DiskBytes}
}

// env is an environment on a runner: every call goes over the connection
// it was opened on. When that connection ends the runner closes it (its
// programs ended): a call in flight fails with ErrLost, a later one with
// ErrUnavailable (open it again).
type env struct {
	b       *backend
	r       *hub.Runner
	params  environment.OpenParams
	id      string
	info    environment.Info
	unroute func()
	// claims is what the copy's next snapshot is claimed against: the
	// store is asked only about what differs from the last one claimed.
	claims snapshot.LastClaim

	mu     sync.Mutex
	closed bool
	procs  map[*process]struct{}
	nextID uint64
}

var errNotExist = fs.ErrNotExist

func (e *env) Info() environment.Info { return e.info }

// call makes one call of the environment, its failure mapped to the
// environment's errors.
func (e *env) call(ctx context.Context, method string, params, result any, opts *link.CallOptions) error {
	if err := e.usable(); err != nil {
		return err
	}
	return e.mapErr(e.r.Conn.Call(ctx, method, params, result, opts))
}

// usable fails a call that cannot be made: the environment is closed, or
// its connection ended (nothing is sent: ErrUnavailable).
func (e *env) usable() error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return fmt.Errorf("environment of session %s: %w", e.params.Session, environment.ErrClosed)
	}
	if e.r.Conn.Err() != nil {
		// Nothing was sent: the connection (and with it the environment
		// on the runner) ended before.
		return fmt.Errorf("runner %s: %w (disconnected: open the environment again)", e.b.cfg.Runner, environment.ErrUnavailable)
	}
	return nil
}

// mapErr maps a call's failure to what it means for the caller: the
// runner's codes back to their sentinels, a connection that ended to
// ErrLost (mid-call) or ErrUnavailable (before).
func (e *env) mapErr(err error) error {
	if err == nil {
		return nil
	}
	var re *link.RemoteError
	switch {
	case errors.As(err, &re):
		return &runnerError{msg: re.Message, code: re.Code}
	case errors.Is(err, link.ErrClosed):
		return fmt.Errorf("runner %s: %w: %w", e.b.cfg.Runner, environment.ErrLost, err)
	}
	return err
}

// runnerError is a failure the runner reported, matching (errors.Is) the
// sentinel of its code.
type runnerError struct {
	msg, code string
}

func (e *runnerError) Error() string { return e.msg }

func (e *runnerError) Unwrap() error {
	switch e.code {
	case link.CodeEscapes:
		return workspace.ErrEscapes
	case link.CodeInvalidPath:
		return workspace.ErrInvalidPath
	case link.CodeNotFound:
		return errNotExist
	case link.CodeDiskQuota:
		return environment.ErrDiskQuota
	case link.CodeUnmeasurable:
		return environment.ErrUnmeasurable
	case link.CodeChanged:
		return environment.ErrChanged
	case link.CodeWorkspaceBusy:
		return environment.ErrBusy
	case link.CodeClosed:
		return environment.ErrClosed
	case link.CodeTooLarge:
		return snapshot.ErrTooLarge
	case link.CodeFull:
		return environment.ErrFull
	case link.CodeCancelled:
		return context.Canceled
	}
	return nil
}

// Run implements environment.Environment.
func (e *env) Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error) {
	if req == nil {
		return nil, errors.New("run: request is nil")
	}
	p := &link.ExecParams{Session: e.params.Session, EnvID: e.id, Command: req.Command, Env: req.Env,
		TimeoutMS: req.Timeout.Milliseconds(), MaxOutputBytes: req.MaxOutputBytes}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if err := e.usable(); err != nil {
		return nil, err
	}
	out, err := hub.Exec(ctx, e.r, p)
	if err != nil {
		return nil, e.mapErr(err)
	}
	return &tool.ExecResult{ExitCode: out.ExitCode, Stdout: out.Stdout, Stderr: out.Stderr,
		Truncated: out.Truncated, TimedOut: out.TimedOut, Signal: out.Signal, Limit: out.Limit, Error: out.Error}, nil
}

// ReadFile implements environment.Environment. An answer is one frame, so
// a read larger than a frame is made of several.
func (e *env) ReadFile(ctx context.Context, rel string, offset, limit int64) (*workspace.ReadResult, error) {
	var out *workspace.ReadResult
	for {
		var part workspace.ReadResult
		if err := e.call(ctx, link.MethodFSRead, link.FSReadParams{EnvID: e.id, Path: rel, Offset: offset, Limit: limit}, &part, nil); err != nil {
			return nil, err
		}
		if out == nil {
			out = &part
		} else {
			out.Data = append(out.Data, part.Data...)
			out.Size, out.Truncated = part.Size, part.Truncated
		}
		n := int64(len(part.Data))
		if !part.Truncated || n == 0 || n >= limit {
			return out, nil
		}
		offset, limit = offset+n, limit-n
	}
}

// WriteFile implements environment.Environment: in one call, or in parts
// of one upload when the data is larger than a frame.
func (e *env) WriteFile(ctx context.Context, rel string, data []byte) error {
	return e.write(ctx, rel, data, link.FSWriteParams{}, nil)
}

// WriteFileDirect implements environment.Environment: WriteFile, the
// runner following no symlink (link.FSWriteParams.Direct).
func (e *env) WriteFileDirect(ctx context.Context, rel string, data []byte) error {
	return e.write(ctx, rel, data, link.FSWriteParams{Direct: true}, nil)
}

// WriteFileIf implements environment.Environment: the runner compares and
// writes under its lock (link.FSWriteParams.IfBasis, protocol 3).
func (e *env) WriteFileIf(ctx context.Context, rel string, data []byte, c environment.Condition) error {
	var res link.FSChangeResult
	if err := e.write(ctx, rel, data, link.FSWriteParams{Direct: true, IfBasis: c.Basis, Marker: c.Marker}, &res); err != nil {
		return err
	}
	return conflictOf(rel, c, &res)
}

// RemoveIf implements environment.Environment (link.FSRemoveParams'
// IfBasis, protocol 3).
func (e *env) RemoveIf(ctx context.Context, rel string, c environment.Condition) error {
	var res link.FSChangeResult
	if err := e.call(ctx, link.MethodFSRemove, link.FSRemoveParams{EnvID: e.id, Path: rel, IfBasis: c.Basis, Marker: c.Marker}, &res, nil); err != nil {
		return err
	}
	return conflictOf(rel, c, &res)
}

// conflictOf is the runner's answer to a conditional change as an error:
// a *environment.ConflictError when it found the path holding something
// else, nil when it made the change.
func conflictOf(rel string, c environment.Condition, res *link.FSChangeResult) error {
	if !res.Conflict {
		return nil
	}
	return &environment.ConflictError{Path: rel, Basis: c.Basis, Found: foundOf(res.Found)}
}

// foundOf is a runner's word for what a path held, taken only when it is
// one the runner may say (a basis, a kind of entry, "changing", "changed
// since it was found in conflict"): it is journaled and shown to people
// and the model, and a hostile runner's text would go there unchecked.
func foundOf(s string) string {
	switch s {
	case "dir", "symlink", "other", "changing", workspace.FoundThroughSymlink, environment.FoundChangedSinceConflict:
		return s
	}
	if s != "" && link.CheckBasis("found", s) == nil {
		return s
	}
	return "unknown"
}

// StatDirect implements environment.Environment.
func (e *env) StatDirect(ctx context.Context, rel string) (*workspace.Entry, error) {
	var en *workspace.Entry
	if err := e.call(ctx, link.MethodFSStatDirect, link.FSPathParams{EnvID: e.id, Path: rel}, &en, nil); err != nil {
		return nil, err
	}
	return en, nil
}

// CheckWrite implements environment.Environment.
func (e *env) CheckWrite(ctx context.Context, size int64) error {
	return e.call(ctx, link.MethodFSCheckWrite, link.FSCheckWriteParams{EnvID: e.id, Size: size}, nil, nil)
}

// write writes data to rel in one call, or in parts of one upload; with
// the fields of how (Direct, IfBasis, Marker) in each, the answer of the
// last one in result.
func (e *env) write(ctx context.Context, rel string, data []byte, how link.FSWriteParams, result any) error {
	// A part's frame holds the path too (escaped: at most 6 bytes a byte).
	part := link.ChunkBytes(e.r.Conn.MaxMessageBytes()) - 4096 - len(rel)*6
	if part < 1024 {
		return fmt.Errorf("write %q: %w", rel, environment.ErrPathTooLong)
	}
	how.EnvID, how.Path = e.id, rel
	if len(data) <= part {
		how.Data = data
		return e.call(ctx, link.MethodFSWrite, how, result, nil)
	}
	e.mu.Lock()
	e.nextID++
	upload := "u" + strconv.FormatUint(e.nextID, 10)
	e.mu.Unlock()
	for off := 0; off < len(data); off += part {
		end := min(off+part, len(data))
		p := how
		p.Data, p.Upload, p.Offset, p.Last = data[off:end], upload, int64(off), end == len(data)
		var res any
		if p.Last {
			res = result
		}
		if err := e.call(ctx, link.MethodFSWrite, p, res, nil); err != nil {
			return err
		}
	}
	return nil
}

// List implements environment.Environment.
func (e *env) List(ctx context.Context, rel string, max int) (*workspace.Listing, error) {
	var l workspace.Listing
	if err := e.call(ctx, link.MethodFSList, link.FSPathParams{EnvID: e.id, Path: rel, Max: max}, &l, nil); err != nil {
		return nil, err
	}
	return &l, nil
}

// Remove implements environment.Environment.
func (e *env) Remove(ctx context.Context, rel string) error {
	return e.call(ctx, link.MethodFSRemove, link.FSRemoveParams{EnvID: e.id, Path: rel}, nil, nil)
}

// Snapshot implements environment.Environment: the runner takes it and
// sends the server only the blobs it lacks (blob.has, blob.put). blob.has
// calls a blob the session's project does not own missing, so the runner
// sends the bytes of every blob new to the project. Its answer is
// accepted only if every blob the snapshot reaches is the project's or
// was sent during this call (hub.AcceptSnapshot): a runner that answers
// another project's snapshot id, or wraps one in a tree of its own, must
// not make the server hand it (blob.get, on the restore that follows) or
// a fork of this session that other project's files.
func (e *env) Snapshot(ctx context.Context) (string, snapshot.Stats, error) {
	sent, end := hub.AllowTake(e.r, e.params.Snapshot.MaxTotalBytes)
	defer end()
	var res link.SnapshotResult
	if err := e.call(ctx, link.MethodSnapshotTake, link.EnvRef{EnvID: e.id}, &res, nil); err != nil {
		return "", snapshot.Stats{}, err
	}
	stats, err := decodeStats(res.Stats)
	if err == nil {
		err = link.CheckDigest("snapshot id", res.ID)
	}
	if err == nil {
		err = hub.AcceptSnapshot(ctx, e.r, res.ID, sent, &e.claims)
	}
	if err != nil {
		return "", stats, fmt.Errorf("snapshot the workspace of session %s: the runner's answer: %w", e.params.Session, err)
	}
	return res.ID, stats, nil
}

func decodeStats(raw json.RawMessage) (snapshot.Stats, error) {
	var s snapshot.Stats
	if len(raw) == 0 {
		return s, nil
	}
	return s, json.Unmarshal(raw, &s)
}

// Restore implements environment.Environment: while it runs, the runner
// may fetch (blob.get) the blobs snapshot id reaches, and only those; a
// snapshot the session's project does not own is refused.
func (e *env) Restore(ctx context.Context, id string) (snapshot.Stats, error) {
	if err := link.CheckDigest("snapshot id", id); err != nil {
		return snapshot.Stats{}, fmt.Errorf("restore the workspace of session %s: %w", e.params.Session, err)
	}
	if err := e.usable(); err != nil {
		return snapshot.Stats{}, err
	}
	end, err := hub.AllowRestore(ctx, e.r, id)
	if err != nil {
		return snapshot.Stats{}, fmt.Errorf("restore the workspace of session %s: %w", e.params.Session, err)
	}
	defer end()
	// AllowRestore read the snapshot's root and recorded the rows of its
	// entries (snapshot.CheckOwned): a copy with no base yet compares its
	// next snapshot's root with it, whatever the runner makes of the
	// restore (a base is only what the store is not asked about again,
	// never what the copy holds).
	e.claims.Adopt(id)
	var res link.SnapshotResult
	if err := e.call(ctx, link.MethodSnapshotRestore, link.SnapshotParams{EnvID: e.id, Snapshot: id}, &res, nil); err != nil {
		return snapshot.Stats{}, err
	}
	return decodeStats(res.Stats)
}

// Holds implements environment.Environment.
func (e *env) Holds(ctx context.Context, id string) (bool, error) {
	var held bool
	err := e.call(ctx, link.MethodSnapshotHolds, link.SnapshotParams{EnvID: e.id, Snapshot: id}, &held, nil)
	return held, err
}

// SQLiteQuery implements environment.Environment: the runner runs it on
// its workspace. Its answer is held to req's limits again here (a runner
// may send more rows or bytes than asked: they would all go into the
// journal and the model's context).
func (e *env) SQLiteQuery(ctx context.Context, req *tool.SQLiteRequest) (*tool.SQLiteAnswer, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode sqlite_query request: %w", err)
	}
	var ans tool.SQLiteAnswer
	if err := e.call(ctx, link.MethodSQLiteQuery, link.SQLiteParams{EnvID: e.id, Request: raw}, &ans, nil); err != nil {
		return nil, err
	}
	return tool.BoundSQLiteAnswer(req, &ans), nil
}

// Record implements environment.Environment.
func (e *env) Record(ctx context.Context, id string) error {
	return e.call(ctx, link.MethodSnapshotRecord, link.SnapshotParams{EnvID: e.id, Snapshot: id}, nil, nil)
}

// Stop implements environment.Environment.
func (e *env) Stop(ctx context.Context, id string) error {
	// The runner takes a snapshot to compare with id: it may store blobs
	// meanwhile.
	_, end := hub.AllowTake(e.r, e.params.Snapshot.MaxTotalBytes)
	defer end()
	if err := e.call(ctx, link.MethodEnvStop, link.EnvStopParams{EnvID: e.id, Snapshot: id}, nil, nil); err != nil {
		return fmt.Errorf("stop the environment of session %s: %w", e.params.Session, err)
	}
	e.markClosed()
	return nil
}

// markClosed refuses every later call; it reports whether it was open.
func (e *env) markClosed() bool {
	e.mu.Lock()
	was := e.closed
	e.closed = true
	procs := e.procs
	e.procs = nil
	e.mu.Unlock()
	if was {
		return false
	}
	if e.unroute != nil {
		e.unroute()
	}
	for p := range procs {
		p.lost()
	}
	e.r.SessionClosed(e.params.Session)
	return true
}

// Close implements environment.Environment: the runner ends the programs
// and the proxy and keeps the workspace. A runner that is gone closed it
// already.
func (e *env) Close() error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := e.call(ctx, link.MethodEnvClose, link.EnvRef{EnvID: e.id}, nil, nil)
	e.markClosed()
	if errors.Is(err, environment.ErrLost) || errors.Is(err, environment.ErrUnavailable) {
		return nil
	}
	return err
}
