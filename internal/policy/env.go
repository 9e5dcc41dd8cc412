package policy

import (
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/ext"
)

// Names of the variables a condition sees.
const (
	varTool    = "tool"
	varArgs    = "args"
	varEffects = "effects"
	varUsage   = "usage"
)

// Keys of one element of `effects` (and of the map `last` returns when no
// element matches).
const (
	keyTool      = "tool"
	keyArgs      = "args"
	keyClass     = "class"
	keyStatus    = "status"
	keyError     = "error"
	keySessionID = "session_id"
	keyTurnID    = "turn_id"
	keyStep      = "step"
)

// Keys of `usage`; every value is a double.
const (
	keyInputTokens  = "input_tokens"
	keyOutputTokens = "output_tokens"
	keyCostUSD      = "cost_usd"
	keyModelCalls   = "model_calls"
	keyToolCalls    = "tool_calls"
)

const (
	// costLimit bounds the work of one evaluation of one condition, in CEL
	// cost units (roughly one per operation, per list element visited). A
	// count over 10,000 effects costs about 100,000, so the limit leaves room
	// for real trajectories while a pathological expression (nested
	// comprehensions over the history, string blow-ups) is stopped instead of
	// holding a worker.
	costLimit = 1_000_000
	// maxWhenLength bounds a condition's source, in code points. A policy
	// is a line or two; the bound keeps a hostile agent definition from
	// making the parser do unbounded work.
	maxWhenLength = 4096
)

// celEnv is the one CEL environment every condition compiles in. An
// environment is immutable, and building one costs milliseconds, so it is
// built once, on first use (compiles in it take turns: see compileMu).
var celEnv = sync.OnceValues(newEnv)

func newEnv() (*cel.Env, error) {
	effectType := cel.MapType(cel.StringType, cel.DynType)
	env, err := cel.NewEnv(
		cel.Variable(varTool, cel.StringType),
		// args is dyn rather than map(string, dyn) so that a condition can
		// test any JSON value the call carries; a missing key is a run-time
		// error, which the fail-closed rule turns into a question.
		cel.Variable(varArgs, cel.DynType),
		cel.Variable(varEffects, cel.ListType(effectType)),
		// usage's values are doubles, declared dyn like args's so that
		// usage.tool_calls == 10 checks (CEL has no static double == int).
		cel.Variable(varUsage, cel.MapType(cel.StringType, cel.DynType)),
		// Numbers from JSON arguments and usage are doubles, count() and
		// e.step are ints: comparing across them must just work
		// (args.amount_usd > 10).
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
		cel.ParserExpressionSizeLimit(maxWhenLength),
		ext.Strings(),
		cel.Macros(countMacro, sumMacro, lastMacro),
		numberFunction(),
	)
	if err != nil {
		return nil, fmt.Errorf("build policy environment: %w", err)
	}
	return env, nil
}

// issuesMessage turns CEL's compile issues into one readable line: each
// error with its position, at most three of them. CEL's own rendering
// repeats the source with a caret under it over several lines, which reads
// badly inside a JSON error message.
func issuesMessage(iss *cel.Issues, source string) string {
	errs := iss.Errors()
	if len(errs) == 0 {
		return oneLine(iss.String())
	}
	multiline := strings.Contains(source, "\n")
	const maxShown = 3
	parts := make([]string, 0, maxShown+1)
	for i, e := range errs {
		if i == maxShown {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-maxShown))
			break
		}
		msg := oneLine(strings.TrimSuffix(e.Message, " (in container '')"))
		if loc := e.Location; loc != nil && loc.Line() > 0 {
			if multiline {
				msg = fmt.Sprintf("line %d, column %d: %s", loc.Line(), loc.Column()+1, msg)
			} else {
				msg = fmt.Sprintf("column %d: %s", loc.Column()+1, msg)
			}
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}

// oneLine collapses runs of white space, newlines included, into one space.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// refersTo reports whether e reads the variable name. An iteration or
// accumulator variable of the same name shadows it inside its
// comprehension ([1].exists(effects, effects > 0) does not read the
// history), which is why this walks scopes rather than looking names up.
func refersTo(e ast.Expr, name string) bool {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent() == name
	case ast.SelectKind:
		return refersTo(e.AsSelect().Operand(), name)
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() && refersTo(c.Target(), name) {
			return true
		}
		for _, a := range c.Args() {
			if refersTo(a, name) {
				return true
			}
		}
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			if refersTo(el, name) {
				return true
			}
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			me := en.AsMapEntry()
			if refersTo(me.Key(), name) || refersTo(me.Value(), name) {
				return true
			}
		}
	case ast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			if refersTo(f.AsStructField().Value(), name) {
				return true
			}
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		if refersTo(c.IterRange(), name) || refersTo(c.AccuInit(), name) {
			return true
		}
		if c.IterVar() == name || c.IterVar2() == name || c.AccuVar() == name {
			return false
		}
		return refersTo(c.LoopCondition(), name) || refersTo(c.LoopStep(), name) || refersTo(c.Result(), name)
	}
	return false
}
