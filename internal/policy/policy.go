package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// FieldError is a policy that cannot be compiled. Field is relative to the
// agent spec ("policies[2].when") so the API can return it as the error's
// field unchanged.
type FieldError struct {
	Field   string
	Message string
}

// Error implements error.
func (e *FieldError) Error() string {
	return e.Field + ": " + e.Message
}

// maxNameLength bounds a policy's name, which is copied into every journal
// event and approval it decides.
const maxNameLength = 128

// Ranks of the decisions: a higher rank is more restrictive and wins.
const (
	rankNone = iota - 1
	rankAllow
	rankAsk
	rankDeny
)

func rankOf(d lt.PolicyDecision) int {
	switch d {
	case lt.PolicyAllow:
		return rankAllow
	case lt.PolicyAsk:
		return rankAsk
	case lt.PolicyDeny:
		return rankDeny
	}
	return rankNone
}

// Set is an agent's compiled policies. It is immutable after Compile and
// safe for concurrent use.
type Set struct {
	rules        []rule
	needsEffects bool
}

// rule is one compiled policy.
type rule struct {
	name      string // the Verdict's Rule: the policy's Name or "policies[i]"
	tool      string // "" matches every tool ("*" is stored as "")
	prefix    bool   // tool is a prefix: the policy's tool was "tool*"
	when      string // the source of the condition, for generated reasons
	decision  lt.PolicyDecision
	rank      int
	reason    string
	expiresIn time.Duration
	approvers *lt.Approvers
	prog      cel.Program // nil when the policy has no condition
}

// Compile checks and compiles an agent's policies. toolNames are the
// agent's tool names (a policy naming a tool the agent does not have is an
// error, except "" and "*"). Errors are *FieldError with Field relative to
// the agent spec, e.g. "policies[2].when", "policies[0].decision",
// "policies[1].tool", "policies[3].expires_in_seconds", "policies[1].name"
// (duplicate names), "policies[0].approvers.roles[1]". An empty/nil list compiles to a Set that allows
// everything.
func Compile(policies []lt.Policy, toolNames []string) (*Set, error) {
	s := &Set{rules: make([]rule, 0, len(policies))}
	if len(policies) == 0 {
		return s, nil
	}
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	names := make(map[string]int, len(policies))
	for i, p := range policies {
		field := func(name string) string { return fmt.Sprintf("policies[%d].%s", i, name) }
		r := rule{
			name:     fmt.Sprintf("policies[%d]", i),
			tool:     p.Tool,
			when:     p.When,
			decision: p.Decision,
			rank:     rankOf(p.Decision),
			reason:   p.Reason,
		}
		if p.Decision == "" {
			return nil, &FieldError{field("decision"), "is required: allow, ask or deny"}
		}
		if r.rank == rankNone {
			return nil, &FieldError{field("decision"), fmt.Sprintf("must be allow, ask or deny, not %q", p.Decision)}
		}
		switch pre, isPattern := toolPattern(p.Tool); {
		case p.Tool == "*":
			r.tool = ""
		case isPattern && strings.Contains(pre, "*"):
			return nil, &FieldError{field("tool"), fmt.Sprintf("%q: only a trailing * is allowed (\"docs__*\": every tool whose name starts with docs__)", p.Tool)}
		case p.Tool != "" && !toolKnown(p.Tool, toolNames):
			return nil, &FieldError{field("tool"), unknownToolMessage(p.Tool, toolNames)}
		case isPattern:
			r.tool, r.prefix = pre, true
		}
		if p.Name != "" {
			if msg := checkName(p.Name); msg != "" {
				return nil, &FieldError{field("name"), msg}
			}
			if j, dup := names[p.Name]; dup {
				return nil, &FieldError{field("name"), fmt.Sprintf("%q is already the name of policies[%d]", p.Name, j)}
			}
			names[p.Name] = i
			r.name = p.Name
		}
		switch {
		case p.ExpiresInSeconds < 0:
			return nil, &FieldError{field("expires_in_seconds"), "must be >= 0"}
		case p.ExpiresInSeconds > 0 && p.Decision != lt.PolicyAsk:
			return nil, &FieldError{field("expires_in_seconds"), fmt.Sprintf("applies only to ask policies, not %s", p.Decision)}
		case p.ExpiresInSeconds > int64(maxDuration/time.Second):
			return nil, &FieldError{field("expires_in_seconds"), "is too large"}
		}
		r.expiresIn = time.Duration(p.ExpiresInSeconds) * time.Second
		if p.Approvers != nil {
			if p.Decision != lt.PolicyAsk {
				return nil, &FieldError{field("approvers"), fmt.Sprintf("applies only to ask policies, not %s", p.Decision)}
			}
			if fe := checkApprovers(p.Approvers, field("approvers")); fe != nil {
				return nil, fe
			}
			ap := *p.Approvers
			ap.Roles, ap.Names = slices.Clone(ap.Roles), slices.Clone(ap.Names)
			r.approvers = &ap
		}
		if p.When != "" {
			prog, usesEffects, msg := compileCondition(env, p.When)
			if msg != "" {
				return nil, &FieldError{field("when"), msg}
			}
			r.prog = prog
			s.needsEffects = s.needsEffects || usesEffects
		}
		s.rules = append(s.rules, r)
	}
	return s, nil
}

const maxDuration = time.Duration(1<<63 - 1)

// checkApprovers checks a policy's approvers; field is where they are.
// Only the roles that may decide actions at all (admin, approver) can be
// required: a rule naming another would make its approvals undecidable.
func checkApprovers(ap *lt.Approvers, field string) *FieldError {
	if len(ap.Roles) == 0 && len(ap.Names) == 0 && !ap.NotCreator {
		return &FieldError{field, "give roles, names or not_creator (or leave approvers out: anyone who may decide actions)"}
	}
	for i, r := range ap.Roles {
		f := fmt.Sprintf("%s.roles[%d]", field, i)
		switch r {
		case lt.RoleAdmin, lt.RoleApprover:
		case lt.RoleOperator, lt.RoleReader, lt.RoleRunner:
			return &FieldError{f, fmt.Sprintf("the %s role may not decide actions: give admin or approver", r)}
		default:
			return &FieldError{f, fmt.Sprintf("unknown role %q: give admin or approver", r)}
		}
	}
	for i, n := range ap.Names {
		if strings.TrimSpace(n) == "" || n != strings.TrimSpace(n) {
			return &FieldError{fmt.Sprintf("%s.names[%d]", field, i), "must be a key's name: not empty, no surrounding spaces"}
		}
	}
	return nil
}

// toolPattern returns the prefix of a tool pattern ("docs__*" selects every
// tool whose name starts with "docs__", the tools of the MCP server docs),
// and whether tool is one. Only a namespace ending in "__" makes a pattern:
// "send_*" is not one (a policy must not catch tools by accident of their
// names), and "*" alone is every tool.
func toolPattern(tool string) (string, bool) {
	if len(tool) > 3 && strings.HasSuffix(tool, "__*") {
		return strings.TrimSuffix(tool, "*"), true
	}
	return tool, false
}

// MaySelect reports whether a policy's tool ("", "*", a name or a
// "<server>__*" pattern) can select one of toolNames, as Compile requires
// of a rule: a sub-agent inherits exactly its parent's rules that may apply
// to its own tools, patterns over an MCP server's tools included.
func MaySelect(tool string, toolNames []string) bool {
	return tool == "" || tool == "*" || toolKnown(tool, toolNames)
}

// toolKnown reports whether a policy's tool (a name or a pattern) can match
// one of the agent's tools. toolNames may hold patterns too: tools whose
// names are known only at run time (an MCP server's, "docs__*"), of which
// any name with the prefix may exist.
func toolKnown(tool string, toolNames []string) bool {
	pre, isPattern := toolPattern(tool)
	for _, n := range toolNames {
		npre, nIsPattern := toolPattern(n)
		switch {
		case !isPattern && !nIsPattern && n == tool:
			return true
		case !isPattern && nIsPattern && strings.HasPrefix(tool, npre):
			return true
		case isPattern && !nIsPattern && strings.HasPrefix(n, pre):
			return true
		case isPattern && nIsPattern && (strings.HasPrefix(pre, npre) || strings.HasPrefix(npre, pre)):
			return true
		}
	}
	return false
}

// selects reports whether r's tool selects the tool named name ("" selects
// every tool).
func (r *rule) selects(name string) bool {
	switch {
	case r.tool == "":
		return true
	case r.prefix:
		return strings.HasPrefix(name, r.tool)
	default:
		return r.tool == name
	}
}

// Names reports whether a policy names the tool (by its name or a pattern
// that selects it), as opposed to applying to every tool. The engine gives
// a tool no policy names its default decision (an MCP tool that is not
// read-only: ask).
func (s *Set) Names(tool string) bool {
	if s == nil {
		return false
	}
	for i := range s.rules {
		if r := &s.rules[i]; r.tool != "" && r.selects(tool) {
			return true
		}
	}
	return false
}

// checkName returns why name cannot name a policy, or "".
func checkName(name string) string {
	if len(name) > maxNameLength {
		return fmt.Sprintf("must be at most %d bytes", maxNameLength)
	}
	// The default names are positional: a policy called "policies[3]"
	// would be confused with whichever policy sits at index 3.
	if strings.HasPrefix(name, "policies[") {
		return fmt.Sprintf("%q looks like a default name; choose another or omit it", name)
	}
	if strings.TrimSpace(name) != name {
		return "must not begin or end with white space"
	}
	if strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return "must contain only printable characters"
	}
	return ""
}

func unknownToolMessage(tool string, toolNames []string) string {
	if len(toolNames) == 0 {
		return fmt.Sprintf("the agent has no tool %q (it has no tools; use \"*\" or omit tool)", tool)
	}
	return fmt.Sprintf("the agent has no tool %q (its tools: %s)", tool, strings.Join(toolNames, ", "))
}

// compileMu serialises compiles in the shared environment.
var compileMu sync.Mutex

// compileCondition parses, checks and plans one condition. It returns the
// program, whether the condition reads `effects`, and an error message
// ("" when it compiled).
func compileCondition(env *cel.Env, when string) (prog cel.Program, usesEffects bool, msg string) {
	if strings.TrimSpace(when) == "" {
		return nil, false, "is blank; omit it to match every call"
	}
	// The parser and checker are not documented to be panic-free on every
	// input, and an agent definition must never take the server down.
	defer func() {
		if r := recover(); r != nil {
			prog, usesEffects, msg = nil, false, fmt.Sprintf("cannot be compiled: %v", r)
		}
	}()
	// cel-go's checker fills a lazily built catalog of the environment's
	// declarations without synchronising with its readers (a data race
	// under concurrent compiles), so compiles take turns. Compiling is rare
	// (an agent is defined, a worker claims a session); evaluating, the
	// frequent part, runs programs and needs no lock.
	compileMu.Lock()
	defer compileMu.Unlock()
	checked, iss := env.Compile(when)
	if iss != nil && iss.Err() != nil {
		return nil, false, issuesMessage(iss, when)
	}
	switch out := checked.OutputType(); out.Kind() {
	case types.BoolKind, types.DynKind:
		// dyn (e.g. args.flag) is checked again when it is evaluated.
	default:
		return nil, false, fmt.Sprintf("must be a bool condition, but its type is %s", out)
	}
	prog, err := env.Program(checked,
		cel.CostLimit(costLimit),
		cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, false, oneLine(err.Error())
	}
	return prog, refersTo(checked.NativeRep().Expr(), varEffects), ""
}

// NeedsEffects reports whether any condition refers to `effects` (so
// callers can skip building the history).
func (s *Set) NeedsEffects() bool {
	return s != nil && s.needsEffects
}

// Empty reports whether there are no policies.
func (s *Set) Empty() bool {
	return s == nil || len(s.rules) == 0
}

// Input is one tool call to decide, with the session's history.
type Input struct {
	Tool string
	// Arguments are the call's canonical JSON arguments (an object).
	Arguments json.RawMessage
	// Effects are the earlier effects of the session (and later its
	// sub-agents), oldest first. Only read when NeedsEffects.
	Effects []Effect
	Usage   lt.Usage
}

// Effect is an earlier tool call that was recorded in the side-effect
// ledger (it ran, or started running).
type Effect struct {
	Tool string
	// Args are the decoded JSON arguments (map[string]any for objects), as
	// DecodeArgs returns them, decoded once by the caller.
	Args      any
	Class     lt.EffectClass
	Status    lt.EffectStatus // started, succeeded, failed, in_doubt, resolved
	Error     string
	SessionID string
	TurnID    string
	Step      int
}

// DecodeArgs decodes canonical JSON arguments into the form Effect.Args
// wants: objects as map[string]any, arrays as []any, every number as
// float64 (as `args` exposes them, so sum and comparisons treat 10 and
// 10.5 alike; integers beyond 2^53 lose precision). Empty input decodes to
// an empty object.
func DecodeArgs(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decode arguments: %w", err)
	}
	if v == nil {
		return map[string]any{}, nil
	}
	return v, nil
}

// Verdict is the decision for one call and what decided it.
type Verdict struct {
	// Decision is allow when nothing matched.
	Decision lt.PolicyDecision
	// Rule is the deciding policy's Name, or "policies[i]" when unnamed;
	// "" when nothing matched.
	Rule string
	// Reason is the policy's Reason, or a generated one naming the rule and
	// its condition.
	Reason string
	// ExpiresIn comes from the deciding ask policy's ExpiresInSeconds.
	ExpiresIn time.Duration
	// Approvers comes from the deciding ask policy: who may decide the
	// approval (nil: anyone who may decide actions).
	Approvers *lt.Approvers
	// EvalError is set when the deciding verdict comes from a condition
	// that failed to evaluate: the policy, deny or ask, then asks.
	EvalError string
}
