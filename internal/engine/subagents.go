package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/jsonstrict"
	"github.com/longhaul-dev/longhaul/internal/policy"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Sub-agents (DESIGN.md principle 7). A spawn_agent call creates a child
// session: an ordinary session with a parent, working in its root's
// workspace, with a share of the parent's remaining budget reserved for it.
// Crossing from one session's journal to another's is the delicate part,
// and each crossing is made safe by the journal that starts it:
//
//   - Spawn: the child's id is derived from the spawning call, so a parent
//     that crashes after creating the child and before journaling
//     subagent.spawned creates nothing twice: it finds the child and records
//     it.
//   - Completion: a child whose turn ended keeps State.ReportDue (and stays
//     runnable) until it has appended subagent.completed to its parent and
//     subagent.reported to itself; the parent ignores a report it has.
//   - Cancel: when the parent's spawning turn ends, whatever children still
//     run are orphans (State.OrphanedChildren), which keep the parent
//     runnable until each was asked to stop (subagent.cancel_requested).
//
// So a kill at any moment leaves no child orphaned, duplicated or lost.

const (
	spawnAgentTool = "spawn_agent"
	waitAgentsTool = "wait_agents"
	// Defaults of lt.SubagentLimits.
	defaultMaxParallelSubagents = 6
	defaultMaxSubagentDepth     = 3
)

const spawnAgentSchema = `{"type":"object","properties":{` +
	`"agent":{"type":"string","minLength":1,"description":"The name of a configured agent to run"},` +
	`"agent_spec":{"type":"object","description":"An inline agent definition (model, instructions, tools, ...)"},` +
	`"instructions":{"type":"string","minLength":1,"description":"Run your own model and tools with these instructions instead of yours"},` +
	`"input":{"type":"string","minLength":1,"description":"The task for the sub-agent, complete enough to do without your context"},` +
	`"budget":{"type":"object","description":"Limits for the sub-agent, within what you have left (default: an equal share)","properties":{` +
	`"max_cost_usd":{"type":"number","minimum":0},"max_tokens":{"type":"integer","minimum":0},"max_model_calls":{"type":"integer","minimum":0},` +
	`"max_tool_calls":{"type":"integer","minimum":0},"max_wall_seconds":{"type":"integer","minimum":0}},"additionalProperties":false}` +
	`},"required":["input"],"additionalProperties":false}`

const waitAgentsSchema = `{"type":"object","properties":{` +
	`"ids":{"type":"array","items":{"type":"string","minLength":1},"uniqueItems":true,"description":"The sub-agents to wait for (default: every one this turn spawned)"},` +
	`"mode":{"type":"string","enum":["all","any"],"description":"Wait for all of them (default) or the first to finish"},` +
	`"timeout_seconds":{"type":"number","minimum":0,"maximum":2592000,"description":"Give up waiting after this long (default: no limit)"}` +
	`},"additionalProperties":false}`

type spawnArgs struct {
	Agent        string          `json:"agent"`
	AgentSpec    *lt.AgentSpec   `json:"agent_spec"`
	Instructions string          `json:"instructions"`
	Input        string          `json:"input"`
	Budget       *lt.Budget      `json:"budget"`
	Raw          json.RawMessage `json:"-"`
}

// The types a spawn_agent call's arguments, and the agent_spec in them,
// decode into: what jsonstrict compares their keys with.
var (
	spawnArgsType = reflect.TypeFor[spawnArgs]()
	agentSpecType = reflect.TypeFor[lt.AgentSpec]()
)

// strictSpawnArgs refuses spawn_agent arguments whose agent_spec, written
// by the model, does not read one way, as POST /v1/sessions refuses such a
// body: a key given twice in an object, a field's name in another case
// ("tools" and "Tools": encoding/json would keep the last), an escaped lone
// surrogate or bytes that are not UTF-8 (jsonstrict), and a field an agent
// spec does not have. A log, the web UI or a person reading the call would
// otherwise see another spec than the child gets, and a misspelt field (a
// policy that would not apply) or one hoped to carry something elsewhere (a
// webhook_url, a project) would be dropped. The error names the path
// inside the arguments ("agent_spec.tools[1].name"). The rest of the
// arguments is the schema's (keys compared exactly, no other field) and
// the decoding's, which name a value of the wrong type; so are arguments
// that are not JSON, which the canonical form refuses.
func strictSpawnArgs(arguments json.RawMessage) error {
	if !json.Valid(arguments) {
		return nil
	}
	if err := jsonstrict.CheckUTF8(arguments, "the arguments"); err != nil {
		return jsonstrict.Invalid(err, "read spawn arguments")
	}
	if err := jsonstrict.CheckExact(arguments, spawnArgsType); err != nil {
		// Valid JSON (above): another error than a refusal is the engine's.
		return jsonstrict.Invalid(err, "read spawn arguments")
	}
	var raw struct {
		AgentSpec json.RawMessage `json:"agent_spec"`
	}
	if json.Unmarshal(arguments, &raw) != nil || len(raw.AgentSpec) == 0 || string(raw.AgentSpec) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw.AgentSpec))
	dec.DisallowUnknownFields()
	var spec lt.AgentSpec
	if name, ok := jsonstrict.UnknownFieldName(dec.Decode(&spec)); ok {
		path := "agent_spec." + jsonstrict.UnknownFieldPath(raw.AgentSpec, agentSpecType, name)
		return apierror.Invalid(path, "unknown field %q", path)
	}
	return nil
}

func (r *runner) maxParallelSubagents() int {
	if l := r.spec.Subagents; l != nil && l.MaxParallel > 0 {
		return l.MaxParallel
	}
	return defaultMaxParallelSubagents
}

func (r *runner) maxSubagentDepth() int {
	if l := r.spec.Subagents; l != nil && l.MaxDepth > 0 {
		return l.MaxDepth
	}
	return defaultMaxSubagentDepth
}

// childID is the id of the session a spawn_agent call creates: derived
// from the call, so a resumed worker finds the child the dead one made.
func childID(parentID, turnID string, step, index int) string {
	return derivedID("ses_", parentID, turnID, step, index, "subagent")
}

// runSpawn runs a spawn_agent call: it waits for a free slot, resolves the
// child's agent, reserves its budget share, creates the child session and
// journals subagent.spawned with the call's result. A child a worker made
// before it stopped is recorded by the next runner's first tick
// (spawnsMadeBefore), before the call comes up again.
func (r *runner) runSpawn(ctx context.Context, c *journal.Call) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	sid := r.st.Session.ID
	id := childID(sid, turnID, step, c.Index)
	failCode := func(code, msg string) error {
		return r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Error: msg, Code: code})
	}
	fail := func(msg string) error { return failCode("", msg) }
	if r.st.Depth+1 > r.maxSubagentDepth() {
		return fail(fmt.Sprintf("cannot spawn: this session is a sub-agent at depth %d and the tree may be at most %d deep; do the work yourself", r.st.Depth, r.maxSubagentDepth()))
	}
	if max := r.maxParallelSubagents(); r.st.RunningChildren() >= max {
		// More wait their turn: the call waits, holding no worker, until a
		// child completes.
		return r.add(lt.EventWaitStarted, turnID, step, lt.WaitStartedData{
			Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Kind: lt.WaitSubagentSlot, MaxRunning: max,
		})
	}
	var args spawnArgs
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return fail("invalid arguments: " + err.Error())
	}
	// requestCall held the model's own text to this; a call journaled by
	// an older binary, which did not, is held to it here, before anything
	// is made.
	if err := strictSpawnArgs(c.Arguments); err != nil {
		return fail(toolMessage(err))
	}
	spec, ref, err := r.childSpec(ctx, &args)
	if we := (*wideningError)(nil); errors.As(err, &we) {
		// Coded, so the trajectory monitor (capability_widening) need
		// not read the message.
		return failCode(lt.ToolFailedCapabilityWidening, toolMessage(err))
	}
	if err != nil {
		return fail(toolMessage(err))
	}
	budget, err := r.childBudget(lowerLimits(args.Budget, spec.Budget))
	if err != nil {
		return fail(toolMessage(err))
	}
	// The child's spec says what it got: its own default budget was one
	// more ask, never a way past its share.
	spec.Budget = &budget
	ns := &newSession{
		ID: id, Spec: spec, Ref: ref,
		Created: lt.SessionCreatedData{
			Agent: ref, Input: args.Input, Constraints: slices.Clone(r.st.Session.Constraints), Budget: budget,
			ParentID: sid, Workspace: r.st.WorkspaceID(), Depth: r.st.Depth + 1, Project: r.st.Project(),
			// The root's creator (the parent has it from its own
			// parent): not_creator holds across the tree.
			Actor:    r.st.Session.CreatedBy,
			Metadata: mustJSON(map[string]any{"spawned_by": map[string]any{"session_id": sid, "turn_id": turnID, "call_id": c.ID}}),
		},
	}
	// The child is a session of its own, which runs once it exists: the
	// call is in the parent's journal first, as an effect is in the ledger
	// before the world can see it. The next runner of a worker that stops
	// before the spawn is recorded then finds the child (spawnsMadeBefore),
	// and a cancel or a pause answered meanwhile is read here: the child
	// is not made (after a pause, the call runs once the session resumes).
	if err := r.flush(ctx, false); err != nil {
		return err
	}
	if r.st.Cancel != nil {
		return r.cancelledBeforeRun(c)
	}
	if r.st.Pause != nil {
		return nil // the next tick pauses the session
	}
	if err := r.openTreeLedger(ctx); err != nil {
		return err
	}
	// The flush had nothing to append when the runner wrote nothing since
	// it read the journal (a runner that started over, whose first tick
	// comes to the spawn): it read nothing either. So the child is made
	// only on the parent's journal as this runner knows it, whatever
	// landed since the tick's look (a cancel or a pause answered then
	// comes first), and not by a runner whose lease was taken.
	ns.ParentAt = &store.JournalAt{SessionID: sid, ExpectedSeq: r.durableSeq, Fence: &r.lease}
	_, err = r.e.createSession(ctx, ns)
	row, getErr := r.e.store.SessionGet(ctx, id)
	switch {
	case err == nil, errors.Is(err, store.ErrConflict) && getErr == nil:
		// Made here, or before (its spawn not recorded then): recorded.
	case errors.Is(err, store.ErrParentMoved) && errors.Is(getErr, store.ErrNotFound):
		// The parent's journal moved: read in, and the tick decides
		// again (the call is still to run).
		return r.merge(ctx)
	case err != nil:
		return fmt.Errorf("create sub-agent: %w", err)
	}
	if getErr != nil {
		return fmt.Errorf("read sub-agent %s: %w", id, getErr)
	}
	r.e.kick()
	return recordSpawn(r.st, c, row, r.add)
}

// spawnedBefore records, through add, the spawn of call c of st's current
// step when its child exists already: created by a worker that stopped, or
// lost its append, before the spawn was recorded (the call was durable
// first: runSpawn). The child runs all the same, so it must be among the
// session's children, which a cancel or a turn's end reaches
// (OrphanedChildren). It reports whether it found the child. It needs the
// journal's state and the store only, so a turn ended without a runner
// (endWithoutRunner) finds the child as a runner does.
func (e *Engine) spawnedBefore(ctx context.Context, st *journal.State, c *journal.Call, add func(typ, turnID string, step int, data any) error) (bool, error) {
	id := childID(st.Session.ID, st.Step.TurnID, st.Step.N, c.Index)
	existing, err := e.store.SessionGet(ctx, id)
	switch {
	case err == nil:
		return true, recordSpawn(st, c, existing, add)
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("look for sub-agent %s: %w", id, err)
	}
}

// spawnsMadeBefore records the spawns of the current step whose children
// exist though the journal does not say so (spawnedBefore). A runner that
// starts over from the journal does it first, before anything can end the
// turn, and so does a turn failed out of a run (failTurnOf), with a runner
// or without one (endWithoutRunner). It reads the store only for a spawn
// call not yet run, and reports whether it found a child.
func (e *Engine) spawnsMadeBefore(ctx context.Context, st *journal.State, add func(typ, turnID string, step int, data any) error) (bool, error) {
	step, found := st.Step, false
	if step == nil {
		return false, nil
	}
	for i := range step.Calls {
		c := &step.Calls[i]
		if c.Kind != lt.CallSpawn || c.Status != journal.CallRequested {
			continue
		}
		ok, err := e.spawnedBefore(ctx, st, c, add)
		if err != nil {
			return false, err
		}
		found = found || ok
	}
	return found, nil
}

// spawnsMadeBefore is Engine.spawnsMadeBefore on the runner's state,
// through its add (which folds what it journals into what it derives).
func (r *runner) spawnsMadeBefore(ctx context.Context) (bool, error) {
	return r.e.spawnsMadeBefore(ctx, r.st, r.add)
}

// recordSpawn journals, through add, subagent.spawned and the result of
// call c of st's current step from the child's own row (its budget as it
// was created).
func recordSpawn(st *journal.State, c *journal.Call, row *store.SessionRow, add func(typ, turnID string, step int, data any) error) error {
	step, turnID := st.Step.N, st.Step.TurnID
	var child journal.State
	if err := json.Unmarshal(row.State, &child); err != nil {
		return fmt.Errorf("decode sub-agent %s: %w", row.ID, err)
	}
	if err := add(lt.EventSubagentSpawned, turnID, step, lt.SubagentSpawnedData{
		Step: step, Index: c.Index, CallID: c.ID, ChildID: row.ID, Agent: child.Session.Agent,
		Input: child.Session.Input, Budget: child.Session.Budget,
	}); err != nil {
		return err
	}
	out := mustJSON(map[string]any{
		"id": row.ID, "agent": child.Session.Agent.Name, "budget": child.Session.Budget,
		"note": "The sub-agent runs in parallel in your workspace. Call wait_agents to get its answer.",
	})
	return add(lt.EventToolCompleted, turnID, step, lt.ToolCompletedData{Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Output: out})
}

// childSpec resolves the agent a spawn_agent call names and narrows it to
// what this session holds (narrowChild): a spawn asking for more than the
// parent's capabilities is refused, whichever form names the child. The
// child obeys the parent's policies too: rules apply across the whole tree.
func (r *runner) childSpec(ctx context.Context, args *spawnArgs) (*lt.AgentSpec, lt.AgentRef, error) {
	n := 0
	for _, set := range []bool{args.Agent != "", args.AgentSpec != nil, args.Instructions != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, lt.AgentRef{}, apierror.Invalid("agent", "give exactly one of agent (a configured agent's name), agent_spec or instructions")
	}
	var asked *lt.AgentSpec
	var ref lt.AgentRef
	switch {
	case args.Agent != "":
		a, err := r.e.GetAgent(ctx, r.project, args.Agent, 0)
		if err != nil {
			var ae *apierror.Error
			if errors.As(err, &ae) && ae.Code == lt.CodeNotFound {
				return nil, ref, apierror.Invalid("agent", "no agent named %q", args.Agent)
			}
			return nil, ref, err
		}
		asked, ref = &a.Spec, lt.AgentRef{Name: a.Name, Version: a.Version}
	case args.AgentSpec != nil:
		asked, ref = args.AgentSpec, lt.AgentRef{Name: inlineAgent, Version: 1}
	default:
		// The parent's model and tools with other instructions; its
		// budget is the share childBudget gives, not the parent's default.
		own := r.spec
		own.Instructions, own.Budget, ref = args.Instructions, nil, r.st.Session.Agent
		asked = &own
	}
	// Narrowed before an inline spec is validated, so a refusal never
	// depends on what this server holds (which environment variables or
	// secrets exist): the model learns nothing by asking.
	spec, err := narrowChild(&r.spec, asked, parentLimits{
		MaxParallelSubagents: r.maxParallelSubagents(), MaxSubagentDepth: r.maxSubagentDepth(),
	})
	if err != nil {
		return nil, ref, err
	}
	if args.AgentSpec != nil {
		if err := r.e.validateSpec(ctx, r.project, spec, "agent_spec"); err != nil {
			return nil, ref, err
		}
	}
	spec.Policies = inheritPolicies(spec.Policies, r.spec.Policies, spec.Tools)
	// The parent's monitor watches the child: a spawn cannot turn a
	// detector off, nor make its finding only a log line, nor drop or
	// weaken the parent's model monitor.
	spec.Monitor = childMonitor(r.spec.Monitor, spec.Monitor)
	return spec, ref, nil
}

// inheritPolicies puts the parent's policies that can apply to the child's
// tools (a rule on a tool the child lacks matches nothing, and would not
// compile) before the child's own; the most restrictive still decides.
// They come first because a tie goes to the first rule: a child's own
// "ask" must not stand in for the parent's "ask" with its approvers (a
// model spawning a child with a plain ask would otherwise lift a
// separation of duties). Inherited rules keep their name with a "parent."
// prefix, so the journal says where a decision came from; no rule is
// dropped for its name (a child naming its own rule "parent.deploy" must
// not shadow the parent's), a clash is numbered instead.
func inheritPolicies(own, parent []lt.Policy, tools []lt.ToolSpec) []lt.Policy {
	out := make([]lt.Policy, 0, len(parent)+len(own))
	names := make(map[string]bool, len(parent)+len(own))
	unique := func(name string) string {
		base := name
		for n := 2; names[name]; n++ {
			name = fmt.Sprintf("%s#%d", base, n)
		}
		names[name] = true
		return name
	}
	toolNames := policyToolNames(tools)
	for i, p := range parent {
		if !policy.MaySelect(p.Tool, toolNames) {
			continue
		}
		name := policyName(p, i)
		if !strings.HasPrefix(name, "parent.") {
			name = "parent." + name
		}
		p.Name = unique(name)
		out = append(out, p)
	}
	for _, p := range own {
		// An unnamed rule of the child's stays unnamed: its default name
		// is its position, which compiling gives it, while "policies[i]"
		// written as its name is refused ("looks like a default name"),
		// and the child could never run.
		if p.Name != "" {
			p.Name = unique(p.Name)
		}
		out = append(out, p)
	}
	return out
}

func policyName(p lt.Policy, i int) string {
	if p.Name != "" {
		return p.Name
	}
	return fmt.Sprintf("policies[%d]", i)
}

// childBudget computes a child's share of the parent's remaining budget,
// per limit the parent has: what the call asked for, at most what is left
// once running children's shares are set aside; by default an equal share
// among the free slots and the parent itself. Wall time is not divided
// (children run in parallel): a child gets at most the parent's time left.
func (r *runner) childBudget(asked *lt.Budget) (lt.Budget, error) {
	var want lt.Budget
	if asked != nil {
		if err := validateBudget(*asked, "budget"); err != nil {
			return lt.Budget{}, err
		}
		want = *asked
	}
	b, u, res := r.st.Session.Budget, r.st.Session.Usage, r.st.Reserved()
	shares := float64(max(r.maxParallelSubagents()-r.st.RunningChildren(), 0) + 1)
	var out lt.Budget
	var err error
	share := func(name string, max, used, asked float64) float64 {
		if max <= 0 {
			return asked // the parent has no limit: neither has the child, unless asked
		}
		left := max - used
		if left <= 0 && err == nil {
			err = apierror.Invalid("budget", "no %s left to give a sub-agent (%g of %g used or set aside for running sub-agents)", dimLabel(name), used, max)
		}
		if asked > 0 {
			return math.Min(asked, left)
		}
		return left / shares
	}
	out.MaxCostUSD = share("cost_usd", b.MaxCostUSD, u.CostUSD+res.CostUSD, want.MaxCostUSD)
	out.MaxTokens = atLeastOne(share("tokens", float64(b.MaxTokens), float64(u.InputTokens+u.OutputTokens+res.InputTokens), float64(want.MaxTokens)))
	out.MaxModelCalls = atLeastOne(share("model_calls", float64(b.MaxModelCalls), float64(u.ModelCalls+res.ModelCalls), float64(want.MaxModelCalls)))
	out.MaxToolCalls = atLeastOne(share("tool_calls", float64(b.MaxToolCalls), float64(u.ToolCalls+res.ToolCalls), float64(want.MaxToolCalls)))
	// Soft thresholds are shared the same way, against what the parent
	// and its running children may spend before one of them asks a
	// person (journal.State.ReservedSoft): a child asks at its share, so
	// no sub-agent spends past its parent's threshold without a person's
	// approval (at most its first step, as with a hard share). A child
	// whose hard share comes first needs none.
	su := r.st.ReservedSoft()
	softShare := func(soft, used, least float64) float64 {
		if soft <= 0 {
			return 0
		}
		return math.Max((soft-used)/shares, least)
	}
	// A threshold the child's own spec sets asks earlier still.
	out.SoftCostUSD = lowerSet(want.SoftCostUSD, softShare(b.SoftCostUSD, u.CostUSD+su.CostUSD, minSoftCostUSD))
	out.SoftTokens = lowerSet(want.SoftTokens, int64(softShare(float64(b.SoftTokens), float64(u.InputTokens+u.OutputTokens+su.InputTokens), 1)))
	out.SoftModelCalls = lowerSet(want.SoftModelCalls, int64(softShare(float64(b.SoftModelCalls), float64(u.ModelCalls+su.ModelCalls), 1)))
	out.SoftToolCalls = lowerSet(want.SoftToolCalls, int64(softShare(float64(b.SoftToolCalls), float64(u.ToolCalls+su.ToolCalls), 1)))
	if b.MaxWallSeconds > 0 {
		left := float64(b.MaxWallSeconds) - r.st.WallElapsed(r.e.clock.Now()).Seconds()
		if left <= 0 && err == nil {
			err = apierror.Invalid("budget", "no wall-clock time left to give a sub-agent")
		}
		out.MaxWallSeconds = int64(math.Max(left, 1))
		if want.MaxWallSeconds > 0 && float64(want.MaxWallSeconds) < left {
			out.MaxWallSeconds = want.MaxWallSeconds
		}
	} else {
		out.MaxWallSeconds = want.MaxWallSeconds
	}
	out.SoftWallSeconds = want.SoftWallSeconds
	if b.SoftWallSeconds > 0 {
		// Not divided, as the hard wall time is not.
		left := int64(math.Max(float64(b.SoftWallSeconds)-r.st.WallElapsed(r.e.clock.Now()).Seconds(), 1))
		out.SoftWallSeconds = lowerSet(want.SoftWallSeconds, left)
	}
	dropSoftAtMax(&out)
	return out, err
}

// dropSoftAtMax clears a child's soft thresholds that its hard limits
// reach first: it stops there, asking nobody, and a threshold past its
// limit is not a valid budget.
func dropSoftAtMax(b *lt.Budget) {
	if b.MaxCostUSD > 0 && b.SoftCostUSD >= b.MaxCostUSD {
		b.SoftCostUSD = 0
	}
	if b.MaxTokens > 0 && b.SoftTokens >= b.MaxTokens {
		b.SoftTokens = 0
	}
	if b.MaxModelCalls > 0 && b.SoftModelCalls >= b.MaxModelCalls {
		b.SoftModelCalls = 0
	}
	if b.MaxToolCalls > 0 && b.SoftToolCalls >= b.MaxToolCalls {
		b.SoftToolCalls = 0
	}
	if b.MaxWallSeconds > 0 && b.SoftWallSeconds >= b.MaxWallSeconds {
		b.SoftWallSeconds = 0
	}
}

// minSoftCostUSD is the least soft cost threshold a child gets: one that
// asks after the child's first call, when the parent has nothing left to
// spend unasked.
const minSoftCostUSD = 1e-6

// lowerLimits merges two asks for a child's budget (the call's and the
// child spec's default): per limit and threshold, the lower of those set.
// A soft threshold asked for only ever asks a person earlier: childBudget
// takes the lower of it and the child's share of the parent's.
func lowerLimits(a, b *lt.Budget) *lt.Budget {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return &lt.Budget{
		MaxCostUSD:      lowerSet(a.MaxCostUSD, b.MaxCostUSD),
		MaxTokens:       lowerSet(a.MaxTokens, b.MaxTokens),
		MaxModelCalls:   lowerSet(a.MaxModelCalls, b.MaxModelCalls),
		MaxToolCalls:    lowerSet(a.MaxToolCalls, b.MaxToolCalls),
		MaxWallSeconds:  lowerSet(a.MaxWallSeconds, b.MaxWallSeconds),
		SoftCostUSD:     lowerSet(a.SoftCostUSD, b.SoftCostUSD),
		SoftTokens:      lowerSet(a.SoftTokens, b.SoftTokens),
		SoftModelCalls:  lowerSet(a.SoftModelCalls, b.SoftModelCalls),
		SoftToolCalls:   lowerSet(a.SoftToolCalls, b.SoftToolCalls),
		SoftWallSeconds: lowerSet(a.SoftWallSeconds, b.SoftWallSeconds),
	}
}

// lowerSet is the lower of two limits where 0 means none.
func lowerSet[T int64 | float64](x, y T) T {
	if x <= 0 || (y > 0 && y < x) {
		return y
	}
	return x
}

// atLeastOne rounds a share of a countable limit down, but never to 0
// (which would mean "no limit").
func atLeastOne(v float64) int64 {
	if v <= 0 {
		return 0
	}
	return max(int64(v), 1)
}

// startWaitAgents journals the wait of a wait_agents call: for the children
// it names (default: those its turn spawned), all or any.
func (r *runner) startWaitAgents(c *journal.Call) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	var args struct {
		IDs            []string `json:"ids"`
		Mode           string   `json:"mode"`
		TimeoutSeconds *float64 `json:"timeout_seconds"`
	}
	_ = json.Unmarshal(c.Arguments, &args) // validated against the tool's schema when requested
	failCode := func(code, msg string) error {
		return r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Error: msg, Code: code})
	}
	fail := func(msg string) error { return failCode("", msg) }
	ids := args.IDs
	if len(ids) == 0 {
		for _, ch := range r.st.Children {
			if ch.TurnID == turnID {
				ids = append(ids, ch.ID)
			}
		}
		if len(ids) == 0 {
			return fail("no sub-agents to wait for: this turn spawned none (use spawn_agent first)")
		}
	}
	for i, id := range ids {
		if r.st.Child(id) == nil {
			return fail(fmt.Sprintf("ids[%d]: %q is not a sub-agent of this session", i, id))
		}
	}
	mode := args.Mode
	if mode == "" {
		mode = lt.WaitAll
	}
	d := lt.WaitStartedData{Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Kind: lt.WaitAgents, IDs: ids, Mode: mode}
	if args.TimeoutSeconds != nil {
		until := r.e.clock.Now().Add(time.Duration(*args.TimeoutSeconds * float64(time.Second))).Truncate(time.Millisecond)
		d.Until = &until
	}
	return r.add(lt.EventWaitStarted, turnID, step, d)
}

// agentsResult is wait_agents' result: what each finished child answered,
// and which still run.
func (r *runner) agentsResult(w *journal.Wait) json.RawMessage {
	type agentOut struct {
		ID         string   `json:"id"`
		Status     string   `json:"status"`
		Output     string   `json:"output,omitempty"`
		Error      string   `json:"error,omitempty"`
		StopReason string   `json:"stop_reason,omitempty"`
		Artifacts  []any    `json:"artifacts,omitempty"`
		Usage      lt.Usage `json:"usage"`
	}
	out := struct {
		Agents   []agentOut `json:"agents"`
		Running  []string   `json:"running,omitempty"`
		TimedOut bool       `json:"timed_out,omitempty"`
	}{Agents: []agentOut{}}
	for _, id := range w.IDs {
		c := r.st.Child(id)
		if c == nil || !c.Done {
			out.Running = append(out.Running, id)
			continue
		}
		a := agentOut{ID: id, Status: "completed", Usage: c.Usage}
		if res := c.Result; res != nil {
			a.Status, a.Output, a.Error, a.StopReason = string(res.Status), res.Output, res.Error, res.StopReason
			for _, art := range res.Artifacts {
				a.Artifacts = append(a.Artifacts, map[string]any{"id": art.ID, "name": art.Name, "version": art.Version, "content_type": art.ContentType, "size": art.Size})
			}
		}
		out.Agents = append(out.Agents, a)
	}
	out.TimedOut = !w.Satisfied && len(out.Running) > 0
	return mustJSON(out)
}

// reportToParent tells the parent how this sub-agent's last turn ended:
// subagent.completed on the parent (unless it has it), then
// subagent.reported here. The child's own end is made durable first, so
// the parent never learns of an end the child's journal could lose.
func (r *runner) reportToParent(ctx context.Context) error {
	if err := r.flush(ctx, false); err != nil {
		return err
	}
	d, err := r.e.reportToParent(ctx, r.st)
	if err != nil {
		return err
	}
	return r.add(lt.EventSubagentReported, "", 0, d)
}

// reportToParent appends the report due of the sub-agent of st (durable)
// to its parent's journal, once, and returns what the sub-agent journals
// then (subagent.reported).
func (e *Engine) reportToParent(ctx context.Context, st *journal.State) (lt.SubagentReportedData, error) {
	d := *st.ReportDue
	d.Usage = st.Session.Usage
	arts, err := e.latestArtifacts(ctx, st.Session.ID)
	if err != nil {
		return lt.SubagentReportedData{}, err
	}
	d.Artifacts = arts
	parentID := *st.Session.ParentID
	_, err = mutate(ctx, e, parentID, func(b *batch) (struct{}, error) {
		if c := b.st.Child(d.ChildID); c != nil && c.Done && c.ReportedTurn == d.TurnID {
			return struct{}{}, nil // reported before a crash
		}
		return struct{}{}, b.add(lt.EventSubagentCompleted, "", 0, d)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		e.log.Warn("sub-agent's parent is gone; its report is dropped", "session", st.Session.ID, "parent", parentID)
	case err != nil:
		return lt.SubagentReportedData{}, fmt.Errorf("report to parent %s: %w", parentID, err)
	}
	return lt.SubagentReportedData{TurnID: d.TurnID}, nil
}

// latestArtifacts lists the latest version of each of a session's artifacts.
func (e *Engine) latestArtifacts(ctx context.Context, sessionID string) ([]lt.Artifact, error) {
	all, err := e.ListArtifacts(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	latest := map[string]int{}
	var out []lt.Artifact
	for _, a := range all {
		if i, ok := latest[a.Name]; ok {
			if a.Version > out[i].Version {
				out[i] = a
			}
			continue
		}
		latest[a.Name] = len(out)
		out = append(out, a)
	}
	return out, nil
}

// cancelOrphans asks the children whose spawning turn is over to stop
// (their own workers cancel their turns and, in turn, their children), and
// journals each request.
func (r *runner) cancelOrphans(ctx context.Context, ids []string) error {
	return r.e.cancelOrphans(ctx, r.st, ids, r.add)
}

// cancelOrphans asks the sub-agents ids of the session of st to stop and
// journals each request with add (the runner's, or a batch's).
func (e *Engine) cancelOrphans(ctx context.Context, st *journal.State, ids []string, add func(typ, turnID string, step int, data any) error) error {
	reason := "the parent's turn that spawned this sub-agent ended"
	if st.Cancel != nil {
		reason = "the parent session was cancelled"
	}
	for _, id := range ids {
		if _, err := e.CancelSession(ctx, id, &lt.CancelRequest{Reason: reason}); err != nil && !isNotFound(err) {
			return fmt.Errorf("cancel sub-agent %s: %w", id, err)
		}
		if err := add(lt.EventSubagentCancelRequested, "", 0, lt.SubagentCancelRequestedData{ChildID: id, Reason: reason}); err != nil {
			return err
		}
	}
	return nil
}

func isNotFound(err error) bool {
	var ae *apierror.Error
	return errors.Is(err, store.ErrNotFound) || (errors.As(err, &ae) && ae.Code == lt.CodeNotFound)
}

// toolMessage is an error as the model reads it: an API error's field and
// message, or the error.
func toolMessage(err error) string {
	var ae *apierror.Error
	if errors.As(err, &ae) {
		if ae.Field != "" {
			return ae.Field + ": " + ae.Message
		}
		return ae.Message
	}
	return err.Error()
}

func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err)) // only for values built here
	}
	return raw
}
