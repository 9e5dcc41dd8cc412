package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/longhaul-dev/longhaul/internal/egress"
	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// maxQueuedEvents bounds the network decisions waiting to be sent: the
// proxy must not block on the link, so past it decisions are dropped (and
// logged).
const maxQueuedEvents = 256

// connEnvs are the environments opened over one connection. They end with
// it: every program of the connection is ended before the runner dials
// again, so that a call the server runs again after losing this
// connection never overlaps the lost attempt.
type connEnvs struct {
	r      *Runner
	events chan link.NetworkEventParams
	// conn is set once link.New returned (ready closed): a handler waits
	// for it before calling back.
	conn  *link.Conn
	ready chan struct{}
	// serverProtocol is the runner protocol the server said it speaks in
	// its Welcome (0: 3 or older); set with conn.
	serverProtocol int

	// now is the clock of the uploads' idleness (tests set it).
	now func() time.Time

	mu   sync.Mutex
	envs map[string]*openEnv
	// opening are the environments being opened, by handle: a second
	// open of one is refused (it would count a slot that its first open's
	// end never gives back), and a close that comes meanwhile (a server
	// that gave up on the open) closes it once opened.
	opening map[string]*pendingOpen
	// slots and stops count the environments open or being opened: the
	// ones opened to be stopped (link.EnvOpenParams.ForStop) in stops, at
	// most environment.MaxStopOpens, the others in slots, at most the
	// runner's capacity. The runner keeps these bounds itself: a server
	// node that does not (hostile, or a bug) cannot make it hold more.
	slots, stops int
	// uploads are the writes arriving in parts, by environment and
	// upload handle ("env/upload").
	uploads map[string]*fileUpload
	ended   bool
}

// openEnv is an environment the server opened, with its programs.
type openEnv struct {
	id  string
	env environment.Environment
	// opened is when it was opened; claimed is set (c.mu held) once a
	// call named it after its open (env.claim, which the server sends
	// right after, or any other): one still unclaimed after
	// unclaimedOpenTimeout is one the server never learnt of or gave up
	// on, and is closed to free its slot (sweepUnclaimedLocked).
	opened  time.Time
	claimed bool
	// forStop: opened only to be snapshotted and stopped; every call but
	// those stopOnlyMethods lists is refused on it.
	forStop bool
	mu      sync.Mutex
	procs   map[string]environment.Process
}

// pendingOpen is an environment being opened (connEnvs.opening).
type pendingOpen struct {
	// closed: env.close came for it while it was being opened.
	closed bool
}

// unclaimedOpenTimeout is how long an environment opened waits for the
// server to name it in a call (env.claim). An open whose answer never
// reached the server (its call cancelled after the runner opened it) or
// that a hostile or confused server never uses nor closes would else hold
// its slot until the connection ends.
const unclaimedOpenTimeout = 2 * time.Minute

// fileUpload is an fs.write arriving in parts, kept in a temporary file
// outside the workspace until the last part.
type fileUpload struct {
	env  string
	path string
	f    *os.File
	size int64
	// last is when its last part came: an upload idle for uploadIdle is
	// one the server gave up (a cancelled write), discarded.
	last time.Time
}

// uploadIdle is how long an upload waits for its next part; a server
// sends a write's parts one after the other.
const uploadIdle = 2 * time.Minute

func newConnEnvs(r *Runner) *connEnvs {
	return &connEnvs{r: r, events: make(chan link.NetworkEventParams, maxQueuedEvents), ready: make(chan struct{}), now: r.cfg.Now,
		envs: map[string]*openEnv{}, opening: map[string]*pendingOpen{}, uploads: map[string]*fileUpload{}}
}

// start makes conn the connection the environments answer on and call
// back over (network decisions, blobs).
func (c *connEnvs) start(conn *link.Conn, serverProtocol int) {
	c.conn, c.serverProtocol = conn, serverProtocol
	c.r.blobs.conn.Store(conn)
	close(c.ready)
	go c.sendEvents()
}

// handlers are the calls the server makes of the runner.
func (c *connEnvs) handlers() map[string]link.Handler {
	hs := map[string]link.Handler{
		link.MethodExec:              c.exec,
		link.MethodRunnerInfo:        c.info,
		link.MethodEnvOpen:           c.open,
		link.MethodEnvClose:          c.close,
		link.MethodEnvClaim:          c.claim,
		link.MethodEnvStop:           c.stop,
		link.MethodProcessStart:      c.processStart,
		link.MethodProcessWait:       c.processWait,
		link.MethodProcessWrite:      c.processWrite,
		link.MethodProcessCloseStdin: c.processCloseStdin,
		link.MethodProcessStop:       c.processStop,
		link.MethodFSRead:            c.fsRead,
		link.MethodFSWrite:           c.fsWrite,
		link.MethodFSList:            c.fsList,
		link.MethodFSRemove:          c.fsRemove,
		link.MethodFSStatDirect:      c.fsStatDirect,
		link.MethodFSCheckWrite:      c.fsCheckWrite,
		link.MethodSnapshotTake:      c.snapshotTake,
		link.MethodSnapshotRestore:   c.snapshotRestore,
		link.MethodSnapshotHolds:     c.snapshotHolds,
		link.MethodSnapshotRecord:    c.snapshotRecord,
		link.MethodSQLiteQuery:       c.sqliteQuery,
	}
	for m, h := range hs {
		if !stopOnlyMethods[m] {
			hs[m] = c.refusedWhenStopOnly(h)
		}
	}
	return hs
}

// stopOnlyMethods are the calls an environment opened to be stopped
// answers: it holds no slot of the runner, so it runs nothing and changes
// nothing; it only tells what it holds, snapshots, stops and closes.
var stopOnlyMethods = map[string]bool{
	link.MethodRunnerInfo: true, link.MethodEnvOpen: true, link.MethodEnvClose: true, link.MethodEnvStop: true, link.MethodEnvClaim: true,
	link.MethodSnapshotTake: true, link.MethodSnapshotHolds: true,
}

// refusedWhenStopOnly is h, refused (workspace_busy, as the server's own
// wrapper refuses it) when the environment its params name was opened to
// be stopped.
func (c *connEnvs) refusedWhenStopOnly(h link.Handler) link.Handler {
	return func(ctx context.Context, req *link.Request) (any, error) {
		var ref link.EnvRef
		if json.Unmarshal(req.Params, &ref) == nil && ref.EnvID != "" {
			c.mu.Lock()
			e := c.envs[ref.EnvID]
			c.mu.Unlock()
			if e != nil && e.forStop {
				return nil, link.Errorf(link.CodeWorkspaceBusy, "environment %s was opened only to be stopped", ref.EnvID)
			}
		}
		return h(ctx, req)
	}
}

// reserve counts one more environment of the connection (forStop: one
// opened to be stopped), or refuses it (full) past the runner's bound.
// c.mu is held.
func (c *connEnvs) reserveLocked(forStop bool) error {
	switch {
	case forStop && c.stops >= environment.MaxStopOpens:
		return link.Errorf(link.CodeFull, "%d environments opened to be stopped are open on this runner, the most at once", c.stops)
	case forStop:
		c.stops++
	case c.slots >= max(c.r.cfg.Hello.Capacity, 1):
		return link.Errorf(link.CodeFull, "%d environments are open on this runner, its capacity", c.slots)
	default:
		c.slots++
	}
	return nil
}

// admitLocked counts the open of environment envID (reserveLocked), or
// refuses it: a handle open or being opened already is never counted
// twice. c.mu is held.
func (c *connEnvs) admitLocked(envID string, forStop bool) error {
	switch {
	case c.envs[envID] != nil:
		return link.Errorf(link.CodeBadParams, "env_id: %s is open already", envID)
	case c.opening[envID] != nil:
		return link.Errorf(link.CodeBadParams, "env_id: %s is being opened already", envID)
	}
	return c.reserveLocked(forStop)
}

// releaseLocked counts one environment of the connection less. c.mu is
// held.
func (c *connEnvs) releaseLocked(forStop bool) {
	if forStop {
		c.stops--
	} else {
		c.slots--
	}
}

// sweepUnclaimedLocked takes out of the connection's environments those
// no call named since they were opened unclaimedOpenTimeout ago, and
// frees their slots; the caller closes them, without c.mu. c.mu is held.
func (c *connEnvs) sweepUnclaimedLocked() []*openEnv {
	now := c.now()
	var swept []*openEnv
	for id, e := range c.envs {
		if !e.claimed && now.Sub(e.opened) > unclaimedOpenTimeout {
			c.r.log.Warn("closing an environment the server never used since it opened it", "env", id)
			delete(c.envs, id)
			c.releaseLocked(e.forStop)
			swept = append(swept, e)
		}
	}
	return swept
}

// closeSwept closes the environments sweepUnclaimedLocked took out, and
// tells a server of protocol 4 or more (env.abandoned), so that it wakes a
// session waiting for the slot; an older server does not take the call
// (the runner said so when it connected).
func (c *connEnvs) closeSwept(swept []*openEnv) {
	for _, e := range swept {
		_ = e.env.Close()
		if c.conn == nil || c.serverProtocol < 4 {
			continue
		}
		// Before the open that swept it is answered: a server that
		// reads that answer has heard the report (a round trip, only
		// when an open was abandoned).
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := c.conn.Call(ctx, link.MethodEnvAbandoned, link.EnvRef{EnvID: e.id}, nil, nil); err != nil && c.conn.Err() == nil {
			c.r.log.Warn("report an environment closed as abandoned", "env", e.id, "err", err)
		}
		cancel()
	}
}

// end closes every environment of the connection (ending their programs
// and proxies; the workspaces stay) once its calls are over.
func (c *connEnvs) end() {
	c.mu.Lock()
	c.ended = true
	envs := c.envs
	c.envs = map[string]*openEnv{}
	uploads := c.uploads
	c.uploads = map[string]*fileUpload{}
	c.mu.Unlock()
	for _, e := range envs {
		_ = e.env.Close()
	}
	for _, u := range uploads {
		u.discard()
	}
	c.r.blobs.conn.CompareAndSwap(c.conn, nil)
	close(c.events)
}

// sendEvents sends the proxies' decisions to the server, in order.
func (c *connEnvs) sendEvents() {
	for p := range c.events {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.conn.Call(ctx, link.MethodNetworkEvent, p, nil, nil)
		cancel()
		if err != nil && c.conn.Err() == nil {
			c.r.log.Warn("send a network decision", "err", err)
		}
	}
}

func (c *connEnvs) queueEvent(envID string, ev tool.NetworkEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	select {
	case c.events <- link.NetworkEventParams{EnvID: envID, Event: link.NetworkEvent(ev)}:
	default:
		c.r.log.Warn("network decision dropped: too many waiting to be sent", "env", envID, "host", ev.Host)
	}
}

// get returns the open environment envID.
func (c *connEnvs) get(envID string) (*openEnv, error) {
	<-c.ready
	if err := link.CheckHandle("env_id", envID); err != nil {
		return nil, link.Errorf(link.CodeBadParams, "%v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.envs[envID]
	if !ok {
		return nil, link.Errorf(link.CodeClosed, "environment %s is not open on this runner", envID)
	}
	e.claimed = true
	return e, nil
}

// onEnv decodes req's params (of type P, which names its environment in
// env_id) and runs op on that environment; op's failure goes back as
// wireError makes it.
func onEnv[P any](c *connEnvs, req *link.Request, op func(e *openEnv, p *P) (any, error)) (any, error) {
	var p P
	if err := req.DecodeParams(&p); err != nil {
		return nil, err
	}
	var ref link.EnvRef
	_ = json.Unmarshal(req.Params, &ref) // decoded strictly just above
	e, err := c.get(ref.EnvID)
	if err != nil {
		return nil, err
	}
	res, err := op(e, &p)
	if err != nil {
		return nil, c.r.wireError(err)
	}
	return res, nil
}

func (c *connEnvs) info(context.Context, *link.Request) (any, error) {
	return link.RunnerInfo{Sandbox: c.r.cfg.Backend.Name(), ConfinesNetwork: c.r.cfg.Backend.ConfinesNetwork()}, nil
}

// open answers link.MethodEnvOpen.
func (c *connEnvs) open(ctx context.Context, req *link.Request) (any, error) {
	<-c.ready
	var p link.EnvOpenParams
	if err := req.DecodeParams(&p); err != nil {
		return nil, err
	}
	if err := link.CheckHandle("env_id", p.EnvID); err != nil {
		return nil, link.Errorf(link.CodeBadParams, "%v", err)
	}
	limits := c.r.capLimits(p.Limits)
	op := &environment.OpenParams{
		Workspace: p.Workspace, Session: p.Session, Limits: limits,
		Snapshot: environment.SnapshotLimits{MaxFileBytes: p.Snapshot.MaxFileBytes, MaxTotalBytes: p.Snapshot.MaxTotalBytes, Exclude: p.Snapshot.Exclude},
	}
	if p.Network != nil {
		cp := &egress.ControlPlane{}
		for i, a := range p.Network.ControlPlane {
			if err := cp.Add("server", "the server", a); err != nil {
				return nil, link.Errorf(link.CodeBadParams, "network.control_plane[%d]: %v", i, err)
			}
		}
		envID := p.EnvID
		op.Network = &environment.Network{Allow: p.Network.Allow, Ports: p.Network.Ports, ControlPlane: cp,
			OnEvent: func(ev tool.NetworkEvent) { c.queueEvent(envID, ev) }}
	}
	c.mu.Lock()
	// Abandoned opens give their slots back before this one is counted.
	swept := c.sweepUnclaimedLocked()
	err := c.admitLocked(p.EnvID, p.ForStop)
	var pending *pendingOpen
	if err == nil {
		pending = &pendingOpen{}
		c.opening[p.EnvID] = pending
	}
	c.mu.Unlock()
	c.closeSwept(swept)
	if err != nil {
		return nil, err
	}
	env, err := c.r.envs.Open(ctx, op)
	c.mu.Lock()
	delete(c.opening, p.EnvID)
	switch {
	case err != nil:
		c.releaseLocked(p.ForStop)
		c.mu.Unlock()
		return nil, c.r.wireError(err)
	case c.ended:
		c.releaseLocked(p.ForStop)
		c.mu.Unlock()
		_ = env.Close()
		return nil, link.Errorf(link.CodeClosed, "the connection is ending")
	case ctx.Err() != nil || pending.closed:
		// The server gave up on the open (and may have closed it
		// meanwhile): it will not know this handle.
		c.releaseLocked(p.ForStop)
		c.mu.Unlock()
		_ = env.Close()
		return nil, link.Errorf(link.CodeCancelled, "the open was cancelled")
	}
	c.envs[p.EnvID] = &openEnv{id: p.EnvID, env: env, forStop: p.ForStop, procs: map[string]environment.Process{}, opened: c.now()}
	c.mu.Unlock()
	info := env.Info()
	return link.EnvOpenResult{Provisioned: info.Provisioned, Backend: info.Backend, Limits: wireLimits(limits)}, nil
}

// capLimits applies the asked limits capped by the runner's operator's
// (Config.Limits: a field set there is the most any session gets, and the
// default of one that asks for nothing).
func (r *Runner) capLimits(l link.Limits) sandbox.Limits {
	asked := sandbox.Limits{
		CPUSeconds: l.CPUSeconds, MemoryBytes: l.MemoryBytes, Processes: l.Processes, OutputBytes: l.OutputBytes,
		Wall: time.Duration(l.WallMS) * time.Millisecond, FileBytes: l.FileBytes, TmpBytes: l.TmpBytes, ShmBytes: l.ShmBytes,
		DiskBytes: l.DiskBytes,
	}
	m := r.cfg.Limits
	capped := func(a, most int64) int64 {
		if most > 0 && (a <= 0 || a > most) {
			return most
		}
		return a
	}
	return sandbox.Limits{
		CPUSeconds:  int(capped(int64(asked.CPUSeconds), int64(m.CPUSeconds))),
		MemoryBytes: capped(asked.MemoryBytes, m.MemoryBytes),
		Processes:   int(capped(int64(asked.Processes), int64(m.Processes))),
		OutputBytes: int(capped(int64(asked.OutputBytes), int64(m.OutputBytes))),
		Wall:        time.Duration(capped(int64(asked.Wall), int64(m.Wall))),
		FileBytes:   capped(asked.FileBytes, m.FileBytes),
		TmpBytes:    capped(asked.TmpBytes, m.TmpBytes),
		ShmBytes:    capped(asked.ShmBytes, m.ShmBytes),
		DiskBytes:   capped(asked.DiskBytes, m.DiskBytes),
	}
}

func wireLimits(l sandbox.Limits) link.Limits {
	return link.Limits{CPUSeconds: l.CPUSeconds, MemoryBytes: l.MemoryBytes, Processes: l.Processes, OutputBytes: l.OutputBytes,
		WallMS: l.Wall.Milliseconds(), FileBytes: l.FileBytes, TmpBytes: l.TmpBytes, ShmBytes: l.ShmBytes, DiskBytes: l.DiskBytes}
}

// take removes environment envID from the connection's.
func (c *connEnvs) take(envID string) *openEnv {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.envs[envID]
	if e != nil {
		delete(c.envs, envID)
		c.releaseLocked(e.forStop)
	}
	return e
}

func (c *connEnvs) close(_ context.Context, req *link.Request) (any, error) {
	var ref link.EnvRef
	if err := req.DecodeParams(&ref); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if pending := c.opening[ref.EnvID]; pending != nil {
		// Being opened: closed as soon as it is (open).
		pending.closed = true
		c.mu.Unlock()
		return nil, nil
	}
	c.mu.Unlock()
	_, err := onEnv(c, req, func(_ *openEnv, p *link.EnvRef) (any, error) {
		c.dropUploads(p.EnvID)
		if e := c.take(p.EnvID); e != nil {
			return nil, e.env.Close()
		}
		return nil, nil
	})
	var re *link.RemoteError
	if errors.As(err, &re) && re.Code == link.CodeClosed {
		return nil, nil // closing twice is fine
	}
	return nil, err
}

// claim answers link.MethodEnvClaim: the server holds the handle of an
// environment it opened, which is kept past unclaimedOpenTimeout (get
// marks it claimed).
func (c *connEnvs) claim(_ context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(*openEnv, *link.EnvRef) (any, error) { return nil, nil })
}

func (c *connEnvs) stop(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.EnvStopParams) (any, error) {
		if err := e.env.Stop(ctx, p.Snapshot); err != nil {
			return nil, err
		}
		c.take(p.EnvID)
		c.dropUploads(p.EnvID)
		return nil, nil
	})
}

// dropUploads discards the unfinished uploads of environment envID: it is
// closed, no write of it will finish.
func (c *connEnvs) dropUploads(envID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, u := range c.uploads {
		if u.env == envID {
			delete(c.uploads, id)
			u.discard()
		}
	}
}

// exec answers link.MethodExec: in an open environment when the params
// name one, else in the session's plain workspace (execPlain).
func (c *connEnvs) exec(ctx context.Context, req *link.Request) (any, error) {
	var p link.ExecParams
	if err := req.DecodeParams(&p); err != nil {
		return nil, err
	}
	if err := p.Check(); err != nil {
		return nil, link.Errorf(link.CodeBadParams, "%v", err)
	}
	if p.EnvID == "" {
		// It holds a slot while it runs, as an open environment does: the
		// runner's capacity bounds every command the server has run.
		c.mu.Lock()
		err := c.reserveLocked(false)
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		defer func() {
			c.mu.Lock()
			c.releaseLocked(false)
			c.mu.Unlock()
		}()
		return c.r.execPlain(ctx, req, &p)
	}
	e, err := c.get(p.EnvID)
	if err != nil {
		return nil, err
	}
	res, err := e.env.Run(ctx, &tool.ExecRequest{
		Command: p.Command, Env: p.Env, Timeout: time.Duration(p.TimeoutMS) * time.Millisecond, MaxOutputBytes: p.MaxOutputBytes,
	})
	if err != nil {
		return nil, c.r.wireError(err)
	}
	return sendExecResult(ctx, req, res)
}

func (c *connEnvs) fsRead(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.FSReadParams) (any, error) {
		// The answer is one frame: a read is bounded to what fits beside
		// the path, escaped (a '<' takes 6 bytes), and the envelope (the
		// server reads the rest in more calls).
		limit := min(p.Limit, int64(link.ChunkBytes(c.conn.MaxMessageBytes()-jsonLen(p.Path)))-4096)
		if limit < 1 {
			return nil, link.Errorf(link.CodeInvalidPath, "read %q: the path is too long for a frame", p.Path)
		}
		return e.env.ReadFile(ctx, p.Path, p.Offset, limit)
	})
}

// jsonLen is the length of v encoded as JSON (escapes included).
func jsonLen(v any) int64 {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return int64(len(b))
}

func (c *connEnvs) fsList(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.FSPathParams) (any, error) {
		l, err := e.env.List(ctx, p.Path, p.Max)
		if err != nil {
			return nil, err
		}
		fitListing(l, c.conn.MaxMessageBytes()-4096)
		return l, nil
	})
}

// fitListing keeps the first entries of l whose JSON fits max bytes (long
// names, escaped, may not: a thousand of 255 bytes are over a frame),
// marking the listing truncated as List does past its count.
func fitListing(l *workspace.Listing, max int64) {
	size := jsonLen(l.Path) + 128 // the other fields and their names
	for i, en := range l.Entries {
		size += jsonLen(en) + 1
		if size > max {
			l.Entries = l.Entries[:i]
			l.Truncated = true
			return
		}
	}
}

func (c *connEnvs) fsRemove(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.FSRemoveParams) (any, error) {
		if p.IfBasis == "" && p.Marker == "" {
			return nil, e.env.Remove(ctx, p.Path)
		}
		cond, err := condition(p.IfBasis, p.Marker)
		if err != nil {
			return nil, err
		}
		return changeResult(e.env.RemoveIf(ctx, p.Path, cond))
	})
}

// condition is the environment.Condition of a conditional fs.write or
// fs.remove, its fields checked.
func condition(basis, marker string) (environment.Condition, error) {
	if err := link.CheckBasis("if_basis", basis); err != nil {
		return environment.Condition{}, link.Errorf(link.CodeBadParams, "%v", err)
	}
	if len(marker) > maxMarkerBytes {
		return environment.Condition{}, link.Errorf(link.CodeBadParams, "marker: at most %d bytes", maxMarkerBytes)
	}
	return environment.Condition{Basis: basis, Marker: marker}, nil
}

// maxMarkerBytes bounds a change's marker (the engine's are short ids;
// the workspace's list checks their form when recording them).
const maxMarkerBytes = 128

// changeResult answers a conditional change: a conflict is a result, not
// an error, carrying what the path held.
func changeResult(err error) (any, error) {
	var ce *environment.ConflictError
	if errors.As(err, &ce) {
		return link.FSChangeResult{Conflict: true, Found: ce.Found}, nil
	}
	if err != nil {
		return nil, err
	}
	return link.FSChangeResult{}, nil
}

func (c *connEnvs) fsStatDirect(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.FSPathParams) (any, error) { return e.env.StatDirect(ctx, p.Path) })
}

func (c *connEnvs) fsCheckWrite(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.FSCheckWriteParams) (any, error) {
		if p.Size < 0 {
			return nil, fmt.Errorf("size: %d is negative", p.Size)
		}
		return nil, e.env.CheckWrite(ctx, p.Size)
	})
}

// fsWrite answers link.MethodFSWrite: a write in one part at once; the
// parts of a larger one into a temporary file under the data directory
// (not the workspace: a snapshot must not see half a file), the whole
// written by the environment on the last part (atomic, quota checked).
func (c *connEnvs) fsWrite(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.FSWriteParams) (any, error) {
		var cond environment.Condition
		if p.Conditional() {
			var err error
			if cond, err = condition(p.IfBasis, p.Marker); err != nil {
				return nil, err
			}
		}
		write := func(ctx context.Context, rel string, data []byte) (any, error) {
			switch {
			case p.Conditional():
				return changeResult(e.env.WriteFileIf(ctx, rel, data, cond))
			case p.Direct:
				return nil, e.env.WriteFileDirect(ctx, rel, data)
			}
			return nil, e.env.WriteFile(ctx, rel, data)
		}
		if p.Upload == "" {
			return write(ctx, p.Path, p.Data)
		}
		if err := link.CheckHandle("upload", p.Upload); err != nil {
			return nil, link.Errorf(link.CodeBadParams, "%v", err)
		}
		u, err := c.upload(p)
		if err != nil || !p.Last {
			return nil, err
		}
		defer u.discard()
		data, err := os.ReadFile(u.f.Name())
		if err != nil {
			return nil, link.Errorf(link.CodeFailed, "read the uploaded parts of %q", p.Path)
		}
		return write(ctx, p.Path, data)
	})
}

// upload appends a part of p's upload to its temporary file; the upload
// is the connection's no more once the last part came.
func (c *connEnvs) upload(p *link.FSWriteParams) (*fileUpload, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The server numbers an environment's uploads: two environments of
	// the connection may both have a "u1".
	key := p.EnvID + "/" + p.Upload
	now := c.now()
	for id, o := range c.uploads {
		if now.Sub(o.last) > uploadIdle {
			delete(c.uploads, id)
			o.discard()
		}
	}
	u := c.uploads[key]
	if p.Offset == 0 && u == nil {
		if len(c.uploads) >= maxFileUploads {
			return nil, link.Errorf(link.CodeBusy, "%d files are being uploaded already, the most at once", maxFileUploads)
		}
		f, err := os.CreateTemp(c.r.uploads, "upload-*")
		if err != nil {
			return nil, link.Errorf(link.CodeFailed, "make a temporary file for %q", p.Path)
		}
		u = &fileUpload{env: p.EnvID, path: p.Path, f: f}
		c.uploads[key] = u
	}
	bad := func(format string, args ...any) error {
		delete(c.uploads, key)
		if u != nil {
			u.discard()
		}
		return link.Errorf(link.CodeBadParams, format, args...)
	}
	switch {
	case u == nil:
		return nil, bad("upload %s: unknown (its first part never came)", p.Upload)
	case u.env != p.EnvID || u.path != p.Path || u.size != p.Offset:
		return nil, bad("upload %s: a part out of order", p.Upload)
	case u.size+int64(len(p.Data)) > link.MaxFileBytes:
		return nil, bad("upload %s: over %d bytes", p.Upload, link.MaxFileBytes)
	}
	if _, err := u.f.Write(p.Data); err != nil {
		delete(c.uploads, key)
		u.discard()
		return nil, link.Errorf(link.CodeFailed, "write the parts of %q", p.Path)
	}
	u.size += int64(len(p.Data))
	u.last = now
	if p.Last {
		delete(c.uploads, key)
	}
	return u, nil
}

// maxFileUploads bounds the files one connection uploads in parts at once.
const maxFileUploads = 16

func (u *fileUpload) discard() {
	_ = u.f.Close()
	_ = os.Remove(u.f.Name())
}

func (c *connEnvs) snapshotTake(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, _ *link.EnvRef) (any, error) {
		id, stats, err := e.env.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		if err := c.r.blobs.proveRoot(ctx, id); err != nil {
			return nil, err
		}
		return snapshotResult(id, stats)
	})
}

func (c *connEnvs) snapshotRestore(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.SnapshotParams) (any, error) {
		stats, err := e.env.Restore(ctx, p.Snapshot)
		if err != nil {
			return nil, err
		}
		return snapshotResult("", stats)
	})
}

func (c *connEnvs) snapshotHolds(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.SnapshotParams) (any, error) { return e.env.Holds(ctx, p.Snapshot) })
}

func (c *connEnvs) snapshotRecord(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.SnapshotParams) (any, error) { return nil, e.env.Record(ctx, p.Snapshot) })
}

func (c *connEnvs) sqliteQuery(ctx context.Context, req *link.Request) (any, error) {
	return onEnv(c, req, func(e *openEnv, p *link.SQLiteParams) (any, error) {
		var q tool.SQLiteRequest
		if err := json.Unmarshal(p.Request, &q); err != nil {
			return nil, fmt.Errorf("params.request: %w", err)
		}
		return e.env.SQLiteQuery(ctx, &q)
	})
}

func snapshotResult(id string, stats snapshot.Stats) (any, error) {
	raw, err := json.Marshal(stats)
	if err != nil {
		return nil, err
	}
	return link.SnapshotResult{ID: id, Stats: raw}, nil
}

// wireError is err as the server's caller must see it: the code of the
// sentinel it matches (which the server maps back), and a message that
// names no path of this machine (a workspace-relative one only).
func (r *Runner) wireError(err error) error {
	if err == nil {
		return nil
	}
	if re, ok := err.(*link.RemoteError); ok {
		return re // the handler's own
	}
	code := link.CodeFailed
	if re := (*link.RemoteError)(nil); errors.As(err, &re) {
		code = re.Code // the server's answer to a call of this one (blob.get)
	}
	for _, m := range []struct {
		sentinel error
		code     string
	}{
		{workspace.ErrEscapes, link.CodeEscapes},
		{workspace.ErrInvalidPath, link.CodeInvalidPath},
		{fs.ErrNotExist, link.CodeNotFound},
		{environment.ErrDiskQuota, link.CodeDiskQuota},
		{environment.ErrUnmeasurable, link.CodeUnmeasurable},
		{environment.ErrChanged, link.CodeChanged},
		{environment.ErrBusy, link.CodeWorkspaceBusy},
		{environment.ErrClosed, link.CodeClosed},
		{snapshot.ErrTooLarge, link.CodeTooLarge},
		{context.Canceled, link.CodeCancelled},
	} {
		if errors.Is(err, m.sentinel) {
			code = m.code
			break
		}
	}
	return &link.RemoteError{Code: code, Message: r.scrub(err.Error())}
}

// scrub takes this machine's directories out of a message.
func (r *Runner) scrub(msg string) string {
	for _, dir := range []string{r.work, r.data, r.sockets, os.TempDir()} {
		if dir != "" && dir != string(filepath.Separator) {
			msg = strings.ReplaceAll(msg, dir, "…")
		}
	}
	return msg
}

// sendExecResult sends a command's output as output frames, then its end.
func sendExecResult(ctx context.Context, req *link.Request, res *tool.ExecResult) (any, error) {
	if err := req.Output(ctx, link.StreamStdout, []byte(res.Stdout)); err != nil {
		return nil, err
	}
	if err := req.Output(ctx, link.StreamStderr, []byte(res.Stderr)); err != nil {
		return nil, err
	}
	return link.ExecResult{
		ExitCode: res.ExitCode, Truncated: res.Truncated, TimedOut: res.TimedOut,
		Signal: res.Signal, Limit: res.Limit, Error: res.Error,
	}, nil
}
