package engine

import (
	"context"
	"errors"
	"time"

	"github.com/longhaul-dev/longhaul/internal/environment"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// ListenForTest starts only e's subscription to the store's notifications
// (no scheduler: e claims nothing), as a node that runs no session of the
// test would hear them; the returned func stops it.
func (e *Engine) ListenForTest(ctx context.Context) (stop func()) {
	e.hub.start(ctx)
	return e.hub.stop
}

// HoldWorkspaceForTest holds session id's workspace lock alone, as a
// person's change of its files does (files.go changeFile); the returned
// func lets go.
func (e *Engine) HoldWorkspaceForTest(id string) (unlock func()) {
	unlock, _ = e.wsLocks.exclusive(context.Background(), id)
	return unlock
}

// DiscardIfStaleForTest looks once at this node's copy of workspace id,
// as a notice of its session's journal growing has it looked at
// (stalecopies.go), removing it if it is stale.
func (e *Engine) DiscardIfStaleForTest(ctx context.Context, id string) {
	e.discardIfStale(ctx, e.envs.(environment.Discarder), id)
}

// WorkspaceLockHoldersForTest is how many hold or wait for session id's
// workspace lock.
func (e *Engine) WorkspaceLockHoldersForTest(id string) int {
	e.wsLocks.mu.Lock()
	defer e.wsLocks.mu.Unlock()
	if k := e.wsLocks.m[id]; k != nil {
		return k.refs
	}
	return 0
}

// ShareWorkspaceForTest holds session id's workspace lock shared, as this
// node's runner of the session does for its whole claim (runSession); the
// returned func lets go.
func (e *Engine) ShareWorkspaceForTest(id string) (unlock func()) {
	return e.wsLocks.share(id)
}

// SetCreateJoinWaitForTest sets how long a creator waits for its session's
// runner to write the creation before it writes it alone (createJoinWait).
func SetCreateJoinWaitForTest(c *Config, d time.Duration) { c.createJoinWait = d }

// HandedOffForTest is how many sessions created here wait for the
// scheduler to start their runners.
func (e *Engine) HandedOffForTest() int { return len(e.handoff) }

// DrainingForTest reports whether Stop has begun to drain e.
func (e *Engine) DrainingForTest() bool { return e.isDraining() }

// FreeWorkersForTest is how many of e's worker slots are free.
func (e *Engine) FreeWorkersForTest() int { return cap(e.slots) - len(e.slots) }

// PauseAloneForTest pauses session id and none of its sub-agents, as a
// pause request cut short after its first write leaves the tree.
func (e *Engine) PauseAloneForTest(ctx context.Context, id string) error {
	_, err := e.pauseOne(ctx, id, "cut short", "", "", nil)
	return err
}

// ResumeAloneForTest resumes session id and none of its sub-agents, as a
// resume request cut short after its first write leaves the tree.
func (e *Engine) ResumeAloneForTest(ctx context.Context, id string) error {
	_, err := e.resumeOne(ctx, id, "", nil)
	return err
}

// PauseSubagentsForTest walks session id's tree as its pause does after its
// own write, and nothing more (a walk that another request overtakes).
func (e *Engine) PauseSubagentsForTest(ctx context.Context, id, reason string) error {
	if err := e.pauseSubagents(ctx, id, reason); !errors.Is(err, errWalkOver) {
		return err
	}
	return nil
}

// ResumeSubagentsForTest walks session id's tree as its resume does after
// its own write, and nothing more.
func (e *Engine) ResumeSubagentsForTest(ctx context.Context, id string) error {
	if _, err := e.resumeSubagents(ctx, id); !errors.Is(err, errWalkOver) {
		return err
	}
	return nil
}

// SettleTreeForTest ends a walk of session id's tree that carried paused
// as a pause or resume request does (settleTree).
func (e *Engine) SettleTreeForTest(ctx context.Context, id string, paused bool) error {
	return e.settleTree(ctx, id, paused)
}

// DecideActionAloneForTest decides an action as DecideAction does and
// walks no tree after (a request whose worker stopped after its write).
func (e *Engine) DecideActionAloneForTest(ctx context.Context, sessionID, actionID string, d *lt.Decision) error {
	_, err := e.decideAction(ctx, sessionID, actionID, d)
	return err
}
