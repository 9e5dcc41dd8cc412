package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/mcp"
	"github.com/longhaul-dev/longhaul/internal/policy"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// history is the session's effect history as trajectory rules see it:
// every tool call that reached the side-effect ledger, with its decoded
// arguments and latest status. It is derived from the journal like the
// transcript, and kept only when a policy refers to effects.
type history struct {
	effects []policy.Effect
	byID    map[string]int // effect id -> index in effects
	args    map[string]any // call id -> decoded arguments, current step
}

func newHistory() *history {
	return &history{byID: make(map[string]int), args: make(map[string]any)}
}

func historyWants(typ string) bool {
	switch typ {
	case lt.EventModelResponded, lt.EventToolRequested, lt.EventToolStarted, lt.EventToolCompleted, lt.EventToolFailed,
		lt.EventEffectInDoubt, lt.EventActionResolved, lt.EventTurnFailed, lt.EventTurnCancelled:
		return true
	}
	return false
}

func (h *history) observe(ev lt.Event) {
	if h == nil || !historyWants(ev.Type) {
		return
	}
	switch ev.Type {
	case lt.EventModelResponded:
		clear(h.args)
	case lt.EventToolRequested:
		if d, err := lt.DataAs[lt.ToolRequestedData](ev); err == nil {
			h.args[d.CallID], _ = policy.DecodeArgs(d.Arguments)
		}
	case lt.EventActionResolved:
		if d, err := lt.DataAs[lt.ActionResolvedData](ev); err == nil && len(d.Arguments) > 0 && d.CallID != "" {
			// An edited approval: the call runs with the edited arguments.
			h.args[d.CallID], _ = policy.DecodeArgs(d.Arguments)
		}
	case lt.EventToolStarted:
		d, err := lt.DataAs[lt.ToolStartedData](ev)
		if err != nil {
			return
		}
		if _, ok := h.byID[d.EffectID]; ok {
			h.effects[h.byID[d.EffectID]].Status = lt.EffectStarted
			return
		}
		h.byID[d.EffectID] = len(h.effects)
		h.effects = append(h.effects, policy.Effect{
			Tool: d.Tool, Args: h.args[d.CallID], Class: d.Class, Status: lt.EffectStarted,
			SessionID: ev.SessionID, TurnID: ev.TurnID, Step: d.Step,
		})
	case lt.EventToolCompleted:
		if d, err := lt.DataAs[lt.ToolCompletedData](ev); err == nil {
			h.finish(d.EffectID, lt.EffectSucceeded, "", d.Resolution)
		}
	case lt.EventToolFailed:
		if d, err := lt.DataAs[lt.ToolFailedData](ev); err == nil {
			h.finish(d.EffectID, lt.EffectFailed, d.Error, d.Resolution)
		}
	case lt.EventEffectInDoubt:
		if d, err := lt.DataAs[lt.EffectInDoubtData](ev); err == nil {
			h.finish(d.EffectID, lt.EffectInDoubt, "", "")
		}
	case lt.EventTurnFailed, lt.EventTurnCancelled:
		// As the ledger records it (journal.voidTurn): what the ended turn
		// left running is in doubt if irreversible, failed otherwise.
		for i := range h.effects {
			e := &h.effects[i]
			if e.TurnID != ev.TurnID || e.Status != lt.EffectStarted {
				continue
			}
			if e.Class == lt.EffectIrreversible {
				e.Status = lt.EffectInDoubt
			} else {
				e.Status, e.Error = lt.EffectFailed, "turn ended"
			}
		}
	}
}

func (h *history) finish(effectID string, status lt.EffectStatus, errMsg, resolution string) {
	i, ok := h.byID[effectID]
	if !ok {
		return
	}
	if resolution != "" {
		status = lt.EffectResolved
	}
	h.effects[i].Status, h.effects[i].Error = status, errMsg
}

// evaluatePolicy decides a call that is about to run, unless a person
// already approved it. It journals the verdict when a policy matched, and
// reports whether the call may run now.
func (r *runner) evaluatePolicy(ctx context.Context, c *journal.Call) (bool, error) {
	if c.Kind != lt.CallBuiltin && c.Kind != lt.CallFunction && c.Kind != lt.CallMCP {
		return true, nil
	}
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	if c.ApprovedSHA256 != "" {
		// The binding: what runs must hash to what was approved.
		sum, err := tool.ArgumentsSHA256(c.Arguments)
		if err == nil && sum == c.ApprovedSHA256 {
			return true, nil
		}
		return false, r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{
			Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Refused: lt.RefusedApprovalMismatch,
			Error: fmt.Sprintf("refused: the arguments about to run (sha256 %s) are not the ones a person approved (sha256 %s)", sum, c.ApprovedSHA256),
		})
	}
	def, hasDefault := r.mcpDefault(c)
	if c.Policy != "" || (r.policies.Empty() && !hasDefault) {
		return true, nil
	}
	in := &policy.Input{Tool: c.Tool, Arguments: c.Arguments, Usage: r.st.Session.Usage}
	if r.h != nil {
		// Rules apply across the tree of sub-agents: the others' effects
		// come first, as if earlier.
		others, err := r.treeEffects(ctx)
		if err != nil {
			return false, err
		}
		in.Effects = append(others, r.h.effects...)
	}
	v := r.policies.Evaluate(in)
	if hasDefault && (v.Decision == lt.PolicyAllow || v.Rule == "") {
		// No policy names the tool: its default applies, unless a policy
		// for every tool is stricter.
		v = def
	}
	if v.Rule == "" {
		return true, nil
	}
	if err := r.add(lt.EventPolicyDecided, turnID, step, lt.PolicyDecidedData{
		Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Decision: v.Decision, Rule: v.Rule, Reason: v.Reason, EvalError: v.EvalError,
	}); err != nil {
		return false, err
	}
	switch v.Decision {
	case lt.PolicyDeny:
		return false, r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{
			Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Refused: lt.RefusedPolicy,
			Error: fmt.Sprintf("denied by policy %s: %s", v.Rule, v.Reason),
		})
	case lt.PolicyAsk:
		return false, r.askApproval(ctx, c, v)
	}
	return true, nil
}

// compilePolicies compiles an agent's policies against its tool names.
func compilePolicies(spec *lt.AgentSpec) (*policy.Set, error) {
	return policy.Compile(spec.Policies, policyToolNames(spec.Tools))
}

// policyToolNames are the names policies may select among an agent's
// tools.
func policyToolNames(tools []lt.ToolSpec) []string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		if t.Type == "mcp" {
			// Its tools are known only once listed: policies may name
			// any of them, or all ("<server>__*").
			names = append(names, mcp.ToolName(t.Name, "*"))
			continue
		}
		names = append(names, t.Name)
	}
	return names
}

// historySnapshot is a history as a context snapshot (resume.go) holds
// it: each effect with its id and its arguments as JSON, and the
// arguments of the calls of the step under way.
type historySnapshot struct {
	Effects []effectSnapshot `json:"effects,omitempty"`
	// Args maps a call id to its arguments; null stands for arguments
	// that did not decode.
	Args map[string]json.RawMessage `json:"args,omitempty"`
}

type effectSnapshot struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Args is absent when the effect has none (its call's arguments were
	// not seen, or did not decode).
	Args   json.RawMessage `json:"args,omitempty"`
	Class  lt.EffectClass  `json:"class,omitempty"`
	Status lt.EffectStatus `json:"status"`
	Error  string          `json:"error,omitempty"`
	TurnID string          `json:"turn_id,omitempty"`
	Step   int             `json:"step"`
}

// snapshot encodes h. Decoded arguments encode back to JSON that decodes
// to the same values (every number a float64 written to round-trip), so
// a history restored from it is the one the journal gives.
func (h *history) snapshot() (*historySnapshot, error) {
	ids := make([]string, len(h.effects))
	for id, i := range h.byID {
		ids[i] = id
	}
	s := &historySnapshot{Effects: make([]effectSnapshot, len(h.effects))}
	for i := range h.effects {
		e := &h.effects[i]
		es := effectSnapshot{ID: ids[i], Tool: e.Tool, Class: e.Class, Status: e.Status, Error: e.Error, TurnID: e.TurnID, Step: e.Step}
		if e.Args != nil {
			raw, err := json.Marshal(e.Args)
			if err != nil {
				return nil, fmt.Errorf("encode the arguments of effect %s: %w", ids[i], err)
			}
			es.Args = raw
		}
		s.Effects[i] = es
	}
	if len(h.args) > 0 {
		s.Args = make(map[string]json.RawMessage, len(h.args))
		for id, a := range h.args {
			raw := json.RawMessage("null")
			if a != nil {
				var err error
				if raw, err = json.Marshal(a); err != nil {
					return nil, fmt.Errorf("encode the arguments of call %s: %w", id, err)
				}
			}
			s.Args[id] = raw
		}
	}
	return s, nil
}

// restore decodes the history a snapshot of session sessionID holds; nil
// (and no error) when it holds none.
func (s *historySnapshot) restore(sessionID string) (*history, error) {
	if s == nil {
		return nil, nil
	}
	h := newHistory()
	h.effects = make([]policy.Effect, len(s.Effects))
	for i, es := range s.Effects {
		if _, dup := h.byID[es.ID]; dup || es.ID == "" {
			return nil, fmt.Errorf("effect %d: id %q missing or repeated", i, es.ID)
		}
		args, err := snapshotArgs(es.Args)
		if err != nil {
			return nil, fmt.Errorf("effect %s: %w", es.ID, err)
		}
		h.byID[es.ID] = i
		h.effects[i] = policy.Effect{
			Tool: es.Tool, Args: args, Class: es.Class, Status: es.Status, Error: es.Error,
			SessionID: sessionID, TurnID: es.TurnID, Step: es.Step,
		}
	}
	for id, raw := range s.Args {
		args, err := snapshotArgs(raw)
		if err != nil {
			return nil, fmt.Errorf("call %s: %w", id, err)
		}
		h.args[id] = args
	}
	return h, nil
}

// snapshotArgs decodes arguments as a history holds them: nil for none.
func snapshotArgs(raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	return policy.DecodeArgs(raw)
}
