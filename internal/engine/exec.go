package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// execCall runs one requested call of the current step. It dispatches once
// on the call's kind: the kind its tool's catalog entry had when the call
// was requested (requestCall), journaled, so a call resumed after a crash
// runs as it was requested; the runners of built-in and MCP calls look the
// tool up in the catalog again.
// Before it runs: the turn timeout, loop detection and the budget, then the
// policies (or, for an approved call, the binding to what was approved).
func (r *runner) execCall(ctx context.Context, c *journal.Call) error {
	if left, ok := r.turnTimeLeft(); ok && left <= 0 {
		_, err := r.checkStop()
		return err
	}
	if c.Kind == lt.CallBuiltin || c.Kind == lt.CallFunction || c.Kind == lt.CallMCP {
		if ok, err := r.checkLoop(c); !ok || err != nil {
			return err
		}
		if ok, err := r.checkBudget(true); !ok || err != nil {
			return err
		}
		if ok, err := r.reserveToolCall(ctx, c); !ok || err != nil {
			return err
		}
		if ok, err := r.evaluatePolicy(ctx, c); !ok || err != nil {
			return err
		}
		// The arguments are final: the model monitor reviews them last.
		if ok, err := r.reviewBefore(ctx, c); !ok || err != nil {
			return err
		}
	}
	switch c.Kind {
	case lt.CallBuiltin, lt.CallMCP, lt.CallFinish, lt.CallCheckpoint:
		if lost, err := r.workspaceLost(ctx); lost || err != nil {
			if err != nil {
				return err
			}
			return r.restoreWorkspace(ctx) // the next tick runs the call
		}
	}
	switch c.Kind {
	case lt.CallBuiltin:
		if ok, err := r.checkBrowserSite(c); !ok || err != nil {
			return err
		}
		return r.runBuiltin(ctx, c)
	case lt.CallMCP:
		// Run (and, after a crash, re-run) like a built-in, by its server.
		return r.runMCP(ctx, c)
	case lt.CallFunction:
		return r.askFunction(c)
	case lt.CallFinish:
		return r.runFinish(ctx, c)
	case lt.CallHuman:
		return r.askHuman(c)
	case lt.CallCheckpoint:
		return r.runCheckpoint(ctx, c)
	case lt.CallWait:
		if c.Tool == waitAgentsTool {
			return r.startWaitAgents(c)
		}
		return r.startWait(c)
	case lt.CallSpawn:
		return r.runSpawn(ctx, c)
	default:
		return fmt.Errorf("call %s of kind %q cannot run", c.ID, c.Kind)
	}
}

// startDurably makes a call's start (its tool.started, added after the
// batch's marks events and blobs) durable before the call runs: the ledger
// must hold the effect before the world can see it. It holds only on the
// journal the runner read: a cancel or a pause answered since comes first
// (appendOrDrop), so the start is dropped unsaved and the tick decides
// again; merged, the call would run after the pause or the cancel
// was answered, and once durable a start cannot be taken back (an
// irreversible call started and not run would be in doubt). It reports
// whether the call may run.
func (r *runner) startDurably(ctx context.Context, events, blobs int) (bool, error) {
	return r.appendOrDrop(ctx, events, blobs, false, dropStartOnControl)
}

// runBuiltin puts the effect in the ledger (durably, unless the tool only
// reads), runs the tool in the workspace, and records the outcome.
func (r *runner) runBuiltin(ctx context.Context, c *journal.Call) error {
	t, ok := r.tools.builtin(c.Tool)
	if !ok {
		return fmt.Errorf("built-in tool %q is not registered", c.Tool)
	}
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	sid := r.st.Session.ID
	eff, key := effectID(c, sid, turnID, step), idempotencyKey(sid, turnID, step, c.Index)
	events, blobs := len(r.b.events), len(r.b.blobs)
	if err := r.add(lt.EventToolStarted, turnID, step, lt.ToolStartedData{
		Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, EffectID: eff, IdempotencyKey: key, Class: c.Class, Attempt: c.Attempts + 1,
	}); err != nil {
		return err
	}
	if c.Class != lt.EffectRead {
		if started, err := r.startDurably(ctx, events, blobs); !started || err != nil {
			return err
		}
	}
	// The turn's timeout and the wall-clock budget are not folded into the
	// tool's own timeout: they interrupt the call (callContext), which an
	// irreversible call must know to be left in doubt.
	start := r.e.clock.Now()
	call := &tool.Call{
		SessionID: sid, Workspace: r.ws, Arguments: c.Arguments, IdempotencyKey: key, Timeout: r.tools.timeout(c.Tool), Effect: c.Class,
	}
	r.env.attach(call, true)
	call.SaveArtifact = r.saveArtifact(c)
	blocked := r.gateBrowser(c, call)
	callCtx, release := r.callContext(ctx, true)
	res, runErr := r.runTool(callCtx, t, call)
	release()
	if ctx.Err() != nil {
		// Lease lost or hard stop: the outcome is unknown, and the ledger
		// says so (started). Whoever resumes decides by the effect class.
		return context.Cause(ctx)
	}
	dur := r.e.clock.Now().Sub(start).Milliseconds()
	if err := r.journalNetwork(c); err != nil {
		return err
	}
	if asked, err := r.askBlockedSite(c, blocked()); asked || err != nil {
		return err
	}
	switch {
	case errors.Is(runErr, environment.ErrLost):
		return r.environmentLost(ctx, c, runErr)
	case errors.Is(runErr, environment.ErrUnavailable) && r.waitsForRunner(runErr) && c.Class != lt.EffectIrreversible:
		// Nothing ran, and the environment lives on a runner that went
		// away: the call stays started and the runner starts over, whose
		// open parks the session until a runner connects
		// (environment_connection); then the call runs, with its key.
		return r.environmentLost(ctx, c, runErr)
	case errors.Is(runErr, environment.ErrUnavailable):
		// Nothing ran: the call fails as a transient failure, retried by
		// its class like any other, and the model is told why. An
		// irreversible call on a runner is not left started (that would
		// put it in doubt): it fails, and the runner starts over so that
		// the session waits for a runner before its next step.
		res = &tool.Result{Error: "the session's environment cannot be reached (nothing ran): " + runErr.Error(), Transient: true}
		if r.waitsForRunner(runErr) {
			if err := r.toolFailed(ctx, c, eff, res, nil, dur); err != nil {
				return err
			}
			if err := r.flush(ctx, false); err != nil {
				return err
			}
			return fmt.Errorf("%w: call %s: %w", errEnvironmentLost, c.ID, runErr)
		}
	case runErr != nil:
		res = &tool.Result{Error: runErr.Error()}
	}
	var out json.RawMessage
	if res.Output != nil {
		raw, err := json.Marshal(res.Output)
		if err != nil {
			return fmt.Errorf("encode %s output: %w", c.Tool, err)
		}
		out = raw
	}
	if res.Error != "" {
		if cause := interruption(ctx, callCtx); cause != nil {
			return r.toolInterrupted(ctx, c, cause, res, out, dur)
		}
		return r.toolFailed(ctx, c, eff, res, out, dur)
	}
	if out == nil {
		out = json.RawMessage("null")
	}
	return r.add(lt.EventToolCompleted, turnID, step, lt.ToolCompletedData{
		Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, EffectID: eff, Output: out, DurationMS: dur,
	})
}

// runTool runs built-in t. What the call's Environment does (its files,
// its programs) the Environment tells the snapshot record itself; a tool
// that may change the workspace otherwise (a plain subprocess, a tool
// that opens the workspace itself) makes the next checkpoint walk it
// (snapshotwrites.go).
func (r *runner) runTool(ctx context.Context, t tool.Tool, call *tool.Call) (*tool.Result, error) {
	end, err := r.workspaceFor(t, call)
	if err != nil {
		return nil, err
	}
	defer end()
	return t.Run(ctx, call)
}

// workspaceFor readies the workspace for a call of built-in t (its run,
// its replay or its reconcile probe), and returns what to do once the call
// is over. A tool that never touches the workspace gets no path. One that
// may reach it behind the Environment's back first has the copy's list
// written out (what an unshared session kept in memory only, which stands
// for a copy nothing wrote to since its empty snapshot:
// workspace.Manager.RecordEmptySnapshot), and makes the next checkpoint
// walk the workspace. The Environment's own calls see to both themselves.
func (r *runner) workspaceFor(t tool.Tool, call *tool.Call) (end func(), err error) {
	switch {
	case tool.IsWorkspaceFree(t):
		call.Workspace = ""
		return func() {}, nil
	case inEnvironment(t, call):
		return func() {}, nil
	}
	if err := r.e.spaces.WriteOut(r.st.WorkspaceID()); err != nil {
		return nil, err
	}
	return r.e.snapshots.BeginUnknownWrites(r.ws), nil
}

// inEnvironment reports whether built-in t reaches the workspace only
// through the call's Environment: the file tools through call.Files, the
// shell through call.Exec.
func inEnvironment(t tool.Tool, call *tool.Call) bool {
	switch t.(type) {
	case *tool.ReadFile, *tool.ListFiles, *tool.WriteFile, *tool.EditFile:
		return call.Files != nil
	case *tool.Shell:
		return call.Exec != nil
	case *tool.SQLiteQuery:
		return call.SQLite != nil // it only reads
	}
	return false
}

// maxEnvironmentLosses bounds how often one claim starts over after its
// environment went away mid-call.
const maxEnvironmentLosses = 3

// errEnvironmentLost ends a runner whose Environment went away mid-call
// (environment.ErrLost): the session's runner starts over from the
// journal with the environment opened again, as after a crash.
var errEnvironmentLost = errors.New("the session's environment went away during a call")

// envLost marks err errEnvironmentLost when it says the environment went
// away or cannot be reached (a runner's connection broke), so the runner
// starts over with the environment opened again; else it returns err.
func envLost(err error) error {
	if errors.Is(err, environment.ErrLost) || errors.Is(err, environment.ErrUnavailable) {
		return fmt.Errorf("%w: %w", errEnvironmentLost, err)
	}
	return err
}

// environmentLost handles a call whose environment went away while it ran
// (environment.ErrLost): its outcome is unknown, exactly as when the
// worker running it dies after tool.started. A read or idempotent call
// stays started and runs again, with its key, once the runner has started
// over with the environment opened again (recoverCall). An irreversible
// one without a reconcile probe goes in doubt now, saying why; one with a
// probe stays started too and is probed by recoverCall (lostCalls says
// why): the probe waits for the environment opened again, since the lost
// one may still be running the attempt (a partitioned runner notices only
// at its heartbeat timeout) and a probe there could see it half done.
func (r *runner) environmentLost(ctx context.Context, c *journal.Call, cause error) error {
	r.e.log.Warn("the session's environment went away during a call", "session", r.st.Session.ID, "call", c.ID, "err", cause)
	if c.Class == lt.EffectIrreversible {
		why := "the session's environment went away during the call, before it answered (" + clip(cause.Error(), 300) + ")"
		if !r.hasReconcileProbe(c) {
			if err := r.settleUnknown(ctx, c, why); err != nil {
				return err
			}
		} else {
			if r.lostCalls == nil {
				r.lostCalls = map[string]string{}
			}
			r.lostCalls[c.ID] = why
		}
	}
	if err := r.flush(ctx, false); err != nil {
		return err
	}
	return fmt.Errorf("%w: call %s: %w", errEnvironmentLost, c.ID, cause)
}

// toolFailed records a failed attempt. A transient failure of a call that
// may be re-run is retried with backoff (every attempt journaled) until the
// agent's maximum, then the turn stops with retries_exhausted; any other
// failure goes back to the model as the tool's error.
func (r *runner) toolFailed(ctx context.Context, c *journal.Call, eff string, res *tool.Result, out json.RawMessage, dur int64) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	attempt := c.Attempts
	failed := lt.ToolFailedData{
		Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Server: r.mcpServerOf(c), EffectID: eff, Error: res.Error, Output: out, DurationMS: dur, Attempt: attempt,
	}
	if !retryable(c.Class, res.Transient) {
		return r.add(lt.EventToolFailed, turnID, step, failed)
	}
	if attempt >= r.maxAttempts() {
		if err := r.add(lt.EventToolFailed, turnID, step, failed); err != nil {
			return err
		}
		return r.failTurn(lt.StopRetriesExhausted, fmt.Sprintf("%s failed %d times; last: %s", c.Tool, attempt, res.Error))
	}
	wait := r.backoff(attempt, res.RetryAfter, fmt.Sprintf("tool/%d/%d", step, c.Index))
	failed.Retry, failed.RetryInMS = true, wait.Milliseconds()
	if err := r.add(lt.EventToolFailed, turnID, step, failed); err != nil {
		return err
	}
	return r.backOff(ctx, wait)
}

// askFunction hands an application function tool to the application: the
// effect is in the ledger, and a function_call action waits for its output.
func (r *runner) askFunction(c *journal.Call) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	sid := r.st.Session.ID
	eff, key := effectID(c, sid, turnID, step), idempotencyKey(sid, turnID, step, c.Index)
	if err := r.add(lt.EventToolStarted, turnID, step, lt.ToolStartedData{
		Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, EffectID: eff, IdempotencyKey: key, Class: c.Class, Attempt: 1,
	}); err != nil {
		return err
	}
	a := lt.Action{
		ID: derivedID("act_", sid, turnID, step, c.Index, "function_call"), SessionID: sid, Type: lt.ActionFunctionCall, Status: lt.ActionPending,
		TurnID: turnID, Step: step, CallID: c.ID, Tool: c.Tool, Arguments: c.Arguments, ArgumentsSHA256: c.ArgumentsSHA256,
		EffectID: eff, IdempotencyKey: key, Summary: fmt.Sprintf("Run application function %s with the given arguments and post its output", c.Tool),
		Call:        journal.RawCall(c.Tool, c.Arguments),
		Consequence: consequence(c.Class), CreatedAt: r.e.clock.Now(),
	}
	return r.add(lt.EventActionRequired, turnID, step, lt.ActionRequiredData{Action: a})
}

// Why an irreversible call's outcome is unknown (the in_doubt action's
// reason).
const reasonWorkerStopped = "the worker running this call stopped before its outcome was recorded"

// settleUnknown settles an irreversible call whose outcome is unknown (its
// worker died, or a limit cut it midway): by its tool's reconcile probe
// when it has one (reconcile.go), else as an in_doubt action, saying
// reason. It is never re-run blindly.
func (r *runner) settleUnknown(ctx context.Context, c *journal.Call, reason string, evidence ...string) error {
	settled, probeErr, err := r.reconcile(ctx, c)
	if settled || err != nil {
		return err
	}
	if probeErr != nil {
		evidence = append(evidence, "the tool's reconcile probe could not tell: "+probeErr.Error())
	}
	return r.markInDoubt(c, reason, evidence...)
}

// markInDoubt turns an irreversible call whose outcome is unknown into an
// in_doubt action. It never runs again until a decision says so. evidence
// is added to what the action shows the person deciding (e.g. why the
// tool's reconcile probe could not tell).
func (r *runner) markInDoubt(c *journal.Call, reason string, evidence ...string) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	sid := r.st.Session.ID
	actID := derivedID("act_", sid, turnID, step, c.Index, "in_doubt", c.Attempts)
	if err := r.add(lt.EventEffectInDoubt, turnID, step, lt.EffectInDoubtData{
		Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, EffectID: c.EffectID, ActionID: actID, Reason: reason,
	}); err != nil {
		return err
	}
	a := lt.Action{
		ID: actID, SessionID: sid, Type: lt.ActionInDoubt, Status: lt.ActionPending, TurnID: turnID, Step: step, CallID: c.ID, Tool: c.Tool,
		Arguments: c.Arguments, ArgumentsSHA256: c.ArgumentsSHA256, EffectID: c.EffectID, IdempotencyKey: c.IdempotencyKey,
		Summary:     fmt.Sprintf("Decide whether %s ran: %s", c.Tool, reason),
		Call:        journal.RawCall(c.Tool, c.Arguments),
		Evidence:    append([]string{fmt.Sprintf("attempt %d started; no outcome in the journal", c.Attempts)}, evidence...),
		Consequence: consequence(c.Class) + "; deciding did_not_happen runs it again",
		CreatedAt:   r.e.clock.Now(),
	}
	return r.add(lt.EventActionRequired, turnID, step, lt.ActionRequiredData{Action: a})
}

// consequence is an effect class in words a person weighs (an approval
// says more: evidence.go).
func consequence(c lt.EffectClass) string { return upperFirst(classWords(c)) }

type finishArgs struct {
	Summary   string   `json:"summary"`
	Artifacts []string `json:"artifacts,omitempty"`
}

// runFinish stores the named workspace files as the turn's final artifacts.
// Ids are derived from the call, so a resumed worker re-derives them.
func (r *runner) runFinish(ctx context.Context, c *journal.Call) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	var args finishArgs
	_ = json.Unmarshal(c.Arguments, &args) // validated against finishSchema when requested
	type delivered struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Version int    `json:"version"`
		SHA256  string `json:"sha256"`
		Size    int64  `json:"size"`
	}
	out := struct {
		Summary   string      `json:"summary"`
		Artifacts []delivered `json:"artifacts"`
	}{Summary: args.Summary, Artifacts: []delivered{}}
	if r.env == nil || r.env.env == nil {
		return errors.New("read artifacts: the session's environment is not open")
	}
	for _, p := range args.Artifacts {
		data, err := readArtifact(ctx, r.env.env, p, r.e.cfg.MaxArtifactBytes)
		if lost := envLost(err); lost != err {
			// Nothing was delivered: the finish call runs again once
			// the environment is opened again.
			return fmt.Errorf("artifact %q: %w", p, lost)
		}
		if err != nil {
			return r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{
				Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Error: fmt.Sprintf("artifact %q: %v", p, err),
			})
		}
		name := path.Clean(p)
		version := r.st.ArtifactVersions[name] + 1
		sum := r.b.blob(data)
		a := lt.Artifact{
			ID: derivedID("art_", r.st.Session.ID, name, version), SessionID: r.st.Session.ID, TurnID: turnID,
			Name: name, Version: version, SHA256: sum, Size: int64(len(data)), ContentType: contentType(name, data),
			Final: true, CreatedAt: r.e.clock.Now(),
		}
		if err := r.add(lt.EventArtifactCreated, turnID, step, lt.ArtifactCreatedData{Artifact: a}); err != nil {
			return err
		}
		out.Artifacts = append(out.Artifacts, delivered{a.ID, a.Name, a.Version, a.SHA256, a.Size})
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return r.add(lt.EventToolCompleted, turnID, step, lt.ToolCompletedData{Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Output: raw})
}

// readArtifact reads workspace file p, of at most max bytes, through the
// session's Environment (only max bytes are ever buffered).
func readArtifact(ctx context.Context, env environment.Environment, p string, max int64) ([]byte, error) {
	if p == "" || strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("must be a path relative to the workspace")
	}
	r, err := env.ReadFile(ctx, p, 0, max)
	if err != nil {
		return nil, err
	}
	if r.Size > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return r.Data, nil
}

func contentType(name string, data []byte) string {
	if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
		return ct
	}
	if strings.HasSuffix(name, ".md") {
		return "text/markdown; charset=utf-8"
	}
	return http.DetectContentType(data)
}

func finishSummary(step *journal.Step) (string, bool) {
	for _, c := range step.Calls {
		if c.Kind == lt.CallFinish && !c.Failed {
			var args finishArgs
			if json.Unmarshal(c.Arguments, &args) == nil {
				return args.Summary, true
			}
		}
	}
	return "", false
}
