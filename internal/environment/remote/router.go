package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/runner/hub"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// RouterConfig says where a Router's environments may live.
type RouterConfig struct {
	// Local opens the environments that ask for no runner (this node's
	// own). Required.
	Local environment.Backend
	// Hub holds the runner connections of this node. Required.
	Hub *hub.Hub
	// Logger: as Config's. Default: discarded.
	Logger *slog.Logger
	// OnFreed, when set, is called with a runner (its project, name, key
	// id and labels) and how many more environments it takes now, each
	// time one of its environments closes or stops: the engine wakes that
	// many of the sessions that wait for a slot on it
	// (environment_connection). Called in a goroutine of its own.
	OnFreed func(project, name, keyID string, labels []string, free int)
}

// NewRouter returns the backend that picks, per open, where a session's
// environment lives: on this node (cfg.Local) when OpenParams.Runner is
// nil, else on a connected runner of the session's project that matches
// it (by name, or with all its labels), or on OpenParams.Pinned, the
// runner the environment already lives on. No match: ErrUnavailable,
// nothing ran.
func NewRouter(cfg *RouterConfig) (environment.Backend, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("new environment router: config is nil")
	case cfg.Local == nil:
		return nil, errors.New("new environment router: config.local: is required")
	case cfg.Hub == nil:
		return nil, errors.New("new environment router: config.hub: is required")
	}
	r := &router{cfg: *cfg, backends: map[runnerRef]*routed{}}
	if r.cfg.Logger == nil {
		r.cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

type router struct {
	cfg RouterConfig

	mu sync.Mutex
	// backends are the remote backends of the runners opened on so far,
	// with how many of their environments are open (the least busy
	// matching runner is picked).
	backends map[runnerRef]*routed
}

type runnerRef struct{ project, name string }

type routed struct {
	backend environment.Backend
	ref     runnerRef
	open    int
	// stopping counts its environments opened for a stop
	// (OpenParams.ForStop), which open does not: at most
	// environment.MaxStopOpens.
	stopping int
}

// Name is the local backend's: a runner's environment names its own
// backend in its Info.
func (r *router) Name() string { return r.cfg.Local.Name() }

// ConfinesNetwork answers for a session that is not known: its programs
// may run on this node or on any runner, so it is true only when the local
// backend confines them and so does every runner connected to this node
// (a runner that connects later is not counted: callers that know the
// session ask ConfinesNetworkOf).
func (r *router) ConfinesNetwork() bool {
	if !r.cfg.Local.ConfinesNetwork() {
		return false
	}
	for _, row := range r.cfg.Hub.Connected() {
		if !r.runnerConfines(row.Project, row.Name) {
			return false
		}
	}
	return true
}

// ConfinesNetworkOf implements environment.Router: the local backend's
// answer for a session that asks for no runner; the pinned runner's for a
// session whose environment lives on one; else true only when every
// matching runner connected to this node confines its programs, and false
// when none is (the session's runner, wherever it connects, is not known:
// the strictest answer).
func (r *router) ConfinesNetworkOf(p *environment.OpenParams) bool {
	if p == nil {
		return false
	}
	if p.Runner == nil && p.Pinned == "" {
		return r.cfg.Local.ConfinesNetwork()
	}
	if p.Pinned != "" {
		return r.runnerConfines(p.Project, p.Pinned)
	}
	matched := 0
	for _, row := range r.cfg.Hub.Connected() {
		if row.Project != p.Project || !p.Runner.Matches(row.Name, row.Labels) {
			continue
		}
		if !r.runnerConfines(row.Project, row.Name) {
			return false
		}
		matched++
	}
	return matched > 0
}

// runnerConfines asks the runner of that name (false when it is not
// connected to this node).
func (r *router) runnerConfines(project, name string) bool {
	b, err := New(&Config{Hub: r.cfg.Hub, Project: project, Runner: name, Logger: r.cfg.Logger})
	return err == nil && b.ConfinesNetwork()
}

// DiscardCopy implements environment.Discarder for this node's own
// copies (the local backend's, when it discards); a runner's copy is
// freed by the runner's stop, which the node holding its connection runs.
func (r *router) DiscardCopy(ctx context.Context, workspace string, stale func(context.Context) (bool, error)) (bool, error) {
	d, ok := r.cfg.Local.(environment.Discarder)
	if !ok {
		return false, nil
	}
	return d.DiscardCopy(ctx, workspace, stale)
}

// Open implements environment.Backend.
func (r *router) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	if p.Runner == nil && p.Pinned == "" {
		return r.cfg.Local.Open(ctx, p)
	}
	// refused are the runners that answered full although this node
	// counted room on them (the runner keeps its own count: an open it
	// still holds that this node gave up on): the next match is tried.
	var refused map[string]bool
	for {
		env, name, err := r.openOnce(ctx, p, refused)
		if err == nil || !errors.Is(err, environment.ErrFull) || p.Pinned != "" || name == "" {
			return env, err
		}
		r.cfg.Logger.Info("runner refused an environment as full: trying another match", "runner", name, "session", p.Session)
		if refused == nil {
			refused = map[string]bool{}
		}
		refused[name] = true
	}
}

// openOnce opens p's environment on the runner pickLocked names, not one
// of refused; name is that runner ("" when none was picked).
func (r *router) openOnce(ctx context.Context, p *environment.OpenParams, refused map[string]bool) (_ environment.Environment, name string, _ error) {
	r.mu.Lock()
	name, err := r.pickLocked(p, refused)
	if err == nil && name == "" {
		r.mu.Unlock()
		return nil, "", r.elsewhere(ctx, p)
	}
	if err != nil {
		r.mu.Unlock()
		return nil, "", err
	}
	ref := runnerRef{p.Project, name}
	rb := r.backends[ref]
	forStop := p.ForStop && p.Pinned != ""
	if rb == nil {
		b, err := New(&Config{Hub: r.cfg.Hub, Project: p.Project, Runner: name, Logger: r.cfg.Logger})
		if err != nil {
			r.mu.Unlock()
			return nil, name, err
		}
		rb = &routed{backend: b, ref: ref}
		r.backends[ref] = rb
	}
	if forStop {
		rb.stopping++
	} else {
		rb.open++
	}
	r.mu.Unlock()
	env, err := rb.backend.Open(ctx, p)
	if err != nil {
		r.release(rb, forStop)
		return nil, name, err
	}
	routed := &routedEnv{Environment: env, release: sync.OnceFunc(func() { r.release(rb, forStop) })}
	if forStop {
		return &stopOnlyEnv{routed}, name, nil
	}
	return routed, name, nil
}

// release counts one of rb's environments closed (one opened for a stop
// when forStop), and tells OnFreed that its runner takes one more.
func (r *router) release(rb *routed, forStop bool) {
	r.mu.Lock()
	if forStop {
		rb.stopping--
	} else {
		rb.open--
	}
	open := rb.open
	r.mu.Unlock()
	if r.cfg.OnFreed == nil || forStop {
		return // it held no slot
	}
	if rr, ok := r.cfg.Hub.Get(rb.ref.project, rb.ref.name); ok && open < rr.Row.Capacity {
		row := rr.Row
		go r.cfg.OnFreed(row.Project, row.Name, row.KeyID, row.Labels, row.Capacity-open)
	}
}

// openOn is how many environments this node holds open on the runner of
// row (all of them: a runner is connected to one node). r.mu is held.
func (r *router) openOnLocked(project, name string) int {
	if rb := r.backends[runnerRef{project, name}]; rb != nil {
		return rb.open
	}
	return 0
}

// pickLocked names the runner p's environment opens on: the pinned one
// while it is connected, else the least loaded connected runner of the
// project that matches p.Runner (its open environments over its
// capacity), not one of refused (it said it was full). A runner at its
// capacity takes no more: the session waits
// (ErrUnavailable, saying the matching runners are full) until one of
// its environments closes (OnFreed). "" and no error: no runner here, but
// another node may have it (elsewhere). r.mu is held, so that the pick
// and the count of its open environments are one step.
func (r *router) pickLocked(p *environment.OpenParams, refused map[string]bool) (string, error) {
	if p.Pinned != "" {
		rr, ok := r.cfg.Hub.Get(p.Project, p.Pinned)
		if !ok {
			return "", nil
		}
		if err := checkPinnedKey(p, rr); err != nil {
			return "", err
		}
		if p.ForStop {
			// Exempt from the capacity (the parked session holds no slot),
			// within its own bound.
			if rb := r.backends[runnerRef{p.Project, p.Pinned}]; rb != nil && rb.stopping >= environment.MaxStopOpens {
				return "", fmt.Errorf("open environment of session %s to stop it: runner %s: %w (%d stops under way)",
					p.Session, p.Pinned, environment.ErrFull, rb.stopping)
			}
			return p.Pinned, nil
		}
		if open := r.openOnLocked(p.Project, p.Pinned); open >= max(rr.Row.Capacity, 1) {
			return "", fmt.Errorf("open environment of session %s: runner %s, where its environment lives: %w (it is at its capacity: %d environments open)",
				p.Session, p.Pinned, environment.ErrFull, open)
		}
		return p.Pinned, nil
	}
	var best string
	bestLoad := -1.0
	full := 0
	for _, row := range r.cfg.Hub.Connected() {
		if row.Project != p.Project || !p.Runner.Matches(row.Name, row.Labels) {
			continue
		}
		open, capacity := r.openOnLocked(row.Project, row.Name), max(row.Capacity, 1)
		if open >= capacity || refused[row.Name] {
			full++
			continue
		}
		load := float64(open) / float64(capacity)
		if bestLoad < 0 || load < bestLoad {
			best, bestLoad = row.Name, load
		}
	}
	if best == "" && full > 0 {
		return "", fmt.Errorf("open environment of session %s: runner %s: %w (the matching runners are full: %d at their capacity)",
			p.Session, Describe(p.Runner), environment.ErrFull, full)
	}
	return best, nil
}

// elsewhere is the error of an open that found no runner for p on this
// node: an ElsewhereError when a live one that p may use is connected to
// another node (the store's list of live runners), else ErrUnavailable.
func (r *router) elsewhere(ctx context.Context, p *environment.OpenParams) error {
	rows, err := r.cfg.Hub.Listed(ctx, p.Project)
	if err != nil {
		r.cfg.Logger.Warn("list the runners of other nodes", "project", p.Project, "err", err)
	}
	keyChanged := false
	for _, row := range rows {
		if p.Pinned != "" && row.Name == p.Pinned && p.PinnedKey != "" && row.KeyID != p.PinnedKey {
			keyChanged = true
		}
		if row.Node == r.cfg.Hub.Node() {
			continue
		}
		pinnedThere := p.Pinned != "" && row.Name == p.Pinned && (p.PinnedKey == "" || row.KeyID == p.PinnedKey)
		if pinnedThere || (p.Pinned == "" && p.Runner.Matches(row.Name, row.Labels)) {
			return &environment.ElsewhereError{Node: row.Node, Runner: row.Name, Session: p.Session}
		}
	}
	if keyChanged {
		return fmt.Errorf("open environment of session %s: runner %s, where its environment lives: %w (on another node, not with the key its environment was opened with)",
			p.Session, p.Pinned, environment.ErrPinnedKeyChanged)
	}
	if p.Pinned != "" {
		return fmt.Errorf("open environment of session %s: runner %s, where its environment lives: %w (not connected)",
			p.Session, p.Pinned, environment.ErrUnavailable)
	}
	return fmt.Errorf("open environment of session %s: runner %s: %w (no matching runner is connected)",
		p.Session, Describe(p.Runner), environment.ErrUnavailable)
}

// Describe says which runner sel asks for, as errors name it.
func Describe(sel *environment.RunnerSelector) string {
	switch {
	case sel == nil:
		return "(none)"
	case sel.Name != "":
		return sel.Name
	default:
		return fmt.Sprintf("with labels %v", sel.Labels)
	}
}

// routedEnv counts its runner's open environments down when it closes
// or stops.
type routedEnv struct {
	environment.Environment
	release func()
}

func (e *routedEnv) Close() error {
	defer e.release()
	return e.Environment.Close()
}

func (e *routedEnv) Stop(ctx context.Context, id string) error {
	err := e.Environment.Stop(ctx, id)
	if err == nil {
		e.release()
	}
	return err
}

// stopOnlyEnv is an environment opened for a stop (OpenParams.ForStop):
// it holds no slot of its runner, so it runs nothing and changes nothing;
// it only tells what it holds, snapshots and stops.
type stopOnlyEnv struct{ *routedEnv }

var errStopOnly = fmt.Errorf("%w: opened only to be stopped", environment.ErrBusy)

func (e *stopOnlyEnv) Run(context.Context, *tool.ExecRequest) (*tool.ExecResult, error) {
	return nil, errStopOnly
}

func (e *stopOnlyEnv) Start(context.Context, *sandbox.StartRequest) (environment.Process, error) {
	return nil, errStopOnly
}

func (e *stopOnlyEnv) WriteFile(context.Context, string, []byte) error { return errStopOnly }

func (e *stopOnlyEnv) Remove(context.Context, string) error { return errStopOnly }

func (e *stopOnlyEnv) WriteFileDirect(context.Context, string, []byte) error { return errStopOnly }

func (e *stopOnlyEnv) CheckWrite(context.Context, int64) error { return errStopOnly }

func (e *stopOnlyEnv) StatDirect(context.Context, string) (*workspace.Entry, error) {
	return nil, errStopOnly
}

func (e *stopOnlyEnv) ReadFile(context.Context, string, int64, int64) (*workspace.ReadResult, error) {
	return nil, errStopOnly
}

func (e *stopOnlyEnv) List(context.Context, string, int) (*workspace.Listing, error) {
	return nil, errStopOnly
}

func (e *stopOnlyEnv) SQLiteQuery(context.Context, *tool.SQLiteRequest) (*tool.SQLiteAnswer, error) {
	return nil, errStopOnly
}

// Record is refused too: a marker says the workspace holds a change,
// and nothing is changed through an environment opened to be stopped.
func (e *stopOnlyEnv) Record(context.Context, string) error { return errStopOnly }

func (e *stopOnlyEnv) Restore(context.Context, string) (snapshot.Stats, error) {
	return snapshot.Stats{}, errStopOnly
}

// checkPinnedKey refuses runner rr for p when p is pinned to rr's name
// but with another key: the name changed hands (a name is free once its
// holder's connection ends), and the session's workspace and calls are
// not the newcomer's. Refused as no runner at all: the session waits for
// its own.
func checkPinnedKey(p *environment.OpenParams, rr *hub.Runner) error {
	if p.Pinned == "" || p.PinnedKey == "" || p.Pinned != rr.Row.Name || rr.Row.KeyID == p.PinnedKey {
		return nil
	}
	return fmt.Errorf("open environment of session %s: runner %s, where its environment lives: %w (not the key its environment was opened with)",
		p.Session, p.Pinned, environment.ErrPinnedKeyChanged)
}
