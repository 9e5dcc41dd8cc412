package environment

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// LocalConfig configures NewLocal. Sandbox, Workspaces and Blobs are
// required.
type LocalConfig struct {
	// Sandbox runs the programs: sandbox.Detect's choice (bwrap, or local
	// plain).
	Sandbox sandbox.Backend
	// Workspaces holds the workspace directories, one per workspace id.
	Workspaces *workspace.Manager
	// Blobs stores the snapshots' blobs by content address (the server's
	// store; on a runner, the runner's cache in front of the server's).
	Blobs snapshot.Blobs
	// Owners, when set, records which project owns which snapshot blob
	// (the server's store): every snapshot taken is claimed for the
	// environment's project (OpenParams.Project, then required), and a
	// restore of a snapshot the project does not own is refused, so that
	// an id that came from elsewhere (a runner's answer) never brings
	// another project's files into this one. A runner's backend has none:
	// its server checks what the runner sends and fetches.
	Owners snapshot.Owners
	// Cache makes snapshots incremental; it must have been made for
	// Blobs. Default: a new one without inotify watches.
	Cache *snapshot.Cache
	// SocketDir holds the egress proxies' Unix sockets (0700, made when
	// needed). Default, and where the sockets go when SocketDir is too
	// deep for a socket path: a private directory (0700) this backend
	// makes under os.TempDir() when first needed.
	SocketDir string
	// SocketPath, when set, names the proxy socket of a session instead
	// of SocketDir (the engine's, which keeps readable names).
	SocketPath func(session string) (string, error)
	// Logger receives the egress proxies' internal errors. Default:
	// discarded.
	Logger *slog.Logger
}

// NewLocal returns the backend of environments on this machine: the
// workspace is a directory of cfg.Workspaces, programs run through
// cfg.Sandbox, and the egress proxy of a session with network is a Unix
// socket of this process. It is what the engine does today, behind the
// seam; a runner uses the same backend on its own machine.
func NewLocal(cfg *LocalConfig) (Backend, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("new local environment backend: config is nil")
	case cfg.Sandbox == nil:
		return nil, errors.New("new local environment backend: config.sandbox: is required")
	case cfg.Workspaces == nil:
		return nil, errors.New("new local environment backend: config.workspaces: is required")
	case cfg.Blobs == nil:
		return nil, errors.New("new local environment backend: config.blobs: is required")
	}
	b := &localBackend{cfg: *cfg, open: make(map[string]int)}
	if b.cfg.Cache == nil {
		c, err := snapshot.NewCache(cfg.Blobs, nil)
		if err != nil {
			return nil, fmt.Errorf("new local environment backend: %w", err)
		}
		b.cfg.Cache = c
	}
	if b.cfg.Logger == nil {
		b.cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

type localBackend struct {
	cfg LocalConfig

	mu sync.Mutex
	// open counts the open Environments of each workspace id: Stop frees
	// a workspace only when its caller's is the only one.
	open map[string]int

	// writing holds a lock per workspace id around every file change
	// this backend makes in it: a conditional change (WriteFileIf,
	// RemoveIf) compares and acts with no other change of this process
	// between, whichever Environment of the workspace makes it (a
	// sub-agent shares the workspace). An entry lives only while someone
	// holds or waits for it, so a long-lived server keeps none for the
	// many sessions it no longer runs. Guarded by mu.
	writing map[string]*workspaceWriteLock

	// claimed is what this backend's environments have claimed already
	// (claimed.go).
	claimed claimedSnapshots

	// private is the backend's own socket directory (privateDir).
	privateOnce sync.Once
	private     string
	privateErr  error
}

func (b *localBackend) Name() string { return b.cfg.Sandbox.Name() }

func (b *localBackend) ConfinesNetwork() bool { return b.cfg.Sandbox.ConfinesNetwork() }

// Open implements Backend.
func (b *localBackend) Open(ctx context.Context, p *OpenParams) (Environment, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	if p.Runner != nil || p.Pinned != "" {
		// Running it here would put a session meant for a runner's machine
		// on the server's: refused, not silently moved.
		return nil, fmt.Errorf("open environment of session %s: params.runner: this backend runs environments on this node only, not on a runner", p.Session)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var (
		ws          string
		provisioned bool
		exists      = true
		err         error
	)
	if p.Untouched {
		// Made when something needs it (ensureDir): missing, the copy is
		// an empty one, not one lost.
		ws, exists, err = b.cfg.Workspaces.Find(p.Workspace)
	} else {
		ws, provisioned, err = b.cfg.Workspaces.Create(p.Workspace)
	}
	if err != nil {
		return nil, fmt.Errorf("open environment of session %s: %w", p.Session, err)
	}
	if provisioned {
		// A new directory at a path a Take may have recorded before.
		b.cfg.Cache.Forget(ws)
	}
	if !p.Unshared {
		// Shared, or about to be: the entries an unshared session kept
		// in memory go to disk first (a sub-agent's files may land in
		// the copy before its next record).
		if err := b.cfg.Workspaces.WriteOut(p.Workspace); err != nil {
			return nil, fmt.Errorf("open environment of session %s: %w", p.Session, err)
		}
	}
	e := &localEnv{b: b, params: *p, ws: ws, info: Info{Backend: b.Name(), Provisioned: provisioned}}
	e.hadDir.Store(exists)
	// Options a Take refuses have no empty snapshot either ("").
	e.emptyID, _ = snapshot.EmptyID(snapshot.Options{Exclude: p.Snapshot.Exclude})
	if err := e.startProxy(ctx); err != nil {
		return nil, fmt.Errorf("open environment of session %s: %w", p.Session, err)
	}
	e.exec = b.cfg.Sandbox.Exec(sandbox.Spec{SessionID: p.Session, Workspace: ws, ProxySocket: e.socket, Limits: p.Limits})
	b.open[p.Workspace]++
	return e, nil
}

// release forgets one open Environment of workspace id.
func (b *localBackend) release(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[id]--; b.open[id] <= 0 {
		delete(b.open, id)
	}
}

// DiscardCopy implements Discarder. The backend's lock is held from the
// check that nothing has the workspace open to its removal, so no claim of
// this node can open (and start recreating) the copy in between; stale
// runs under it, so that a claim that recreated the environment and
// journaled it meanwhile keeps its copy.
func (b *localBackend) DiscardCopy(ctx context.Context, id string, stale func(context.Context) (bool, error)) (bool, error) {
	if err := workspace.ValidateSessionID(id); err != nil {
		return false, fmt.Errorf("discard the copy of workspace %q: %w", id, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[id] > 0 {
		return false, nil
	}
	path := b.cfg.Workspaces.Path(id)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	ok, err := stale(ctx)
	if err != nil || !ok {
		return false, err
	}
	defer b.cfg.Cache.Forget(path)
	if err := b.cfg.Workspaces.Remove(id); err != nil {
		return false, fmt.Errorf("discard the copy of workspace %s: %w", id, err)
	}
	return true, nil
}

// maxSocketPath is the longest Unix socket path every platform takes
// (sun_path holds 104 bytes on the BSDs and macOS, NUL included).
const maxSocketPath = 103

// socketPath names the proxy socket of a session: short enough for a Unix
// socket path whatever the session id, under SocketDir when that fits,
// else under the backend's private directory.
func (b *localBackend) socketPath(session string) (string, error) {
	if b.cfg.SocketPath != nil {
		return b.cfg.SocketPath(session)
	}
	sum := sha256.Sum256([]byte(session))
	name := hex.EncodeToString(sum[:8]) + ".sock"
	dir := b.cfg.SocketDir
	if dir != "" && len(filepath.Join(dir, name)) <= maxSocketPath {
		if err := ownSocketDir(dir); err != nil {
			return "", err
		}
		return filepath.Join(dir, name), nil
	}
	// A directory of its own (os.MkdirTemp: new, 0700), never a shared
	// name another user of the machine could have made first and swap
	// a socket in.
	b.privateOnce.Do(func() { b.private, b.privateErr = os.MkdirTemp("", "longhaul-env-") })
	if b.privateErr != nil {
		return "", fmt.Errorf("socket directory: %w", b.privateErr)
	}
	if p := filepath.Join(b.private, name); len(p) <= maxSocketPath {
		return p, nil
	}
	// The message reaches the turn's failure: it names no path.
	return "", fmt.Errorf("socket directory: no socket path of at most %d bytes (the temporary directory's name is too long)", maxSocketPath)
}

// ownSocketDir makes dir (0700) if missing and refuses one this process's
// user does not own, or one others may write in: either would let another
// user of the machine swap a proxy's socket for their own and see or steer
// the sandbox's traffic.
func ownSocketDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return errors.New("socket directory: not a directory (a symlink?)")
	case ok && int(st.Uid) != os.Geteuid():
		return errors.New("socket directory: owned by another user")
	case fi.Mode().Perm()&0o022 != 0:
		// Reading or searching it is harmless (a socket is 0600); writing
		// in it is replacing a socket.
		return fmt.Errorf("socket directory: others may write in it (mode %#o)", fi.Mode().Perm())
	}
	return nil
}

// localEnv is an Environment of the local backend.
type localEnv struct {
	b      *localBackend
	params OpenParams
	ws     string
	info   Info
	exec   tool.Exec
	socket string
	// emptyID is the id of a snapshot of the workspace with nothing in it
	// (under its excludes): such a snapshot gives a copy no list file
	// (workspace.Manager.RecordEmptySnapshot), and an empty copy holds it.
	emptyID string

	// hadDir: the workspace's directory existed at some point of this
	// Environment's life. Only an Untouched copy that never had one is
	// empty for being missing; one gone since is a copy lost.
	hadDir atomic.Bool
	dirMu  sync.Mutex // ensureDir's first making, noted before any other call goes on
	// missingAt is 1 + workspace.DirsMade() when the directory was last
	// found missing (0: never): while the count is the same, it still is,
	// with no look at the disk (dirMissing, at each of a step's
	// checkpoint's three calls).
	missingAt atomic.Uint64

	mu        sync.Mutex
	closed    bool
	stopping  bool // Stop is checking the workspace: calls are refused
	inflight  int  // calls begun and not over (begin)
	stopProxy func() error
	procs     map[*sandbox.Process]struct{}
	// base is what the copy's next snapshot is claimed against: the
	// store is asked only about what differs from the last one claimed.
	base snapshot.LastClaim
}

func (e *localEnv) Info() Info { return e.info }

// startProxy starts the egress proxy of a session with network, when the
// sandbox reaches the network only through it.
func (e *localEnv) startProxy(ctx context.Context) error {
	n := e.params.Network
	if n == nil || len(n.Allow) == 0 || !e.b.cfg.Sandbox.ConfinesNetwork() {
		return nil
	}
	cfg := egress.Config{Logger: e.b.cfg.Logger, Ports: n.Ports, ControlPlane: n.ControlPlane}
	p, err := egress.NewPolicy(n.Allow)
	if err == nil {
		p, err = p.WithConfig(cfg)
	}
	if err != nil {
		return fmt.Errorf("params.network: %w", err)
	}
	sock, err := e.b.socketPath(e.params.Session)
	if err != nil {
		return err
	}
	// ctx bounds the set-up only: the proxy lives until Close or Stop (a
	// runner's Open returns, and its call's context ends, long before).
	stop, err := egress.ListenUnix(context.WithoutCancel(ctx), sock, p, cfg, func(ev egress.Event) {
		if n.OnEvent != nil {
			n.OnEvent(tool.NetworkEvent(ev))
		}
	})
	if err != nil {
		return fmt.Errorf("start the egress proxy: %w", err)
	}
	e.socket, e.stopProxy = sock, stop
	return nil
}

// begin starts a call, failing once the Environment is closed (or being
// stopped); call the returned function when the call is over. Stop waits
// for no call: it refuses to run while one is in flight.
func (e *localEnv) begin() (func(), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return nil, fmt.Errorf("environment of session %s: %w", e.params.Session, ErrClosed)
	case e.stopping:
		return nil, fmt.Errorf("environment of session %s: %w (being stopped)", e.params.Session, ErrBusy)
	}
	e.inflight++
	return func() {
		e.mu.Lock()
		e.inflight--
		e.mu.Unlock()
	}, nil
}

// beginWrite is begin for a call that may change the workspace: what the
// copy's list kept in memory only (an unshared session's empty snapshots,
// workspace.Manager.RecordEmptySnapshot) is written out first. Kept in
// memory, it stands for a copy nothing wrote to since, which a restart can
// tell by the copy being empty; once something is written that no
// checkpoint holds yet, only the file can tell that the copy still holds
// the snapshot and the session's own changes since.
func (e *localEnv) beginWrite() (func(), error) {
	finish, err := e.begin()
	if err != nil || !e.params.Unshared {
		return finish, err // a shared copy's list is written as it is made
	}
	if err := e.ensureDir(); err != nil {
		finish()
		return nil, err
	}
	if err := e.b.cfg.Workspaces.WriteOut(e.params.Workspace); err != nil {
		finish()
		return nil, fmt.Errorf("environment of session %s: %w", e.params.Session, err)
	}
	return finish, nil
}

// Run implements Environment. A command may write anywhere in the
// workspace: the next snapshot learns what it changed by walking (or from
// the Cache's watches).
func (e *localEnv) Run(ctx context.Context, req *tool.ExecRequest) (*tool.ExecResult, error) {
	finish, err := e.beginWrite()
	if err != nil {
		return nil, err
	}
	defer finish()
	defer e.b.cfg.Cache.BeginUnknownWrites(e.ws)()
	return e.exec.Run(ctx, req)
}

// Start implements Environment. The program may write in the workspace as
// long as it runs, so the snapshot record trusts no path until it ends.
func (e *localEnv) Start(ctx context.Context, req *sandbox.StartRequest) (Process, error) {
	finish, err := e.beginWrite()
	if err != nil {
		return nil, err
	}
	defer finish()
	spec := sandbox.Spec{SessionID: e.params.Session, Workspace: e.ws, ProxySocket: e.socket, Limits: e.params.Limits}
	end := e.b.cfg.Cache.BeginUnknownWrites(e.ws)
	p, err := e.b.cfg.Sandbox.Start(ctx, spec, req)
	if err != nil {
		end()
		return nil, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		p.Kill()
		end()
		return nil, fmt.Errorf("environment of session %s: %w", e.params.Session, ErrClosed)
	}
	if e.procs == nil {
		e.procs = make(map[*sandbox.Process]struct{})
	}
	e.procs[p] = struct{}{}
	e.mu.Unlock()
	go func() {
		<-p.Done()
		end()
		e.mu.Lock()
		delete(e.procs, p)
		e.mu.Unlock()
	}()
	return p, nil
}

// openDir opens the workspace for one file operation; call done when it
// is over.
func (e *localEnv) openDir() (d *workspace.Dir, done func(), err error) {
	return e.openDirWith(e.begin)
}

// openDirToWrite is openDir for an operation that may change the
// workspace (beginWrite). The temporary file of a write is told to the
// snapshot Cache as changing tells the destination, before and after:
// a snapshot taken meanwhile may list it.
func (e *localEnv) openDirToWrite() (d *workspace.Dir, done func(), err error) {
	d, done, err = e.openDirWith(e.beginWrite)
	if err == nil {
		d.OnTempFiles(func(tmp string) { e.b.cfg.Cache.NoteWrites(e.ws, tmp) })
	}
	return d, done, err
}

func (e *localEnv) openDirWith(begin func() (func(), error)) (d *workspace.Dir, done func(), err error) {
	finish, err := begin()
	if err != nil {
		return nil, nil, err
	}
	if err := e.ensureDir(); err != nil {
		finish()
		return nil, nil, err
	}
	d, err = workspace.Open(e.ws)
	if err != nil {
		finish()
		return nil, nil, err
	}
	return d, func() { d.Close(); finish() }, nil
}

// ReadFile implements Environment.
func (e *localEnv) ReadFile(_ context.Context, rel string, offset, limit int64) (*workspace.ReadResult, error) {
	d, done, err := e.openDir()
	if err != nil {
		return nil, err
	}
	defer done()
	return d.ReadFile(rel, offset, limit)
}

// WriteFile implements Environment.
func (e *localEnv) WriteFile(_ context.Context, rel string, data []byte) error {
	return e.write(rel, data, (*workspace.Dir).WriteFile)
}

// WriteFileDirect implements Environment.
func (e *localEnv) WriteFileDirect(_ context.Context, rel string, data []byte) error {
	return e.write(rel, data, (*workspace.Dir).WriteDirect)
}

// write writes data to rel by writeFile, the disk quota checked first.
func (e *localEnv) write(rel string, data []byte, writeFile func(*workspace.Dir, string, []byte) error) error {
	d, done, err := e.openDirToWrite()
	if err != nil {
		return err
	}
	defer done()
	defer e.lockWrites()()
	if err := e.checkQuota(rel, int64(len(data))); err != nil {
		return err
	}
	return e.changing(rel, func() error { return writeFile(d, rel, data) })
}

// checkQuota refuses a write of size bytes to rel over the disk quota.
func (e *localEnv) checkQuota(rel string, size int64) error {
	if q, ok := e.exec.(tool.DiskQuota); ok {
		if err := q.CheckWrite(size); err != nil {
			return fmt.Errorf("write %q: %w", rel, quotaError(err))
		}
	}
	return nil
}

// workspaceWriteLock is one workspace's lock of file changes, with the
// number of callers holding or waiting for it (guarded by localBackend.mu).
type workspaceWriteLock struct {
	mu    sync.Mutex
	users int
}

// lockWrites takes the workspace's lock of file changes (localBackend's
// writing); call the returned function to release it.
func (e *localEnv) lockWrites() func() {
	return e.b.lockWrites(e.params.Workspace)
}

func (b *localBackend) lockWrites(workspace string) func() {
	b.mu.Lock()
	if b.writing == nil {
		b.writing = make(map[string]*workspaceWriteLock)
	}
	l := b.writing[workspace]
	if l == nil {
		l = new(workspaceWriteLock)
		b.writing[workspace] = l
	}
	l.users++
	b.mu.Unlock()

	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		b.mu.Lock()
		// A caller that counted itself in waits on this very lock, so the
		// entry goes only when nobody holds or waits for it.
		if l.users--; l.users == 0 {
			delete(b.writing, workspace)
		}
		b.mu.Unlock()
	}
}

// WriteFileIf implements Environment.
func (e *localEnv) WriteFileIf(_ context.Context, rel string, data []byte, c Condition) error {
	return e.conditional(rel, c, workspace.BasisOf(data), func(d *workspace.Dir) (string, error) {
		if err := e.checkQuota(rel, int64(len(data))); err != nil {
			return "", err
		}
		return d.WriteDirectIf(rel, data, c.Basis)
	})
}

// RemoveIf implements Environment.
func (e *localEnv) RemoveIf(_ context.Context, rel string, c Condition) error {
	return e.conditional(rel, c, workspace.BasisAbsent, func(d *workspace.Dir) (string, error) {
		return d.RemoveIf(rel, c.Basis)
	})
}

// conditional makes a person's change by change (which answers what rel
// held) under the workspace's lock of file changes, unless the workspace
// holds c.Marker already, and records c.Marker when rel then holds made
// (what the change makes), whether the change or someone before made it.
func (e *localEnv) conditional(rel string, c Condition, made string, change func(*workspace.Dir) (string, error)) error {
	d, done, err := e.openDirToWrite()
	if err != nil {
		return err
	}
	defer done()
	defer e.lockWrites()()
	if c.Marker != "" {
		held, err := e.holds(c.Marker)
		if err != nil || held {
			return err // held: made already, by this call's twin
		}
		if judged, err := e.holds(ConflictMarker(c.Marker)); err != nil || judged {
			if err != nil {
				return err
			}
			// Found in conflict before (by a twin whose judgement may be
			// journaled already): never made after that, whatever the
			// path holds now.
			found, err := d.Basis(rel)
			if err == nil && found == c.Basis {
				found = FoundChangedSinceConflict
			}
			return &ConflictError{Path: rel, Basis: c.Basis, Found: found}
		}
	}
	var found string
	if c.Basis != "" {
		// Made already (by the agent, the same bytes): not written again.
		if found, err = d.Basis(rel); err == nil && found == made {
			return e.recordMarker(c.Marker)
		}
	}
	err = e.changing(rel, func() error {
		found, err = change(d)
		return err
	})
	switch {
	case err != nil:
		return err
	case c.Basis != "" && found != c.Basis && found != made:
		if c.Marker != "" {
			if err := e.recordMarker(ConflictMarker(c.Marker)); err != nil {
				return err
			}
		}
		return &ConflictError{Path: rel, Basis: c.Basis, Found: found}
	}
	return e.recordMarker(c.Marker)
}

// holds reports whether the workspace's list holds id.
func (e *localEnv) holds(id string) (bool, error) {
	known, _, err := e.b.cfg.Workspaces.HasSnapshot(e.params.Workspace, e.params.Session, id)
	return known, err
}

// recordMarker records a person's change's marker ("" : none).
func (e *localEnv) recordMarker(marker string) error {
	if marker == "" {
		return nil
	}
	if err := e.b.cfg.Workspaces.RecordSnapshot(e.params.Workspace, e.params.Session, marker); err != nil {
		return fmt.Errorf("record %q in the workspace of session %s: %w", marker, e.params.Session, err)
	}
	return nil
}

// CheckWrite implements Environment.
func (e *localEnv) CheckWrite(_ context.Context, size int64) error {
	finish, err := e.begin()
	if err != nil {
		return err
	}
	defer finish()
	if err := e.ensureDir(); err != nil {
		return err // the quota measures the directory
	}
	if q, ok := e.exec.(tool.DiskQuota); ok {
		if err := q.CheckWrite(size); err != nil {
			return quotaError(err)
		}
	}
	return nil
}

// quotaError is a write the sandbox's quota refused: ErrUnmeasurable
// when the workspace could not be measured, else ErrDiskQuota.
func quotaError(err error) error {
	if errors.Is(err, tool.ErrUnmeasurable) {
		return fmt.Errorf("%w: %v", ErrUnmeasurable, err)
	}
	return fmt.Errorf("%w: %v", ErrDiskQuota, err)
}

// StatDirect implements Environment.
func (e *localEnv) StatDirect(_ context.Context, rel string) (*workspace.Entry, error) {
	d, done, err := e.openDir()
	if err != nil {
		return nil, err
	}
	defer done()
	return d.StatDirect(rel)
}

// changing runs change, which changes the path rel only, telling the
// snapshot Cache before and after, so that a snapshot taken meanwhile (a
// sub-agent's, sharing the workspace) does not hide it. A path that is not
// clean (change refuses it) makes the next snapshot walk, to be sure. The
// temporary file beside rel that a write makes is told by the Dir
// (openDirToWrite), which alone knows its name.
func (e *localEnv) changing(rel string, change func() error) error {
	c, err := workspace.CleanPath(rel)
	if err != nil || c == "." {
		defer e.b.cfg.Cache.BeginUnknownWrites(e.ws)()
		return change()
	}
	slash := filepath.ToSlash(c)
	e.b.cfg.Cache.NoteWrites(e.ws, slash)
	defer e.b.cfg.Cache.NoteWrites(e.ws, slash)
	return change()
}

// List implements Environment.
func (e *localEnv) List(_ context.Context, rel string, max int) (*workspace.Listing, error) {
	d, done, err := e.openDir()
	if err != nil {
		return nil, err
	}
	defer done()
	return d.List(rel, max)
}

// Remove implements Environment.
func (e *localEnv) Remove(_ context.Context, rel string) error {
	d, done, err := e.openDirToWrite()
	if err != nil {
		return err
	}
	defer done()
	defer e.lockWrites()()
	return e.changing(rel, func() error { return d.Remove(rel) })
}

// take snapshots the workspace under the params' limits: a directory
// never made holds nothing (snapshot.TakeEmpty), and unmade says so.
func (e *localEnv) take(ctx context.Context, onTree func(digest string, data []byte)) (id string, st snapshot.Stats, unmade bool, err error) {
	l := e.params.Snapshot
	opts := snapshot.Options{
		MaxFileBytes: l.MaxFileBytes, MaxTotalBytes: l.MaxTotalBytes, Exclude: l.Exclude,
		Cache: e.b.cfg.Cache, Incremental: true, OnTree: onTree,
	}
	if unmade, err = e.dirMissing(); err != nil {
		return "", snapshot.Stats{}, false, err
	}
	if unmade {
		id, st, err = snapshot.TakeEmpty(ctx, e.b.cfg.Blobs, opts)
	} else {
		id, st, err = snapshot.Take(ctx, e.b.cfg.Blobs, e.ws, opts)
	}
	return id, st, unmade, err
}

// dirMissing reports whether the workspace's directory was never made,
// which only an Untouched environment's may be (ensureDir makes it): such
// a copy is empty, holds the empty snapshot and nothing else, and needs no
// list. A directory that existed and is gone again is not missing in that
// sense: it is a copy lost, as any other (a snapshot of it fails, it holds
// nothing).
func (e *localEnv) dirMissing() (bool, error) {
	if !e.params.Untouched || e.hadDir.Load() {
		return false, nil
	}
	made := workspace.DirsMade() // read before the look: a directory made after it counts
	if e.missingAt.Load() == made+1 {
		return true, nil
	}
	_, err := os.Lstat(e.ws)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e.missingAt.Store(made + 1)
		return true, nil
	case err != nil:
		return false, fmt.Errorf("environment of session %s: %w", e.params.Session, err)
	}
	// Made by the engine meanwhile (a person's change): seen now, and
	// noted as any copy made here is; gone later, it is lost.
	return false, e.ensureDir()
}

// ensureDir makes the workspace's directory of an Untouched environment,
// which Open leaves unmade, before a call that needs it. Made, it is noted
// as holding the empty snapshot, which the copy held unmade (without that
// entry, a file written into it would make the copy look lost), and
// forgotten by the snapshot Cache, which may know the path from before.
func (e *localEnv) ensureDir() error {
	if !e.params.Untouched || e.hadDir.Load() {
		return nil // made once: gone since, it is a copy lost, not made again
	}
	e.dirMu.Lock()
	defer e.dirMu.Unlock()
	if e.hadDir.Load() {
		return nil
	}
	_, made, err := e.b.cfg.Workspaces.Create(e.params.Workspace)
	if err != nil {
		return fmt.Errorf("environment of session %s: %w", e.params.Session, err)
	}
	if made {
		e.b.cfg.Cache.Forget(e.ws)
	}
	if e.emptyID != "" {
		if empty, err := e.b.cfg.Workspaces.Empty(e.params.Workspace); err == nil && empty {
			e.record(e.emptyID)
		}
	}
	// Only now may another call go on (and write into the copy): the
	// empty snapshot is noted before anything lands in it.
	e.hadDir.Store(true)
	return nil
}

// Snapshot implements Environment.
func (e *localEnv) Snapshot(ctx context.Context) (string, snapshot.Stats, error) {
	finish, err := e.begin()
	if err != nil {
		return "", snapshot.Stats{}, err
	}
	defer finish()
	var taken *snapshot.TreeSet // the snapshot's trees, for its claim
	var onTree func(string, []byte)
	if e.b.cfg.Owners != nil {
		taken = snapshot.NewTreeSet()
		onTree = taken.Add
	}
	id, stats, unmade, err := e.take(ctx, onTree)
	if err == nil && e.b.cfg.Owners != nil {
		err = e.claim(ctx, id, taken)
	}
	if err != nil {
		return "", stats, fmt.Errorf("snapshot the workspace of session %s: %w", e.params.Session, err)
	}
	if !unmade { // a copy never made holds the empty snapshot, listed or not
		e.record(id)
	}
	return id, stats, nil
}

// claim records that the environment's project owns snapshot id, which
// the server read from the project's workspace itself: the project's,
// however it came by the bytes. Only the trees it did not own yet are read
// again, and of those only what the copy's last claimed snapshot does not
// hold is asked about; a snapshot this backend claimed for the project
// before (the same step again, or another session's identical workspace)
// not even its root. taken holds the snapshot's trees, from its Take.
func (e *localEnv) claim(ctx context.Context, id string, taken *snapshot.TreeSet) error {
	switch {
	case e.params.Project == "":
		return errors.New("params.project: is required to snapshot a workspace whose owners are kept")
	case e.b.claimed.has(e.params.Project, id):
		e.base.Adopt(id)
		return nil
	}
	if err := e.base.Claim(ctx, e.b.cfg.Blobs, e.b.cfg.Owners, e.params.Project, id, snapshot.LastClaimOptions{Taken: taken}); err != nil {
		return err
	}
	e.b.claimed.add(e.params.Project, id)
	return nil
}

// record notes that the copy, whose directory exists, contains snapshot
// id. The list only spares a restore later: failing to keep it costs a
// restore, never a snapshot.
func (e *localEnv) record(id string) {
	record := e.b.cfg.Workspaces.RecordSnapshot
	if id == e.emptyID && e.params.Unshared && !e.programsRunning() {
		// Kept in memory only: nothing writes to the copy until a call
		// that may puts it on disk (beginWrite). A program Start
		// started may write at any time while it runs.
		record = e.b.cfg.Workspaces.RecordEmptySnapshot
	}
	if err := record(e.params.Workspace, e.params.Session, id); err != nil {
		e.b.cfg.Logger.Warn("record workspace snapshot", "session", e.params.Session, "err", err)
	}
}

// Restore implements Environment.
func (e *localEnv) Restore(ctx context.Context, id string) (snapshot.Stats, error) {
	finish, err := e.begin()
	if err != nil {
		return snapshot.Stats{}, err
	}
	defer finish()
	if err := e.owns(ctx, id); err != nil {
		return snapshot.Stats{}, fmt.Errorf("restore the workspace of session %s from snapshot %s: %w", e.params.Session, id, err)
	}
	if e.b.cfg.Owners != nil {
		// Its root was just read and its entries' rows recorded: a copy
		// with no base yet claims its next snapshot, the restored one or
		// one step from it, against it.
		e.base.Adopt(id)
	}
	if missing, err := e.dirMissing(); err != nil || (missing && id == e.emptyID) {
		return snapshot.Stats{}, err // a copy never made holds it already
	}
	if err := e.ensureDir(); err != nil {
		return snapshot.Stats{}, err
	}
	defer e.b.cfg.Cache.Forget(e.ws) // walked next, even if watched
	defer e.b.cfg.Cache.BeginUnknownWrites(e.ws)()
	stats, err := snapshot.Restore(ctx, e.b.cfg.Blobs, id, e.ws)
	if err != nil {
		return stats, fmt.Errorf("restore the workspace of session %s from snapshot %s: %w", e.params.Session, id, err)
	}
	// The copy holds the snapshot and no change made since: their markers
	// go (Manager.RecordRestore), so that they are made again.
	if err := e.b.cfg.Workspaces.RecordRestore(e.params.Workspace, e.params.Session, id); err != nil {
		return stats, fmt.Errorf("restore the workspace of session %s from snapshot %s: %w", e.params.Session, id, err)
	}
	return stats, nil
}

// owns checks that the environment's project owns snapshot id, when the
// backend keeps owners, and records the rows of what it reaches (a
// snapshot journaled before owners were kept has only its root's).
func (e *localEnv) owns(ctx context.Context, id string) error {
	switch {
	case e.b.cfg.Owners == nil:
		return nil
	case e.params.Project == "":
		return errors.New("params.project: is required to restore a snapshot whose owners are kept")
	}
	return snapshot.CheckOwned(ctx, e.b.cfg.Blobs, e.b.cfg.Owners, e.params.Project, id)
}

// Holds implements Environment.
func (e *localEnv) Holds(_ context.Context, id string) (bool, error) {
	finish, err := e.begin()
	if err != nil {
		return false, err
	}
	defer finish()
	if missing, err := e.dirMissing(); err != nil || missing {
		// Never made: empty, and nothing else (no person's change).
		return missing && id == e.emptyID && id != "", err
	}
	known, _, err := e.b.cfg.Workspaces.HasSnapshot(e.params.Workspace, e.params.Session, id)
	if err == nil && !known && id == e.emptyID {
		// Its entry kept in memory only, by a process since gone: an
		// empty copy holds the empty snapshot all the same, and is
		// noted so again, before a file lands in it.
		if known, err = e.b.cfg.Workspaces.Empty(e.params.Workspace); known && err == nil {
			e.record(id)
		}
	}
	return known, err
}

// SQLiteQuery implements Environment.
func (e *localEnv) SQLiteQuery(ctx context.Context, req *tool.SQLiteRequest) (*tool.SQLiteAnswer, error) {
	finish, err := e.beginWrite() // read-only, by SQLite's word for it
	if err != nil {
		return nil, err
	}
	defer finish()
	return tool.SQLiteAnswerOf(tool.RunSQLite(ctx, e.ws, req))
}

// Record implements Environment.
func (e *localEnv) Record(_ context.Context, id string) error {
	finish, err := e.begin()
	if err != nil {
		return err
	}
	defer finish()
	if missing, err := e.dirMissing(); err != nil || (missing && id == e.emptyID) {
		return err // a copy never made holds it without a list
	}
	if err := e.ensureDir(); err != nil {
		return err // a list beside no directory would be dropped with it
	}
	if err := e.b.cfg.Workspaces.RecordSnapshot(e.params.Workspace, e.params.Session, id); err != nil {
		return fmt.Errorf("record %q in the workspace of session %s: %w", id, e.params.Session, err)
	}
	return nil
}

// Stop implements Environment. It ends the programs Start started first
// (what they write must be in the snapshot or nowhere), then checks the
// workspace against id; refused, the Environment stays open.
func (e *localEnv) Stop(ctx context.Context, id string) error {
	b := e.b
	b.mu.Lock() // no Open of any workspace meanwhile, this one's included
	defer b.mu.Unlock()
	if n := b.open[e.params.Workspace]; n > 1 {
		return fmt.Errorf("stop the environment of session %s: %w (%d open)", e.params.Session, ErrBusy, n)
	}
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return fmt.Errorf("environment of session %s: %w", e.params.Session, ErrClosed)
	case e.stopping || e.inflight > 0:
		e.mu.Unlock()
		return fmt.Errorf("stop the environment of session %s: %w (calls in flight)", e.params.Session, ErrBusy)
	}
	e.stopping = true // no new call while it is checked and freed
	e.mu.Unlock()
	e.endPrograms()
	// The snapshot id is the digest of the workspace's content: equal ids,
	// equal workspaces, so removing it loses nothing id does not hold.
	got, _, _, err := e.take(ctx, nil)
	if err == nil && got != id {
		err = fmt.Errorf("%w: it is snapshot %s, not %s", ErrChanged, got, id)
	}
	e.mu.Lock()
	e.stopping = false
	e.closed = e.closed || err == nil
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("stop the environment of session %s: %w", e.params.Session, err)
	}
	delete(b.open, e.params.Workspace)
	defer b.cfg.Cache.Forget(e.ws)
	if err := e.stopProxyOnce(); err != nil {
		return err
	}
	if err := b.cfg.Workspaces.Remove(e.params.Workspace); err != nil {
		return fmt.Errorf("stop the environment of session %s: %w", e.params.Session, err)
	}
	return nil
}

// Close implements Environment. A command in flight is not interrupted:
// its caller's context is.
func (e *localEnv) Close() error {
	e.mu.Lock()
	was := e.closed
	e.closed = true
	e.mu.Unlock()
	if was {
		return nil
	}
	e.endPrograms()
	err := e.stopProxyOnce()
	e.b.release(e.params.Workspace)
	return err
}

// programsRunning reports whether a program Start started still runs.
func (e *localEnv) programsRunning() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.procs) > 0
}

// endPrograms kills the programs Start started and waits until they are
// reaped.
func (e *localEnv) endPrograms() {
	e.mu.Lock()
	procs := make([]*sandbox.Process, 0, len(e.procs))
	for p := range e.procs {
		procs = append(procs, p)
	}
	e.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
}

// stopProxyOnce stops the egress proxy, if one runs (after the programs:
// they may be using it).
func (e *localEnv) stopProxyOnce() error {
	e.mu.Lock()
	stop := e.stopProxy
	e.stopProxy = nil
	e.mu.Unlock()
	if stop == nil {
		return nil
	}
	if err := stop(); err != nil {
		return fmt.Errorf("stop the egress proxy of session %s: %w", e.params.Session, err)
	}
	return nil
}
