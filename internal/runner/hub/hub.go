package hub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/store"
)

// Defaults of Config.
const (
	DefaultTouchInterval = 5 * time.Second
	DefaultHelloTimeout  = 10 * time.Second
	// DefaultMaxConnsPerKey bounds one runner key's connections to a node:
	// a few runners sharing a key, or one reconnecting before the server
	// noticed its old connection dead.
	DefaultMaxConnsPerKey = 4
	// DefaultMaxConns bounds a node's runner connections.
	DefaultMaxConns = 1000
)

// StaleAfter is how long a runner's row stays listed without a touch: a
// few missed touches, so a node that died without removing its rows stops
// listing its runners within it.
func StaleAfter(touch time.Duration) time.Duration { return 3 * touch }

// Store is what the hub keeps in the store (store.Store has it). Every
// time in it is the store's clock, so that the nodes agree on which row
// is stale whatever their own clocks say.
type Store interface {
	RunnerConnect(ctx context.Context, row *store.RunnerRow, staleAfter time.Duration) error
	RunnerTouch(ctx context.Context, project, name, connID string) error
	RunnerDisconnect(ctx context.Context, project, name, connID string) error
	RunnerList(ctx context.Context, project string, staleAfter time.Duration) ([]*store.RunnerRow, error)
	RunnerSessions(ctx context.Context, project, name, connID string, sessions []string) error
}

// Config tunes a Hub. Node and the Store are required (New's arguments);
// the rest has defaults.
type Config struct {
	// TouchInterval is how often a connection's row is touched and its key
	// checked again. Default DefaultTouchInterval.
	TouchInterval time.Duration
	// HelloTimeout bounds the wait for a runner's Hello. Default
	// DefaultHelloTimeout.
	HelloTimeout time.Duration
	// Link tunes each connection (frame limit, heartbeats). Default nil:
	// link's defaults.
	Link *link.Config
	// MaxConnsPerKey bounds the connections one key holds to this node at
	// once (counted from the upgrade, before the Hello): one more is
	// closed with link.StatusTooManyConns. Default DefaultMaxConnsPerKey.
	MaxConnsPerKey int
	// MaxConns bounds this node's runner connections at once, likewise.
	// Default DefaultMaxConns.
	MaxConns int
	// Logger receives connections, refusals and ends (info, warn).
	// Default slog.Default().
	Logger *slog.Logger
	// Blobs is the server's store of snapshot blobs, which runners reach
	// only through blob.has, blob.put and blob.get (blobs.go). Nil: the
	// runners' blob calls fail.
	Blobs BlobStore
	// Owners records which project owns which snapshot blob (the
	// server's store, read without counting as a runner's fetch): a
	// runner reaches only its project's blobs, and a snapshot it answers
	// is accepted only if its project owns, or the runner sent, every
	// blob it reaches. Nil: the runners' blob calls fail.
	Owners OwnerStore
	// MaxUploadBytes bounds the bytes of the blobs this node's runners
	// are uploading in parts and have not finished (held in memory).
	// Default DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// MinProtocol is the oldest runner protocol (link.Hello.Protocol) the
	// hub takes: an older runner is refused (link.StatusOutdated) with a
	// reason that says to upgrade it. Default link.MinProtocolVersion;
	// never lower than 1.
	MinProtocol int
	// OnConnect, when set, is called with each connection's row once the
	// connection is held (Get finds it), in a goroutine of its own: the
	// engine wakes the sessions waiting for such a runner
	// (environment_connection).
	OnConnect func(row store.RunnerRow)
	// OnAbandoned, when set, is called with a connection's row each time
	// its runner reports that it closed an environment this node opened
	// and never claimed (link.MethodEnvAbandoned): a slot of it is free
	// again, which the node's count never held (the open failed here).
	// Called in a goroutine of its own.
	OnAbandoned func(row store.RunnerRow)
}

// Hub holds the runner connections of one node.
type Hub struct {
	node  string
	store Store
	cfg   Config
	log   *slog.Logger

	mu    sync.Mutex
	conns map[runnerKey]*Runner
	// open counts the connections being served (Serve), all and by key
	// id, against the caps.
	open      int
	openByKey map[string]int
	// uploading counts the bytes of the runners' unfinished blob uploads
	// (Config.MaxUploadBytes).
	uploading atomic.Int64
}

type runnerKey struct{ project, name string }

// Runner is one connected runner.
type Runner struct {
	// Row is what the store holds of it (its SeenAt as of connecting).
	Row store.RunnerRow
	// Conn is the connection, to call the runner with.
	Conn *link.Conn

	// env is what the connection's environments need of the server
	// (env.go): network event routes, restore scopes, blob uploads.
	env envState
	hub *Hub

	// sessions counts the environments open on the connection, by
	// session; recorded in the store (listed) at the next touch when
	// sessionsChanged.
	sessMu          sync.Mutex
	sessions        map[string]int
	sessionsChanged bool
	// unclaimed are the handles of the environments this node asked the
	// runner to open and has not claimed (NoteOpening, Claimed): the only
	// ones its report of an abandoned open is taken for. sessMu guards it.
	unclaimed map[string]struct{}
}

// maxUnclaimed bounds Runner.unclaimed: past it the oldest notes are not
// told apart from the others, and one is dropped at random.
const maxUnclaimed = 1024

// NoteOpening notes that this node is opening environment envID on r
// (env.open sent): until it is Claimed, the runner's report that it
// closed it unclaimed is taken.
func (r *Runner) NoteOpening(envID string) {
	r.sessMu.Lock()
	defer r.sessMu.Unlock()
	if r.unclaimed == nil {
		r.unclaimed = map[string]struct{}{}
	}
	if len(r.unclaimed) >= maxUnclaimed {
		for id := range r.unclaimed {
			delete(r.unclaimed, id)
			break
		}
	}
	r.unclaimed[envID] = struct{}{}
}

// Claimed notes that this node holds environment envID (its env.claim
// was answered, or it closed it): no report of it is taken.
func (r *Runner) Claimed(envID string) {
	r.sessMu.Lock()
	defer r.sessMu.Unlock()
	delete(r.unclaimed, envID)
}

// takeUnclaimed reports whether envID was noted and not claimed, and
// forgets it: each open is reported at most once.
func (r *Runner) takeUnclaimed(envID string) bool {
	r.sessMu.Lock()
	defer r.sessMu.Unlock()
	_, ok := r.unclaimed[envID]
	delete(r.unclaimed, envID)
	return ok
}

// SessionOpened counts an environment of session opened on r.
func (r *Runner) SessionOpened(session string) {
	r.sessMu.Lock()
	defer r.sessMu.Unlock()
	if r.sessions == nil {
		r.sessions = map[string]int{}
	}
	r.sessions[session]++
	r.sessionsChanged = true
}

// SessionClosed uncounts an environment of session that closed.
func (r *Runner) SessionClosed(session string) {
	r.sessMu.Lock()
	defer r.sessMu.Unlock()
	if r.sessions[session]--; r.sessions[session] <= 0 {
		delete(r.sessions, session)
	}
	r.sessionsChanged = true
}

// changedSessions returns the sessions open on r, sorted, if they changed
// since the last call (ok false: unchanged).
func (r *Runner) changedSessions() (sessions []string, ok bool) {
	r.sessMu.Lock()
	defer r.sessMu.Unlock()
	if !r.sessionsChanged {
		return nil, false
	}
	r.sessionsChanged = false
	for id := range r.sessions {
		sessions = append(sessions, id)
	}
	slices.Sort(sessions)
	return sessions, true
}

// New returns a Hub of the node named node, recording connections in st.
// It panics on a missing argument or an invalid cfg (wiring mistakes).
func New(node string, st Store, cfg *Config) *Hub {
	if node == "" || st == nil {
		panic("hub: node and store are required")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.TouchInterval < 0 || c.HelloTimeout < 0 {
		panic("hub: negative interval")
	}
	if c.MaxConnsPerKey < 0 || c.MaxConns < 0 {
		panic("hub: negative connection cap")
	}
	if c.MaxConnsPerKey == 0 {
		c.MaxConnsPerKey = DefaultMaxConnsPerKey
	}
	if c.MaxUploadBytes < 0 {
		panic("hub: negative upload bound")
	}
	if c.MaxUploadBytes == 0 {
		c.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MinProtocol < 0 {
		panic("hub: negative minimum protocol")
	}
	if c.MinProtocol == 0 {
		c.MinProtocol = link.MinProtocolVersion
	}
	if c.TouchInterval == 0 {
		c.TouchInterval = DefaultTouchInterval
	}
	if c.HelloTimeout == 0 {
		c.HelloTimeout = DefaultHelloTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Hub{node: node, store: st, cfg: c, log: c.Logger, conns: map[runnerKey]*Runner{}, openByKey: map[string]int{}}
}

// Key is the runner's key as the server authenticated it.
type Key struct {
	ID      string
	Project string
}

// KeyCheck reads the runner's key again: false when it is revoked or
// expired (the connection is closed), an error when it could not be read
// (tried again later).
type KeyCheck func(ctx context.Context) (valid bool, err error)

// Serve runs one runner's connection over ws, from its Hello to its end;
// it returns when the connection has ended. ctx ends the connection too
// (the server shutting down).
func (h *Hub) Serve(ctx context.Context, ws *websocket.Conn, key Key, check KeyCheck) {
	if reason := h.admit(key.ID); reason != "" {
		h.log.Warn("runner refused", "key_id", key.ID, "why", reason)
		_ = ws.Close(link.StatusTooManyConns, reason)
		return
	}
	defer h.release(key.ID)
	hello, err := h.readHello(ctx, ws)
	if err != nil {
		h.log.Warn("runner refused", "key_id", key.ID, "err", err)
		_ = ws.Close(link.StatusBadHello, shorten(err.Error()))
		return
	}
	if p := hello.EffectiveProtocol(); p < h.cfg.MinProtocol {
		// Refused before anything is recorded: the runner would fail the
		// calls of the newer protocol mid-session instead.
		h.log.Warn("runner refused: protocol too old", "runner", hello.Name, "key_id", key.ID,
			"protocol", p, "min_protocol", h.cfg.MinProtocol, "version", hello.Version)
		_ = ws.Close(link.StatusOutdated, shorten(fmt.Sprintf("runner protocol %d is older than %d, the oldest this server takes: upgrade longhaul on the runner's machine", p, h.cfg.MinProtocol)))
		return
	}
	r := &Runner{hub: h, Row: store.RunnerRow{
		Project: key.Project, Name: hello.Name, ConnID: "rc_" + randomHex(), KeyID: key.ID, Node: h.node,
		Labels: slices.Clone(hello.Labels), Capacity: hello.Capacity, Version: hello.Version,
		Protocol: hello.EffectiveProtocol(),
	}}
	if r.Row.Labels == nil {
		r.Row.Labels = []string{}
	}
	// The store sets the row's times and judges the holder's staleness
	// by its own clock, not this node's.
	err = h.store.RunnerConnect(ctx, &r.Row, StaleAfter(h.cfg.TouchInterval))
	if errors.Is(err, store.ErrConflict) {
		// Another key's live connection holds the name: refuse the
		// newcomer and leave the holder alone, so that one runner key
		// cannot knock its project's other runners offline.
		h.log.Warn("runner refused: name held by another key", "runner", hello.Name, "key_id", key.ID)
		_ = ws.Close(link.StatusNameHeld, shorten("runner name "+hello.Name+" is held by another key"))
		return
	}
	if err != nil {
		h.log.Error("record a runner's connection", "runner", hello.Name, "err", err)
		_ = ws.Close(websocket.StatusInternalError, "the server could not record the connection")
		return
	}
	if err := link.WriteJSON(ctx, ws, link.Welcome{ConnectionID: r.Row.ConnID, Node: h.node, Protocol: link.ProtocolVersion}); err != nil {
		h.forget(r)
		_ = ws.CloseNow()
		return
	}
	lc := *linkConfig(h.cfg.Link)
	lc.Handlers = h.runnerHandlers(r) // network.event and blob.* only
	if lc.MaxIncoming == 0 {
		lc.MaxIncoming = MaxRunnerCalls
	}
	r.Conn = link.New(ws, &lc)
	h.hold(r)
	if h.cfg.OnConnect != nil {
		go h.cfg.OnConnect(r.Row)
	}
	h.log.Info("runner connected", "runner", r.Row.Name, "project", r.Row.Project, "conn", r.Row.ConnID,
		"labels", r.Row.Labels, "capacity", r.Row.Capacity, "version", r.Row.Version, "protocol", r.Row.Protocol)
	defer h.forget(r)
	defer func() {
		// The connection's unfinished uploads die with it.
		r.env.mu.Lock()
		n := r.env.dropUploadsLocked()
		r.env.mu.Unlock()
		h.uploading.Add(-n)
	}()
	h.watch(ctx, r, check)
	h.log.Info("runner disconnected", "runner", r.Row.Name, "conn", r.Row.ConnID, "why", r.Conn.Err())
}

// admit counts a connection of key id against the caps; a refusal's
// reason when over one ("": admitted, to release).
func (h *Hub) admit(keyID string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.openByKey[keyID] >= h.cfg.MaxConnsPerKey:
		return fmt.Sprintf("this runner key holds %d connections to this node, the most it may", h.cfg.MaxConnsPerKey)
	case h.open >= h.cfg.MaxConns:
		return fmt.Sprintf("this node holds %d runner connections, the most it takes", h.cfg.MaxConns)
	}
	h.open++
	h.openByKey[keyID]++
	return ""
}

// release uncounts a connection admit counted.
func (h *Hub) release(keyID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open--
	if h.openByKey[keyID]--; h.openByKey[keyID] <= 0 {
		delete(h.openByKey, keyID)
	}
}

// readHello reads and checks the runner's first frame.
func (h *Hub) readHello(ctx context.Context, ws *websocket.Conn) (*link.Hello, error) {
	var limit int64 = link.DefaultMaxMessageBytes
	if h.cfg.Link != nil && h.cfg.Link.MaxMessageBytes > 0 {
		limit = h.cfg.Link.MaxMessageBytes
	}
	ws.SetReadLimit(limit)
	rctx, cancel := context.WithTimeout(ctx, h.cfg.HelloTimeout)
	defer cancel()
	var hello link.Hello
	if err := link.ReadJSON(rctx, ws, &hello); err != nil {
		if rctx.Err() != nil {
			return nil, fmt.Errorf("no hello within %s", h.cfg.HelloTimeout)
		}
		return nil, fmt.Errorf("hello: %w", err)
	}
	if err := hello.Check(); err != nil {
		return nil, err
	}
	return &hello, nil
}

// watch touches the connection's row and checks its key every interval,
// until the connection ends (or ctx does, which ends it).
func (h *Hub) watch(ctx context.Context, r *Runner, check KeyCheck) {
	t := time.NewTicker(h.cfg.TouchInterval)
	defer t.Stop()
	for {
		select {
		case <-r.Conn.Done():
			return
		case <-ctx.Done():
			r.Conn.CloseWith(websocket.StatusGoingAway, "the server is shutting down")
			<-r.Conn.Done()
			return
		case <-t.C:
		}
		valid, err := check(ctx)
		switch {
		case err != nil:
			h.log.Warn("check a runner's key", "runner", r.Row.Name, "err", err)
		case !valid:
			h.log.Info("runner's key revoked: closing its connection", "runner", r.Row.Name, "key_id", r.Row.KeyID)
			// Unlisted before the runner is told, so that no list read
			// after the runner stopped shows it.
			h.forget(r)
			r.Conn.CloseWith(link.StatusKeyRevoked, "the runner's API key was revoked or expired")
			continue
		}
		err = h.store.RunnerTouch(ctx, r.Row.Project, r.Row.Name, r.Row.ConnID)
		if errors.Is(err, store.ErrNotFound) {
			h.lost(ctx, r)
			continue
		}
		if err != nil {
			h.log.Warn("record a runner's liveness", "runner", r.Row.Name, "err", err)
		}
		if sessions, changed := r.changedSessions(); changed {
			if err := h.store.RunnerSessions(ctx, r.Row.Project, r.Row.Name, r.Row.ConnID, sessions); err != nil {
				r.sessMu.Lock()
				r.sessionsChanged = true // tried again at the next touch
				r.sessMu.Unlock()
				h.log.Warn("record a runner's sessions", "runner", r.Row.Name, "err", err)
			}
		}
	}
}

// lost closes r, whose row (its touch found) no longer names it: another
// connection, on any node, took the name, or the row is gone. The row is
// left as it is (touching it back would undo a takeover), and the close
// code says what the runner should do: a newer connection of the same key
// replaced it (link.StatusReplaced: this one stops for good), another key
// took the name over once this connection's row went stale, on another
// node (link.StatusTakenOver: the runner tries again later, so that
// another key cannot stop it for good), or the row is gone or could not
// be read (try again).
func (h *Hub) lost(ctx context.Context, r *Runner) {
	rows, err := h.store.RunnerList(ctx, r.Row.Project, 0)
	var holder *store.RunnerRow
	for _, row := range rows {
		if row.Name == r.Row.Name {
			holder = row
		}
	}
	switch {
	case err == nil && holder != nil && holder.KeyID == r.Row.KeyID:
		r.Conn.CloseWith(link.StatusReplaced, "a newer connection of runner "+r.Row.Name+" replaced this one")
	case err == nil && holder != nil:
		h.log.Warn("runner's name taken over by another key: closing its connection", "runner", r.Row.Name,
			"key_id", r.Row.KeyID, "by_key_id", holder.KeyID, "on_node", holder.Node)
		r.Conn.CloseWith(link.StatusTakenOver, shorten("runner name "+r.Row.Name+" was taken over by another key after this connection went stale"))
	default:
		if err != nil {
			h.log.Warn("read a runner's row", "runner", r.Row.Name, "err", err)
		}
		r.Conn.CloseWith(websocket.StatusTryAgainLater, "this connection's record is gone: connect again")
	}
}

// hold makes r the connection of its name, closing the one it replaces.
func (h *Hub) hold(r *Runner) {
	k := runnerKey{r.Row.Project, r.Row.Name}
	h.mu.Lock()
	old := h.conns[k]
	h.conns[k] = r
	h.mu.Unlock()
	switch {
	case old == nil:
	case old.Row.KeyID == r.Row.KeyID:
		old.Conn.CloseWith(link.StatusReplaced, "a newer connection of runner "+r.Row.Name+" replaced this one")
	default:
		// The store let another key take the name only because this
		// connection's row went stale: it may come back later.
		old.Conn.CloseWith(link.StatusTakenOver, shorten("runner name "+r.Row.Name+" was taken over by another key after this connection went stale"))
	}
}

// forget drops r (if it is still the connection of its name) and its row
// (if the row is still its own).
func (h *Hub) forget(r *Runner) {
	k := runnerKey{r.Row.Project, r.Row.Name}
	h.mu.Lock()
	if h.conns[k] == r {
		delete(h.conns, k)
	}
	h.mu.Unlock()
	// The connection ended, whatever ended the request: remove the row
	// even when ctx is already cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.store.RunnerDisconnect(ctx, r.Row.Project, r.Row.Name, r.Row.ConnID); err != nil {
		h.log.Warn("remove a runner's row", "runner", r.Row.Name, "err", err)
	}
}

// Node is the id of the node this hub belongs to.
func (h *Hub) Node() string { return h.node }

// Listed lists the live runners of project ("": every project) connected
// to any node, as the store holds them (stale rows left out).
func (h *Hub) Listed(ctx context.Context, project string) ([]*store.RunnerRow, error) {
	return h.store.RunnerList(ctx, project, StaleAfter(h.cfg.TouchInterval))
}

// Get returns the runner of project named name connected to this node.
func (h *Hub) Get(project, name string) (*Runner, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.conns[runnerKey{project, name}]
	return r, ok
}

// Connected lists the runners connected to this node, by project and
// name.
func (h *Hub) Connected() []store.RunnerRow {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]store.RunnerRow, 0, len(h.conns))
	for _, r := range h.conns {
		out = append(out, r.Row)
	}
	slices.SortFunc(out, func(a, b store.RunnerRow) int {
		if a.Project != b.Project {
			return strings.Compare(a.Project, b.Project)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func linkConfig(c *link.Config) *link.Config {
	if c == nil {
		return &link.Config{}
	}
	cp := *c
	return &cp
}

func randomHex() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// shorten fits a close frame's reason (at most 123 bytes).
func shorten(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}
