package hub

import (
	"context"
	"fmt"
	"sync"

	"github.com/longhaul-dev/longhaul/internal/runner/link"
)

// MaxRunnerCalls bounds the calls a runner makes of the server at once
// (unless Config.Link sets MaxIncoming): the runner is the lower-trust
// party, and each call holds a goroutine and maybe a blob.
const MaxRunnerCalls = 16

// envState is what a connection's remote environments need of the server
// side: where each environment's network events go, the snapshots the
// server asked the runner to restore (the only blobs blob.get hands out),
// the snapshots it is asked to take (the only time it may store blobs)
// and the blobs being uploaded in parts. It dies with the connection.
type envState struct {
	mu     sync.Mutex
	events map[string]func(link.NetworkEvent)
	scopes map[*restoreScope]struct{}
	takes  map[*takeScope]struct{}
	// takeSeq numbers the takes as they begin.
	takeSeq uint64
	// proofs are the blobs the runner sent while takes were in progress,
	// until no take that may look for them is (AllowTake); proofGen
	// changes when one comes or is recorded.
	proofs   map[string]*sentBlob
	proofGen uint64
	uploads  map[string]*upload
	info     *link.RunnerInfo
}

// runnerHandlers are the calls a runner may make of the server: its
// environments' network decisions and the snapshot blobs. Nothing it calls
// selects a session or reads anything but blobs it was asked to restore.
func (h *Hub) runnerHandlers(r *Runner) map[string]link.Handler {
	return map[string]link.Handler{
		link.MethodNetworkEvent: r.networkEvent,
		link.MethodBlobHas:      func(ctx context.Context, req *link.Request) (any, error) { return h.blobHas(ctx, r, req) },
		link.MethodBlobPut:      func(ctx context.Context, req *link.Request) (any, error) { return h.blobPut(ctx, r, req) },
		link.MethodBlobGet:      func(ctx context.Context, req *link.Request) (any, error) { return h.blobGet(ctx, r, req) },
		link.MethodEnvAbandoned: func(ctx context.Context, req *link.Request) (any, error) { return h.envAbandoned(r, req) },
	}
}

// envAbandoned answers link.MethodEnvAbandoned: the runner closed an
// environment that no call named after its open. Taken only for a handle
// this node opened and never claimed (a hostile runner's reports of
// others would wake sessions for slots that are not free); the log names
// the runner and the handle, nothing of the session's.
func (h *Hub) envAbandoned(r *Runner, req *link.Request) (any, error) {
	var p link.EnvRef
	if err := req.DecodeParams(&p); err != nil {
		return nil, err
	}
	if err := link.CheckHandle("env_id", p.EnvID); err != nil {
		return nil, link.Errorf(link.CodeBadParams, "%v", err)
	}
	if !r.takeUnclaimed(p.EnvID) {
		h.log.Warn("a runner reported closing an environment this node did not leave unclaimed: ignored", "runner", r.Row.Name, "env", p.EnvID)
		return nil, nil
	}
	h.log.Info("a runner closed an environment this node opened and never claimed: its slot is free", "runner", r.Row.Name, "env", p.EnvID)
	if h.cfg.OnAbandoned != nil {
		go h.cfg.OnAbandoned(r.Row)
	}
	return nil, nil
}

// OnNetworkEvent routes the network decisions the runner reports for
// environment envID to f (which must not block) until remove is called.
func (r *Runner) OnNetworkEvent(envID string, f func(link.NetworkEvent)) (remove func()) {
	r.env.mu.Lock()
	defer r.env.mu.Unlock()
	if r.env.events == nil {
		r.env.events = map[string]func(link.NetworkEvent){}
	}
	r.env.events[envID] = f
	return func() {
		r.env.mu.Lock()
		defer r.env.mu.Unlock()
		delete(r.env.events, envID)
	}
}

// networkEvent answers link.MethodNetworkEvent. An event of an
// environment the server does not know (closed meanwhile) is dropped.
func (r *Runner) networkEvent(_ context.Context, req *link.Request) (any, error) {
	var p link.NetworkEventParams
	if err := req.DecodeParams(&p); err != nil {
		return nil, err
	}
	if err := link.CheckHandle("env_id", p.EnvID); err != nil {
		return nil, link.Errorf(link.CodeBadParams, "%v", err)
	}
	r.env.mu.Lock()
	f := r.env.events[p.EnvID]
	r.env.mu.Unlock()
	if f != nil {
		f(p.Event)
	}
	return nil, nil
}

// Info asks the runner what its sandbox is, once per connection.
func Info(ctx context.Context, r *Runner) (*link.RunnerInfo, error) {
	r.env.mu.Lock()
	info := r.env.info
	r.env.mu.Unlock()
	if info != nil {
		return info, nil
	}
	var got link.RunnerInfo
	if err := r.Conn.Call(ctx, link.MethodRunnerInfo, struct{}{}, &got, nil); err != nil {
		return nil, fmt.Errorf("ask runner %s about its sandbox: %w", r.Row.Name, err)
	}
	r.env.mu.Lock()
	r.env.info = &got
	r.env.mu.Unlock()
	return &got, nil
}
