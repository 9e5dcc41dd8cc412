package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/monitor"
	"github.com/longhaul-dev/longhaul/internal/policy"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// runner drives one claimed session through the turn loop. It is the only
// writer of the session while its lease holds; API writes (a cancel, a new
// turn) may land between its appends and are merged by re-applying its
// pending events on the newer state.
type runner struct {
	e     *Engine
	lease store.Lease
	// project is the session's project: its agents and secrets resolve
	// there, and only there.
	project    string
	st         *journal.State // includes the pending batch
	b          *batch         // events not yet durable
	durableSeq int64
	spec       lt.AgentSpec
	provider   model.Provider
	ws         string
	tx         *transcript
	tools      *toolCatalog // what each tool name stands for, and what the model is offered
	mcp        *mcpTools    // the MCP servers' tools, as last listed in the journal
	policies   *policy.Set
	env        *sessionEnv
	// provisioned: the Environment found no workspace at this claim and
	// made an empty one, not yet checked against the journal
	// (workspaceLost).
	provisioned bool
	// untouched: no tool of the session reaches its workspace, whose
	// directory on this node is made only when something needs it
	// (environment.OpenParams.Untouched).
	untouched bool
	// envRunner names the runner the session's environment opened on
	// ("": this node); journaled (environment.opened) when the journal
	// names another.
	envRunner string
	// envRunnerKey is the key id that runner connected with (journaled
	// with it).
	envRunnerKey string
	// envDeferred: the environment was stopped while the session was
	// idle; it is opened when a tick has a turn to run (idlestop.go).
	envDeferred bool
	// envForStop: this claim opened the environment for its idle stop
	// (environment.OpenParams.ForStop), holding no runner slot; a tick
	// that has work for it after all opens it again, as any claim does.
	envForStop bool
	// envRechecked: this claim looked for a runner again after writing
	// its environment_connection action (awaitEnvironment).
	envRechecked bool
	envErr       error // why the environment could not be set up
	// lostCalls say, by call id, why an irreversible call's outcome is
	// unknown when its environment went away mid-call: carried to the
	// runner that starts over, whose recoverCall settles the call once
	// the environment is opened again.
	lostCalls map[string]string
	h         *history                // nil unless a policy looks at past effects
	others    map[string]*treeHistory // the tree's other sessions, for h
	// wsWriter is the node whose worker last changed (or restored) the
	// workspace, as the journal says: another node's means this node's
	// copy, if any, is stale.
	wsWriter string
	released bool // the lease was given back with the last append
	// snapshotOff: the runner read another writer's events after its
	// own unsaved ones (merge), in another order than the journal's, so
	// its compactions name no context snapshot (resume.go) for the rest
	// of the claim.
	snapshotOff bool
	// tickSeq is the session's last seq as readControls read it at the
	// start of this tick, until the runner writes again (-1: not read
	// since); readSteers uses it rather than reading the store again.
	tickSeq int64
	// lookDeferred: this tick took no look at the session because all it
	// has to do is a step's model call (modelCallOnlyDue); the append of
	// the model's request is the check, and a conflict sends the runner
	// back to its tick rather than on to the model (invoke).
	lookDeferred bool
	// spawnsLooked: this runner has looked for children a worker made
	// before their spawns were recorded (spawnsMadeBefore, its first tick).
	spawnsLooked bool
	// fromCreation: the runner starts from what its session's creation
	// stored (newRunnerFrom), until its first tick (firstRequestOnlyDue).
	fromCreation bool
	// pending is the session's creation when this runner is to write it
	// (createjoin.go): with its first append, or alone first; nil once
	// written, or for a session the runner read.
	pending *pendingCreation
	// tree is this session's part in its tree's budget ledger.
	tree *treeLedger
	// claim hears the session's appends since the claim began (nil: not
	// followed, and every call's control watcher reads the session first).
	claim *claimWatch
	// mon runs the trajectory monitor's detectors over the journal;
	// monFound is what they found that the next tick journals (monitor.go).
	mon      *monitor.Monitor
	monFound []monitor.Finding
	// monReview is the model monitor's review whose call is under way
	// (monitorreview.go).
	monReview *pendingReview
	// treeLooked: this runner has let go the sub-agents a hold that is
	// over left paused (releaseStaleHold, its first tick).
	treeLooked bool
}

// newRunner returns a runner of the session l leases, read from the store.
func (e *Engine) newRunner(ctx context.Context, l store.Lease) (*runner, error) {
	return e.newRunnerFrom(ctx, l, nil)
}

// newRunnerFrom is newRunner from what the session's creation stored when
// start is set (the session was created here with l).
func (e *Engine) newRunnerFrom(ctx context.Context, l store.Lease, start *created) (*runner, error) {
	var (
		row *store.SessionRow
		st  *journal.State
		err error
	)
	if start != nil {
		row = &start.row
		st, err = decodeState(row)
	} else {
		row, st, err = e.loadState(ctx, l.SessionID)
	}
	if err != nil {
		return nil, err
	}
	// A session stored before projects existed has none: the default
	// project, as the migration puts them in.
	r := &runner{e: e, lease: l, project: cmp.Or(row.Project, lt.DefaultProject), st: st, durableSeq: row.LastSeq, tickSeq: -1, tree: newTreeLedger(st),
		fromCreation: start != nil}
	if start != nil {
		r.pending = start.pending
	}
	r.b = e.newBatch(ctx, st, e.cfg.NodeID)
	if err := json.Unmarshal(row.Spec, &r.spec); err != nil {
		return nil, fmt.Errorf("decode agent spec: %w", err)
	}
	r.provider = e.cfg.Providers[r.spec.Model.Provider]
	// This node's path of the workspace, for what still reads it here
	// (evidence, sqlite_query, a person's changes); the session's
	// Environment (setupEnvironment) is what the tools use. A workspace
	// it has to make anew is noticed (and restored from the last
	// snapshot) before the next tool runs.
	r.ws = e.spaces.Path(st.WorkspaceID()) // a sub-agent works in its root's
	// Since no runner held the session, the workspace may have changed
	// unseen: its first checkpoint walks it (snapshotwrites.go).
	e.snapshots.Forget(r.ws)
	r.tx = newTranscript(&r.spec)
	r.mcp = newMCPTools()
	r.tools = newToolCatalog(e.tools, &r.spec)
	if r.policies, err = compilePolicies(&r.spec); err != nil {
		return nil, fmt.Errorf("compile policies: %w", err)
	}
	if r.policies.NeedsEffects() {
		r.h = newHistory()
	}
	if err := r.newMonitor(ctx); err != nil {
		return nil, fmt.Errorf("set up the trajectory monitor: %w", err)
	}
	if st.EnvironmentStopped {
		// Stopped while idle: opened again only by a tick with a turn to
		// run (tick), so a claim that just parks recreates nothing.
		r.envDeferred = true
	} else {
		r.envForStop = r.idleStopDue()
		r.openEnvironment(ctx)
	}
	// Rebuild the model context from the journal: from its latest
	// snapshot on (resume.go).
	var known []store.Event
	if start != nil {
		known = start.events
	}
	if err := r.rebuildFrom(ctx, row.LastSeq, known); err != nil {
		// The environment just opened would stay open (its proxy, and a
		// hold on its workspace that makes every Stop busy).
		r.env.close()
		return nil, err
	}
	return r, nil
}

// openEnvironment sets up the session's environment for this claim; a
// failure is kept (envErr) for the next tick to act on.
func (r *runner) openEnvironment(ctx context.Context) {
	if err := r.setupEnvironment(ctx); err != nil {
		// Not a reason to retry the claim forever (a deleted secret, a
		// proxy that cannot start): the turn fails, saying why.
		r.env.close()
		r.env, r.envErr = nil, err
	}
}

// resolveBlob returns ev with its payload read back from the blob store when
// it was moved there, if what a runner derives needs it: the transcript,
// the MCP listings and, when history is set, the effect history (a call's
// arguments past the blob threshold are in its tool.requested's blob).
func (e *Engine) resolveBlob(ctx context.Context, ev lt.Event, history bool) (lt.Event, error) {
	wanted := transcriptWants(ev.Type) || ev.Type == lt.EventMCPToolsListed || ev.Type == lt.EventToolRequested || (history && historyWants(ev.Type))
	if !wanted || len(ev.Data) == 0 || ev.Data[0] != '{' {
		return ev, nil
	}
	var stub lt.BlobData
	if json.Unmarshal(ev.Data, &stub) != nil || len(stub.Blob.SHA256) != 64 {
		return ev, nil
	}
	data, err := e.store.BlobGet(ctx, stub.Blob.SHA256)
	if err != nil {
		return ev, fmt.Errorf("read blob of event %d: %w", ev.Seq, err)
	}
	ev.Data = data
	return ev, nil
}

// add appends an event to the pending batch (applied at once to r.st).
func (r *runner) add(typ, turnID string, step int, data any) error {
	if err := r.b.add(typ, turnID, step, data); err != nil {
		return err
	}
	r.observe(r.b.events[len(r.b.events)-1])
	return nil
}

// observe folds an event into what the runner derives from the journal.
func (r *runner) observe(ev lt.Event) {
	r.tx.observe(ev)
	r.h.observe(ev)
	r.monFound = append(r.monFound, r.mon.Observe(ev)...)
	if r.mcp.observe(ev) {
		r.tools.withMCP(r.mcp)
	}
	switch ev.Type {
	case lt.EventToolStarted:
		if d, err := lt.DataAs[lt.ToolStartedData](ev); err == nil && d.Class != lt.EffectRead {
			r.wsWriter = ev.WorkerID
		}
	case lt.EventEnvironmentRestored, lt.EventWorkspaceChanged:
		// A person's change was applied to that node's copy, which holds
		// everything before it (workspacesync.go).
		r.wsWriter = ev.WorkerID
	}
}

func (r *runner) status(to lt.SessionStatus, stopReason string) error {
	return r.b.status(to, stopReason)
}

// flush makes the pending events durable under the lease. If API writes
// landed meanwhile, it re-applies the pending events on the newer state and
// tries again; release gives the lease up in the same transaction.
func (r *runner) flush(ctx context.Context, release bool) error {
	for attempt := 0; ; attempt++ {
		if r.b.empty() && !release {
			return nil
		}
		if r.b.empty() {
			r.released = true
			return r.releaseLease(ctx)
		}
		err := r.appendBatch(ctx, release)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt > 50 {
			return fmt.Errorf("append: %w", err)
		}
		if err := r.merge(ctx); err != nil {
			return err
		}
	}
}

// dropRule says when appendOrDrop drops what its caller just added.
type dropRule int

const (
	// dropOnWrite: whatever another writer appended since the runner last
	// read or wrote the journal (a pause taken: a resume withdraws it).
	dropOnWrite dropRule = iota
	// dropStartOnWrite: a start no look came before this tick (a step's
	// model request, lookDeferred): whatever another writer appended, and
	// a pause or a cancel the runner holds already.
	dropStartOnWrite
	// dropStartOnControl: a start after the tick's look: a pause or a
	// cancel, appended by another writer or merged in by a flush since
	// the tick decided (a review's, a tree's reservation); other writes
	// are merged and the append tried again, as flush does.
	dropStartOnControl
)

// appendOrDrop makes the pending events durable, as flush does, but only
// if nothing that must come first landed since the runner last read or
// wrote the journal (rule): else the events and blobs its caller added
// last (after the batch's lengths events and blobs) are dropped unsaved,
// the rest is merged onto the newer journal, and it reports false. The
// caller then goes back to its tick, which decides again on the journal
// just read: what the dropped events would have started (a model call, a
// tool call, a pause) starts only if it still should.
func (r *runner) appendOrDrop(ctx context.Context, events, blobs int, release bool, rule dropRule) (bool, error) {
	// Counted from the end: a merge may take a compaction's snapshot out
	// of the batch, before the caller's part.
	tailEvents, tailBlobs := len(r.b.events)-events, len(r.b.blobs)-blobs
	drop := func() (bool, error) {
		return false, r.dropEnd(ctx, len(r.b.events)-tailEvents, len(r.b.blobs)-tailBlobs)
	}
	for attempt := 0; ; attempt++ {
		if rule != dropOnWrite && (r.st.Pause != nil || r.st.Cancel != nil) {
			// Read in after the tick decided (by this loop's merge, or a
			// flush before the start): the tick acts on it first. Any
			// cancel: one an in-doubt effect holds parks the session
			// before anything starts, and the call's own start, already
			// applied, would count as holding it (journal.CancelHeld).
			return drop()
		}
		err := r.appendBatch(ctx, release)
		switch {
		case err == nil:
			return true, nil
		case !errors.Is(err, store.ErrConflict) || attempt > 50:
			return false, fmt.Errorf("append: %w", err)
		}
		if rule == dropStartOnControl {
			control, err := r.controlSince(ctx)
			if err != nil {
				return false, err
			}
			if !control {
				if err := r.merge(ctx); err != nil {
					return false, err
				}
				continue // a control that landed meanwhile is in r.st now
			}
		}
		return drop()
	}
}

// controlSince reports whether another writer's events since the runner
// last read or wrote the journal hold a pause or a cancel (controlAmong).
func (r *runner) controlSince(ctx context.Context) (bool, error) {
	const page = 1000
	for after := r.durableSeq; ; {
		evs, err := r.e.store.EventList(ctx, r.lease.SessionID, after, page)
		if err != nil {
			return false, err
		}
		if controlAmong(evs) {
			return true, nil
		}
		if len(evs) < page {
			return false, nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// releaseLease gives the lease up and waits for the answer whatever
// happens to ctx meanwhile (so does appendBatch's append that releases).
// The lease's renewal (renewLease) may run in the store's batch just
// behind the release: it finds the lease given up, takes that for a loss
// and cancels ctx before the release is answered. A release waiting on
// ctx would then return the context's error while it still commits,
// later: Stop would return with the lease still held.
func (r *runner) releaseLease(ctx context.Context) error {
	return r.e.store.LeaseRelease(context.WithoutCancel(ctx), r.lease)
}

// appendBatch makes the pending events durable in one append, conditional
// on the journal ending where the runner last read or wrote it
// (durableSeq): store.ErrConflict if another writer appended since.
func (r *runner) appendBatch(ctx context.Context, release bool) error {
	p, err := r.b.appendParams(r.durableSeq, &r.lease, release && !r.st.Runnable())
	if err != nil {
		return err
	}
	p.TreeSettle = r.treeSettle()
	r.tickSeq = -1
	appendCtx := ctx
	if p.ReleaseLease {
		// An append that gives the lease up waits for its answer, as
		// releaseLease does, for the same reason.
		appendCtx = context.WithoutCancel(ctx)
	}
	created := false
	if r.pending != nil {
		// The session's first append writes its creation too.
		if created, err = r.createWith(ctx, p); err != nil {
			return err
		}
	}
	if !created {
		if _, err := r.e.store.EventAppend(appendCtx, p); err != nil {
			return err
		}
	}
	r.treeSettled(p.TreeSettle)
	r.durableSeq = r.st.Session.LastEventSeq
	r.b = r.e.newBatch(ctx, r.st, r.e.cfg.NodeID)
	r.released = p.ReleaseLease
	return nil
}

// errStaleBatch reports that the runner's unsaved events no longer apply to
// the journal after a concurrent API write. Dropping them is safe: an
// effect is always durable as started before it runs, so whatever the
// dropped events recorded is recovered by the effect rules.
var errStaleBatch = errors.New("unsaved events conflict with a newer write")

// maxStaleRestarts bounds how often one claim starts over after a conflict.
const maxStaleRestarts = 10

// merge reloads the session after a concurrent API write and re-applies the
// pending events on top of it.
func (r *runner) merge(ctx context.Context) error {
	row, st, err := r.e.loadState(ctx, r.lease.SessionID)
	if err != nil {
		return err
	}
	foreign, err := r.e.store.EventList(ctx, r.lease.SessionID, r.durableSeq, int(row.LastSeq-r.durableSeq))
	if err != nil {
		return err
	}
	old := r.b
	if !old.empty() && pausedAmong(foreign) {
		// The API paused the session (it looked parked) while this runner
		// built on it: what it has not saved must not run. It starts over
		// from the journal, and parks.
		return fmt.Errorf("%w: the session was paused", errStaleBatch)
	}
	// In the journal the other writer's events come before the runner's
	// unsaved ones, which it has already read in: what it derives is
	// derived again, in the journal's order (resume.go), unless that means
	// the whole journal (a policy on past effects).
	rederive := len(foreign) > 0 && !old.empty() && r.h == nil
	// The unsaved events move past the other writer's: what the monitor
	// holds of them (and the findings it made of them) follows.
	base, shift := r.durableSeq, row.LastSeq-r.durableSeq
	if old.empty() {
		shift = 0
	}
	if shift != 0 {
		r.mon.Renumber(base, shift)
		for i := range r.monFound {
			monitor.RenumberEvidence(&r.monFound[i].MonitorFindingData, base, shift)
		}
	}
	if !rederive {
		for _, ev := range foreign {
			// Moved to a blob, a payload (a long turn input) reads back
			// as its stub: the transcript needs the payload.
			w, err := r.e.resolveBlob(ctx, wireEvent(ev), r.h != nil)
			if err != nil {
				return err
			}
			r.observe(w)
		}
		if len(foreign) > 0 && !old.empty() {
			r.snapshotOff = true
		}
	}
	r.st = st
	r.durableSeq = row.LastSeq
	r.b = r.e.newBatch(ctx, st, r.e.cfg.NodeID)
	dropped := map[string]bool{}
	for _, ev := range old.events {
		if shift != 0 {
			if ev.Data, err = renumberFinding(ev, base, shift); err != nil {
				return err
			}
			ev = ev.WithPayload(nil) // its data may be renumbered: decoded
		}
		ev.Seq = st.Session.LastEventSeq + 1
		if ev.Type == lt.EventContextCompacted {
			// Its snapshot was of the journal before the events just
			// read in: at its new seq it would not be the journal's.
			if data, sha := withoutSnapshot(ev.Data); sha != "" {
				ev.Data, dropped[sha] = data, true
				ev = ev.WithPayload(nil)
			}
		}
		if err := journal.Apply(st, ev, &r.b.changes); err != nil {
			return fmt.Errorf("%w: %v", errStaleBatch, err)
		}
		r.b.events = append(r.b.events, ev)
	}
	for _, b := range old.blobs {
		if !dropped[b.SHA256] {
			r.b.blobs = append(r.b.blobs, b)
		}
	}
	if rederive {
		if err := r.rederive(ctx, row.LastSeq); err != nil {
			return err
		}
	}
	// The pending events may have ended the session's last turn (idle,
	// failed) while the API queued another: the session is not done.
	if len(st.Turns) > 0 && st.Cancel == nil && st.Session.Status.Terminal() {
		return r.status(lt.SessionRunning, "")
	}
	return nil
}

// run loops until the session waits, ends, or the engine drains.
func (r *runner) run(ctx context.Context) error {
	for {
		if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
			return err
		}
		if r.e.isDraining() {
			if r.pending != nil {
				// Nothing written yet, not even the session: runSession
				// writes it unleased, or gives back the lease its
				// creator wrote it with (createjoin.go).
				return errDrainedUnwritten
			}
			if err := r.flush(ctx, false); err != nil {
				return err
			}
			return r.releaseLease(ctx)
		}
		done, err := r.tick(ctx)
		if errors.Is(err, errControlFirst) {
			continue
		}
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// tick does the next thing the journal says is due, and reports whether the
// runner is done with the session (it waits or has nothing left to do).
func (r *runner) tick(ctx context.Context) (bool, error) {
	r.lookDeferred = false
	first := r.firstRequestOnlyDue()
	r.fromCreation = false
	if r.pending != nil && !first {
		// A look, and whatever follows it, reads a session that must
		// exist: it is written first, alone.
		if err := r.takeCreationAlone(ctx); err != nil {
			return false, err
		}
	}
	if r.onlyCheckpointDue() {
		// No look at the session: a step's checkpoint has no effect
		// outside the journal, and its event waits for the next append,
		// whose conditional append (the model's request) or the next
		// tick's look comes before anything else runs. A pause or
		// cancel that came meanwhile acts there.
		r.tickSeq = -1
	} else if first || r.modelCallOnlyDue() {
		// No look either: the append of the model's request holds only
		// if nothing landed since the runner last read or wrote the
		// journal, and when something did, the runner reads it in and
		// comes back here before the model is called (invoke).
		r.tickSeq, r.lookDeferred = -1, true
	} else if err := r.readControls(ctx); err != nil {
		return false, err
	}
	if err := r.syncTreeMonitor(ctx); err != nil {
		return false, err
	}
	if !r.spawnsLooked {
		// First of all, a child a worker that stopped made before its
		// spawn was recorded: whatever ends the turn next (a cancel, a
		// timeout, a finding, the environment) must reach it.
		r.spawnsLooked = true
		if found, err := r.spawnsMadeBefore(ctx); found || err != nil {
			return false, err
		}
	}
	if !r.treeLooked {
		r.treeLooked = true
		if err := r.releaseStaleHold(ctx); err != nil {
			return false, err
		}
	}
	if len(r.monFound) > 0 {
		return false, r.reportFindings()
	}
	st := r.st
	turn := st.CurrentTurn()
	if r.idleStopDue() {
		return r.stopIdle(ctx)
	}
	if r.envForStop {
		// Not stopped after all (an API write made the session
		// runnable): the environment this claim works in holds a slot.
		r.envForStop = false
		r.env.close()
		r.env, r.envErr, r.envDeferred = nil, nil, true
	}
	if ids := st.OrphanedChildren(); len(ids) > 0 {
		return false, r.cancelOrphans(ctx, ids)
	}
	if st.Cancel != nil && turn != nil && !st.CancelHeld() {
		return false, r.cancelTurns()
	}
	if turn == nil {
		if st.ReportDue != nil && st.Session.ParentID != nil {
			return false, r.reportToParent(ctx)
		}
		return r.park(ctx)
	}
	if st.Pause != nil {
		return r.pause(ctx) // nothing runs while paused, not even a recovery
	}
	if st.HoldDue() {
		// A monitor's pause not carried down to the sub-agents yet:
		// before anything else, the environment included (a session
		// waiting for its runner would park on that and stay runnable
		// for the walk, claimed again and again).
		return false, r.holdSubagents(ctx, monitorHold(st)) // then parks, at a later tick
	}
	if r.envDeferred {
		r.envDeferred = false
		r.openEnvironment(ctx)
	}
	if r.envErr != nil {
		err := r.envErr
		r.envErr = nil
		if store.IsStorageFull(err) {
			// A full disk is no fault of the environment: the session
			// waits for space (see runSession).
			return false, fmt.Errorf("set up the environment: %w", err)
		}
		var elsewhere *environment.ElsewhereError
		if errors.As(err, &elsewhere) {
			// Nothing ran: another node holds the runner's connection.
			return r.handOver(ctx, elsewhere)
		}
		if r.waitsForRunner(err) {
			// Nothing ran: the session waits for a runner (envconnection.go).
			if pendingOfType(st.Pending, lt.ActionEnvironmentConnection) != nil {
				return false, nil
			}
			return false, r.askEnvironment(ctx, err)
		}
		// A turn queued after this one tries again: it runs in an
		// environment or fails as this one does, never in none.
		r.envDeferred = true
		return false, r.failTurn(lt.StopSandboxError, "the session's environment could not be set up: "+err.Error())
	}
	if a := pendingOfType(st.Pending, lt.ActionEnvironmentConnection); a != nil {
		return r.awaitEnvironment(ctx, a)
	}
	if turn.Status == lt.TurnQueued {
		if err := r.add(lt.EventTurnStarted, turn.ID, 0, lt.TurnStartedData{TurnID: turn.ID, Deadline: r.newTurnDeadline()}); err != nil {
			return false, err
		}
	}
	if r.envRunner != "" && (r.envRunner != st.EnvironmentRunner || r.envRunnerKey != st.EnvironmentRunnerKey) {
		// Pinned from now on: later claims, on any node, open it there.
		step := 0
		if st.Step != nil {
			step = st.Step.N
		}
		return false, r.add(lt.EventEnvironmentOpened, turn.ID, step, lt.EnvironmentOpenedData{Runner: r.envRunner, RunnerKeyID: r.envRunnerKey, Provisioned: r.provisioned})
	}
	waiting := st.Wait != nil && !st.Wait.Ready(r.e.clock.Now())
	if len(st.Pending) == 0 && !waiting && st.Session.Status != lt.SessionRunning {
		if err := r.status(lt.SessionRunning, ""); err != nil {
			return false, err
		}
	}
	if step := st.Step; step != nil {
		// A call still "started" was running when its worker died.
		for i := range step.Calls {
			if c := &step.Calls[i]; c.Status == journal.CallStarted {
				return r.recoverCall(ctx, c)
			}
		}
	}
	if n, err := expireActions(r.add, st, r.e.clock.Now()); n > 0 || err != nil {
		return false, err
	}
	if len(st.Pending) > 0 {
		if err := r.status(lt.SessionRequiresAction, ""); err != nil {
			return false, err
		}
		return r.park(ctx)
	}
	if st.Wait != nil {
		if waiting {
			if cause := r.interruptDue(); cause != nil {
				// A deadline (a wake time of the parked row) came
				// before the wait was over.
				return false, r.waitInterrupted(ctx, cause)
			}
			// Park until the wake time or the signal: a row, no worker.
			if err := r.status(lt.SessionWaiting, ""); err != nil {
				return false, err
			}
			return r.park(ctx)
		}
		return false, r.endWait(ctx)
	}
	if st.EnvironmentStopped {
		// Stopped while the session was parked: back before anything
		// runs in it (idlestop.go).
		return false, r.recreateEnvironment(ctx)
	}
	if r.periodicReviewDue() {
		return false, r.reviewPeriodic(ctx) // the model monitor's, before the step's calls run
	}
	if step := st.Step; step != nil && !step.Done() {
		for i := range step.Calls {
			if c := &step.Calls[i]; c.Status == journal.CallRequested {
				return false, r.execCall(ctx, c)
			}
		}
		return false, fmt.Errorf("step %d has unfinished calls but none to run", step.N)
	}
	if step := st.Step; step != nil && len(step.Calls) > 0 && st.CheckpointStep != step.N {
		// Every step ends with a checkpoint: its journal position and the
		// workspace as the step left it.
		_, err := r.checkpoint(ctx, lt.CheckpointStep, fmt.Sprintf("step %d", step.N), "", "", step.TurnID, step.N)
		return false, err
	}
	if step := st.Step; step != nil {
		if answer, final := finalAnswer(step); final {
			// A person's message (or a cancel) may have come while
			// the model answered: the model reads it before the turn
			// may end. When this tick's look at the session saw no
			// other writer, that look is the check, and the answer is
			// made durable with the end of the turn (endTurn), whose
			// append fails if anything landed since. Otherwise (and
			// before a verification, which reads the delivered files
			// from the store) the answer is made durable first and the
			// session read again, and the end of the turn is still
			// endTurn's: a cancel that lands after that read was
			// answered while the turn ran, and ends it cancelled, as
			// on the fold path (merged, the end would follow the
			// cancel and the turn complete).
			fold := r.tickSeq >= 0 && r.tickSeq <= r.durableSeq && !r.needsVerification(step)
			if !fold {
				if err := r.readSteers(ctx, true); err != nil {
					return false, err
				}
			}
			if r.st.Cancel != nil && !r.st.CancelHeld() {
				return false, nil // read in with it: the next tick cancels the turns
			}
			if r.st.Pause != nil {
				return false, nil // read in with it: the next tick pauses, as on the fold path
			}
			if r.st.Steer.Undelivered() {
				return false, r.callModel(ctx)
			}
			if r.needsVerification(step) {
				return false, r.verify(ctx, step, answer)
			}
			var verdict *lt.AcceptanceVerdict
			if v := st.Verification; v != nil && v.Step == step.N {
				verdict = v.Verdict
				if sendsBack(verdict, maxVerifyAttempts(&r.spec)) {
					return false, r.callModel(ctx) // back to work on the unmet criteria
				}
			}
			return r.endTurn(ctx, answer, verdict)
		}
	}
	return false, r.callModel(ctx)
}

// onlyCheckpointDue reports whether, as far as the runner knows, all this
// tick has to do is the checkpoint that ends the current step: its calls
// are done, and nothing waits, pauses or cancels. Were there a write it
// has not read, the tick takes that checkpoint all the same: it changes
// nothing outside the journal, and what the write asks for (a pause, a
// cancel, a steer) is read at the next tick's look, before anything else
// runs.
func (r *runner) onlyCheckpointDue() bool {
	st := r.st
	step := st.Step
	return step != nil && len(step.Calls) > 0 && step.Done() && st.CheckpointStep != step.N &&
		st.CurrentTurn() != nil && st.Pause == nil && st.Cancel == nil && st.Wait == nil && len(st.Pending) == 0 &&
		len(st.OrphanedChildren()) == 0 && !st.EnvironmentStopped && !r.envDeferred && r.envErr == nil && !r.envForStop
}

// modelCallOnlyDue reports whether, as far as the runner knows, all this
// tick has to do is the model call of the next step: the last step's calls
// are done and checkpointed, and nothing waits, pauses, cancels, reviews,
// reports or stops, in a session of no tree. A tree's sessions keep the
// look. Without it a root whose request lost to its children's
// subagent.completed events read them in and stopped on its own token
// limit, counting the children's usage, before the tree's ledger could
// refuse the reservation (TestTreeBudgetParallelChildrenTokens, which
// expects the tree's label, failed so; nothing overspent). And a dropped
// request's next attempt reserves the same ledger id, whose release
// could then ride the next append and free the new reservation: to be
// settled before trees go without the look. Were there a write it has not
// read, the model's request fails to append and the runner reads it in
// and decides again before it calls the model (invoke).
func (r *runner) modelCallOnlyDue() bool {
	st := r.st
	step := st.Step
	return step != nil && len(step.Calls) > 0 && step.Done() && st.CheckpointStep == step.N &&
		st.CurrentTurn() != nil && st.CurrentTurn().Status != lt.TurnQueued && st.Session.Status == lt.SessionRunning &&
		st.Pause == nil && st.Cancel == nil && st.Wait == nil && len(st.Pending) == 0 &&
		len(st.OrphanedChildren()) == 0 && !st.EnvironmentStopped && !r.envDeferred && r.envErr == nil && !r.envForStop &&
		(r.envRunner == "" || (r.envRunner == st.EnvironmentRunner && r.envRunnerKey == st.EnvironmentRunnerKey)) &&
		len(r.monFound) == 0 && !r.idleStopDue() && !r.periodicReviewDue() && !inTree(st)
}

// firstRequestOnlyDue reports whether this is the first tick of a runner
// that starts from its session's creation (newRunnerFrom), and all it has
// to do is start the queued turn and make its first model call: nothing
// waits, pauses, cancels, reviews, reports or stops, the environment is
// open here, in a session of no tree and no MCP server (whose first listing
// starts its servers before the request: after a pause that landed
// meanwhile, they would start in a paused session), see modelCallOnlyDue.
// The look it would take reads the seq the creation just wrote unless an
// API write came since; the append of the turn's start with the model's
// request is the check, as for the next step's call, and a write that came
// since sends the runner back to its tick (requestDurable), where the
// turn's start is durable and the write acted on before the model is
// called. A write the claim's watch already heard takes the look.
func (r *runner) firstRequestOnlyDue() bool {
	st := r.st
	turn := st.CurrentTurn()
	return r.fromCreation && turn != nil && turn.Status == lt.TurnQueued && st.Step == nil &&
		st.Pause == nil && st.Cancel == nil && st.Wait == nil && len(st.Pending) == 0 && st.ReportDue == nil &&
		len(st.OrphanedChildren()) == 0 && !st.EnvironmentStopped && !r.envDeferred && r.envErr == nil && !r.envForStop &&
		r.envRunner == "" && len(mcpSpecs(&r.spec)) == 0 && len(r.monFound) == 0 && !r.idleStopDue() && !r.periodicReviewDue() && !inTree(st) &&
		r.claim != nil && r.claim.latest() <= r.durableSeq
}

// recoverCall settles a call whose worker died while it ran (DESIGN.md
// principle 3): read and idempotent calls run again with the same key (a
// built-in here, an MCP tool's by its server); an
// irreversible one is settled by its tool's reconcile probe when it has
// one (reconcile.go), else it is in doubt until a decision.
func (r *runner) recoverCall(ctx context.Context, c *journal.Call) (bool, error) {
	if c.Class != lt.EffectIrreversible {
		// The call may resume on another node than the one that started
		// it: its workspace comes back from the last snapshot first.
		if lost, err := r.workspaceLost(ctx); lost || err != nil {
			if err != nil {
				return false, err
			}
			return false, r.restoreWorkspace(ctx) // the next tick runs the call again
		}
		if c.Kind == lt.CallMCP {
			// By its server, started again for this worker if need be.
			return false, r.runMCP(ctx, c)
		}
		return false, r.runBuiltin(ctx, c)
	}
	// The next tick sees the settled call, or the pending action.
	reason := unknownReason(c)
	if why, ok := r.lostCalls[c.ID]; ok {
		reason = why
	}
	return false, r.settleUnknown(ctx, c, reason)
}

// unknownReason says why a started irreversible call's outcome is
// unknown: its MCP server went away mid-call (mcp.server_lost), or else
// the worker running it stopped.
func unknownReason(c *journal.Call) string {
	if c.LostServer != "" {
		return fmt.Sprintf("the MCP server %q went away during the call, before it answered (%s)", c.LostServer, c.LostError)
	}
	return reasonWorkerStopped
}

// park makes everything durable and gives the lease back, unless an API
// write merged meanwhile made the session runnable again. It reports whether
// the runner is done.
func (r *runner) park(ctx context.Context) (bool, error) {
	if err := r.flush(ctx, true); err != nil {
		return false, err
	}
	return r.released, nil
}

// finalAnswer returns the turn's answer when step ends it: a successful
// finish call, or a response without tool calls.
func finalAnswer(step *journal.Step) (string, bool) {
	if summary, ok := finishSummary(step); ok {
		return summary, true
	}
	if len(step.Calls) == 0 {
		return step.Text, true
	}
	return "", false
}

func (r *runner) completeTurn(ctx context.Context, output string, verdict *lt.AcceptanceVerdict) error {
	turn := r.st.CurrentTurn()
	turnID, index := turn.ID, turn.Index
	if len(r.st.Turns) > 1 {
		// A follow-up turn is queued, so the checkpoint below would
		// restore a lost workspace for it, after turn.completed: its
		// environment.lost would be filed under the next turn, and made
		// durable (checkRestored) with the end of this one but without
		// its checkpoint. Restored first, while this turn is current.
		if err := r.ensureWorkspace(ctx); err != nil {
			return err
		}
	}
	if err := r.add(lt.EventTurnCompleted, turn.ID, 0, lt.TurnCompletedData{TurnID: turn.ID, Output: output, Acceptance: verdict}); err != nil {
		return err
	}
	if _, err := r.checkpoint(ctx, lt.CheckpointTurn, fmt.Sprintf("turn %d", index), clip(output, 500), "", turnID, 0); err != nil {
		return err
	}
	if len(r.st.Turns) > 0 {
		return nil // a follow-up turn is queued: the next tick starts it
	}
	return r.status(lt.SessionIdle, "")
}

func (r *runner) failTurn(stopReason, msg string) error {
	turn := r.st.CurrentTurn()
	if err := answerUnrun(r.add, r.st, turn.ID, msg, "", r.mcpServerOf); err != nil {
		return err
	}
	if err := r.add(lt.EventTurnFailed, turn.ID, 0, lt.TurnFailedData{TurnID: turn.ID, StopReason: stopReason, Error: msg}); err != nil {
		return err
	}
	if len(r.st.Turns) > 0 {
		return nil
	}
	return r.status(lt.SessionFailed, stopReason)
}

func (r *runner) cancelTurns() error {
	reason := r.st.Cancel.Reason
	if len(r.st.Turns) > 0 {
		if err := answerUnrun(r.add, r.st, r.st.Turns[0].ID, cancelCause(r.st.Cancel).msg, interruptCancel, r.mcpServerOf); err != nil {
			return err
		}
	}
	for len(r.st.Turns) > 0 {
		t := r.st.Turns[0]
		if err := r.add(lt.EventTurnCancelled, t.ID, 0, lt.TurnCancelledData{TurnID: t.ID, Reason: reason}); err != nil {
			return err
		}
	}
	return r.status(lt.SessionCancelled, lt.StopCancelled)
}

// answerUnrun journals, through add, each call of st's current step, in
// turn turnID, that was asked for and not started, as failed, not run, and
// why: its turn ends first (a cancel, a budget, a timeout, a person's
// stop). The journal then says what became of every call the model asked
// for, and the context of a later turn answers each of them (a provider
// refuses a context with a call left unanswered). A started call has its
// own outcome (interrupted, or in doubt), and one awaiting an action has
// its action cancelled with the turn (journal.voidTurn); a durable wait
// that had begun is journaled as cut, not refused; the transcript
// answers the latter in each context it sends (leftAnswers). An MCP call's
// server is the one its request named, or, for a call of a state written
// before calls kept it, server's answer (nil: not known here).
func answerUnrun(add func(typ, turnID string, step int, data any) error, st *journal.State, turnID, why string, interrupted interruptKind, server func(*journal.Call) string) error {
	step := st.Step
	if step == nil || step.TurnID != turnID {
		return nil
	}
	for i := range step.Calls {
		c := &step.Calls[i] // add applies the event to it in place
		if c.Status != journal.CallRequested {
			continue
		}
		d := lt.ToolFailedData{
			Step: step.N, Index: c.Index, CallID: c.ID, Tool: c.Tool, Refused: lt.RefusedTurnEnded,
			Error: "not run: " + why, Attempt: c.Attempts, Interrupted: string(interrupted),
		}
		switch w := st.Wait; {
		case w != nil && w.CallID == c.ID && w.Kind != lt.WaitSubagentSlot:
			// A durable wait that had begun (it stays requested while it
			// waits): cut, as waitInterrupted cuts one, not refused.
			d.Refused, d.Error = "", "interrupted: "+why
		case c.Attempts > 0:
			// It ran before: a transient failure left it to run again,
			// or a person decided it did not happen. An effect still
			// open is closed with this outcome.
			d.Error = "not run again: " + why
			if e, _ := st.OpenEffect(c.EffectID); c.EffectID != "" && e != nil {
				d.EffectID = c.EffectID
			}
		}
		if d.Server = c.Server; d.Server == "" && server != nil {
			d.Server = server(c) // a state written before calls kept their server
		}
		if err := add(lt.EventToolFailed, turnID, step.N, d); err != nil {
			return err
		}
	}
	return nil
}

// failInternal ends the current turn of a session whose run hit an
// unexpected error, so it does not loop forever; if even that fails, the
// lease is released and the session is retried later.
func (e *Engine) failInternal(ctx context.Context, l store.Lease, cause error) {
	e.failTurnOf(ctx, l, lt.StopInternal, "internal error: "+cause.Error())
}

// endWithoutRunner ends the current turn of session id, which no runner
// can be made of, and does without one what would keep it runnable after
// (every claim would fail again at once): it asks the sub-agents of the
// turns it ended to stop, and tells its parent, as a runner would.
func (e *Engine) endWithoutRunner(ctx context.Context, id, stopReason, msg string) error {
	st, err := mutate(ctx, e, id, func(b *batch) (*journal.State, error) {
		if b.st.CurrentTurn() != nil {
			// A child a worker made before its spawn was recorded runs
			// all the same: recorded first, as failTurnOf's runner
			// records it, so the turn's end reaches it below rather
			// than leaving it to spend the tree's budget in the shared
			// workspace with no journal naming it.
			if _, err := e.spawnsMadeBefore(ctx, b.st, b.add); err != nil {
				return nil, err
			}
		}
		if err := endTurn(b, stopReason, msg); err != nil {
			return nil, err
		}
		if ids := b.st.OrphanedChildren(); len(ids) > 0 {
			if err := e.cancelOrphans(ctx, b.st, ids, b.add); err != nil {
				return nil, err
			}
		}
		return b.st, nil
	})
	if err != nil || st.ReportDue == nil || st.Session.ParentID == nil || len(st.Turns) > 0 {
		return err
	}
	d, err := e.reportToParent(ctx, st)
	if err != nil {
		return err
	}
	_, err = mutate(ctx, e, id, func(b *batch) (struct{}, error) {
		if b.st.ReportDue == nil {
			return struct{}{}, nil
		}
		return struct{}{}, b.add(lt.EventSubagentReported, "", 0, d)
	})
	return err
}

// failTurnOf ends the current turn of the session l leases with
// stopReason and msg, out of its run, and releases the lease.
func (e *Engine) failTurnOf(ctx context.Context, l store.Lease, stopReason, msg string) {
	r, err := e.newRunner(ctx, l)
	if err == nil {
		defer r.env.close()
	} else {
		// No runner can be made of the session (what it is made of is
		// refused: its stored spec, its policies): the turn is ended
		// without one, else the released session would be claimed and
		// fail again at once, for ever.
		e.log.Error("end the turn of a session no runner can be made of", "session", l.SessionID, "err", err)
		if err := e.endWithoutRunner(ctx, l.SessionID, stopReason, msg); err != nil {
			e.log.Error("fail turn after internal error", "session", l.SessionID, "err", err)
		}
	}
	if err == nil && r.st.CurrentTurn() != nil {
		if _, err = r.spawnsMadeBefore(ctx); err == nil { // reached by the turn's end too
			err = r.failTurn(stopReason, msg)
		}
		if err == nil {
			err = r.flush(ctx, false)
		}
		if err != nil {
			e.log.Error("fail turn after internal error", "session", l.SessionID, "err", err)
		}
	}
	if err := e.store.LeaseRelease(ctx, l); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		e.log.Error("release lease", "session", l.SessionID, "err", err)
	}
}
