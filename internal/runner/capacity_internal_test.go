package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/runner/link"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
)

// The runner counts each of its slots exactly once, whatever a hostile or
// confused server does: these tests call the connection's handlers as
// such a server would, on a real runner's local environments (capacity
// 2), on a clock they set.

// gatedBackend is the runner's real local backend whose opens wait, once
// hold is set, until the test lets them go.
type gatedBackend struct {
	environment.Backend
	mu      sync.Mutex
	hold    chan struct{} // nil: opens go through
	waiting chan struct{} // an open is waiting on hold
}

func (b *gatedBackend) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	b.mu.Lock()
	hold := b.hold
	b.mu.Unlock()
	if hold != nil {
		b.waiting <- struct{}{}
		<-hold
	}
	return b.Backend.Open(ctx, p)
}

// holdOpens makes the next opens wait until release is called.
func (b *gatedBackend) holdOpens() (release func()) {
	hold := make(chan struct{})
	b.mu.Lock()
	b.hold, b.waiting = hold, make(chan struct{}, 8)
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.hold = nil
		b.mu.Unlock()
		close(hold)
	}
}

type capacityHarness struct {
	t       *testing.T
	c       *connEnvs
	backend *gatedBackend
	now     time.Time
}

func newCapacityHarness(t *testing.T) *capacityHarness {
	t.Helper()
	backend, _ := sandbox.Detect(t.Context(), sandbox.DetectOptions{Local: true})
	r, err := New(Config{Server: "http://127.0.0.1:1", Key: "k", DataDir: t.TempDir(), Backend: backend,
		Hello: link.Hello{Name: "box1", Capacity: 2, Version: "test"}})
	require.NoError(t, err)
	g := &gatedBackend{Backend: r.envs}
	r.envs = g
	h := &capacityHarness{t: t, c: newConnEnvs(r), backend: g, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h.c.now = func() time.Time { return h.now }
	close(h.c.ready) // no connection: the handlers are called directly
	t.Cleanup(h.c.end)
	return h
}

func (h *capacityHarness) call(ctx context.Context, method string, params any) error {
	raw, err := json.Marshal(params)
	require.NoError(h.t, err)
	_, err = h.c.handlers()[method](ctx, &link.Request{Method: method, Params: raw})
	return err
}

func (h *capacityHarness) open(ctx context.Context, id string) error {
	return h.call(ctx, link.MethodEnvOpen, link.EnvOpenParams{EnvID: id, Workspace: "ses_" + id, Session: "ses_" + id})
}

func (h *capacityHarness) slots() int {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.slots
}

func requireCode(t *testing.T, err error, code string) {
	t.Helper()
	var re *link.RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, code, re.Code, "%v", err)
}

// TestSecondOpenOfAnEnvIDIsRefused: two opens of one env_id at once (the
// first still opening) used to both count a slot, the second overwriting
// the first, whose slot was never given back until the connection ended.
// The second is refused; the first is counted once, and its close frees
// its slot.
func TestSecondOpenOfAnEnvIDIsRefused(t *testing.T) {
	h := newCapacityHarness(t)
	ctx := t.Context()
	release := h.backend.holdOpens()
	first := make(chan error, 1)
	go func() { first <- h.open(ctx, "e1") }()
	<-h.backend.waiting
	err := h.open(ctx, "e1")
	requireCode(t, err, link.CodeBadParams)
	require.Contains(t, err.Error(), "e1 is being opened already")
	release()
	require.NoError(t, <-first)
	requireCode(t, h.open(ctx, "e1"), link.CodeBadParams)
	require.Equal(t, 1, h.slots())

	require.NoError(t, h.open(ctx, "e2"))
	requireCode(t, h.open(ctx, "e3"), link.CodeFull)
	require.NoError(t, h.call(ctx, link.MethodEnvClose, link.EnvRef{EnvID: "e1"}))
	require.Equal(t, 1, h.slots())
	require.NoError(t, h.open(ctx, "e3"))
}

// TestOpenClosedWhileOpeningIsClosed: a server that gives up on an open
// closes it, possibly before the runner has finished opening it; that
// close used to find nothing and the environment was kept, its slot held,
// once opened. It is closed as soon as it is opened.
func TestOpenClosedWhileOpeningIsClosed(t *testing.T) {
	h := newCapacityHarness(t)
	ctx := t.Context()
	release := h.backend.holdOpens()
	first := make(chan error, 1)
	go func() { first <- h.open(ctx, "e1") }()
	<-h.backend.waiting
	require.NoError(t, h.call(ctx, link.MethodEnvClose, link.EnvRef{EnvID: "e1"}))
	release()
	requireCode(t, <-first, link.CodeCancelled)
	require.Equal(t, 0, h.slots())
	_, err := h.c.get("e1")
	requireCode(t, err, link.CodeClosed)
}

// TestUnclaimedOpensAreClosed: environments opened that no call names
// (the open's answer never reached the server, or a server that keeps
// them) used to hold their slots until the connection ended. Past
// unclaimedOpenTimeout they are closed when a slot is needed; one the
// server claimed (env.claim, or any call naming it) is kept however long
// it waits.
func TestUnclaimedOpensAreClosed(t *testing.T) {
	h := newCapacityHarness(t)
	ctx := t.Context()
	require.NoError(t, h.open(ctx, "e1"))
	require.NoError(t, h.open(ctx, "e2"))
	require.NoError(t, h.call(ctx, link.MethodEnvClaim, link.EnvRef{EnvID: "e2"}))
	requireCode(t, h.open(ctx, "e3"), link.CodeFull)

	h.now = h.now.Add(unclaimedOpenTimeout)
	requireCode(t, h.open(ctx, "e3"), link.CodeFull) // not past the bound yet
	h.now = h.now.Add(time.Second)
	require.NoError(t, h.open(ctx, "e3"), "e1 was never claimed: closed, its slot given back")
	_, err := h.c.get("e1")
	requireCode(t, err, link.CodeClosed)
	_, err = h.c.get("e2")
	require.NoError(t, err, "claimed: kept")
	require.Equal(t, 2, h.slots())

	// Any call naming it claims it as well.
	require.NoError(t, h.call(ctx, link.MethodSnapshotHolds, link.SnapshotParams{EnvID: "e3", Snapshot: "sha256:" + fmt.Sprintf("%064d", 0)}))
	h.now = h.now.Add(time.Hour)
	requireCode(t, h.open(ctx, "e4"), link.CodeFull)
	require.Equal(t, 2, h.slots())
}
