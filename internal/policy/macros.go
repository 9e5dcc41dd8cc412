package policy

import (
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// elemVar is the name of the element inside count, sum and last. It is fixed
// (rather than chosen by the caller, as in CEL's own list.filter(x, ...))
// so that rules read the same everywhere: count(effects, e.tool == "x").
const elemVar = "e"

// numberFunc converts one value that sum adds up to a double, or fails
// naming its type. The leading "@" keeps it out of reach of conditions: CEL
// identifiers cannot contain it, so only the sum macro can call it.
const numberFunc = "@policy_number"

// The three trajectory macros. They expand at parse time into CEL
// comprehensions, so they are type-checked and cost-limited like the rest of
// the condition and never see anything a condition could not see itself.
var (
	countMacro = cel.GlobalVarArgMacro("count", expandCount,
		cel.MacroDocs("number of elements of the list for which the predicate over e is true"),
		cel.MacroExamples(`count(effects, e.tool == "send_email") >= 3`))
	sumMacro = cel.GlobalVarArgMacro("sum", expandSum,
		cel.MacroDocs("sum, as a double, of the expression over e for every element of the list;",
			"an error when a value is not a number"),
		cel.MacroExamples(`sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) + args.amount_usd > 100`))
	lastMacro = cel.GlobalVarArgMacro("last", expandLast,
		cel.MacroDocs("the last element of the list for which the predicate over e is true, or,",
			"when none is, an effect whose tool, class, status and error are \"\" and args is {}"),
		cel.MacroExamples(`last(effects, e.tool == "run_tests").status == "failed"`))
)

// expandCount turns count(list, pred) into
//
//	list.fold(e, accu = 0, pred ? accu + 1 : accu)
func expandCount(eh cel.MacroExprFactory, _ ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
	if err := checkArity(eh, "count(list, predicate)", args); err != nil {
		return nil, err
	}
	step := eh.NewCall(operators.Conditional, args[1],
		eh.NewCall(operators.Add, eh.NewAccuIdent(), eh.NewLiteral(types.Int(1))),
		eh.NewAccuIdent())
	return eh.NewComprehension(args[0], elemVar, eh.AccuIdentName(),
		eh.NewLiteral(types.Int(0)), eh.NewLiteral(types.True), step, eh.NewAccuIdent()), nil
}

// expandSum turns sum(list, expr) into
//
//	list.fold(e, accu = 0.0, accu + number(expr))
//
// The sum is a double because JSON numbers are: integer and fractional
// amounts add up alike, and the result compares with args.amount_usd.
func expandSum(eh cel.MacroExprFactory, _ ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
	if err := checkArity(eh, "sum(list, expression)", args); err != nil {
		return nil, err
	}
	step := eh.NewCall(operators.Add, eh.NewAccuIdent(), eh.NewCall(numberFunc, args[1]))
	return eh.NewComprehension(args[0], elemVar, eh.AccuIdentName(),
		eh.NewLiteral(types.Double(0)), eh.NewLiteral(types.True), step, eh.NewAccuIdent()), nil
}

// expandLast turns last(list, pred) into
//
//	list.fold(e, accu = dyn(<empty effect>), pred ? e : accu)
//
// Starting from an empty effect rather than failing when nothing matched
// lets order rules stay one comparison: last(effects, e.tool ==
// "run_tests").status == "failed" is false when no test ran.
func expandLast(eh cel.MacroExprFactory, _ ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
	if err := checkArity(eh, "last(list, predicate)", args); err != nil {
		return nil, err
	}
	str := func(s string) ast.Expr { return eh.NewLiteral(types.String(s)) }
	entry := func(k string, v ast.Expr) ast.EntryExpr { return eh.NewMapEntry(str(k), v, false) }
	empty := eh.NewMap(
		entry(keyTool, str("")),
		entry(keyArgs, eh.NewMap()),
		entry(keyClass, str("")),
		entry(keyStatus, str("")),
		entry(keyError, str("")),
		entry(keySessionID, str("")),
		entry(keyTurnID, str("")),
		entry(keyStep, eh.NewLiteral(types.Int(0))),
	)
	// The accumulator is dyn so that last also works over lists that are
	// not effects (last(args.items, e > 1)) instead of failing to check
	// with an unreadable overload error.
	init := eh.NewCall(overloads.TypeConvertDyn, empty)
	step := eh.NewCall(operators.Conditional, args[1], eh.NewIdent(elemVar), eh.NewAccuIdent())
	return eh.NewComprehension(args[0], elemVar, eh.AccuIdentName(),
		init, eh.NewLiteral(types.True), step, eh.NewAccuIdent()), nil
}

// checkArity reports a call with the wrong number of arguments here, where
// the message can show the form, rather than as an undeclared function.
func checkArity(eh cel.MacroExprFactory, form string, args []ast.Expr) *common.Error {
	if len(args) == 2 {
		return nil
	}
	// A fresh node of the expansion carries the location of the macro call.
	id := eh.NewLiteral(types.NullValue).ID()
	if len(args) > 0 {
		id = args[0].ID()
	}
	return eh.NewError(id, fmt.Sprintf("%s takes 2 arguments, got %d", form, len(args)))
}

// numberFunction declares the conversion sum applies to each value.
func numberFunction() cel.EnvOption {
	return cel.Function(numberFunc,
		cel.Overload("policy_number_dyn", []*cel.Type{cel.DynType}, cel.DoubleType,
			cel.UnaryBinding(toNumber)))
}

func toNumber(v ref.Val) ref.Val {
	switch n := v.(type) {
	case types.Double:
		return n
	case types.Int:
		return types.Double(n)
	case types.Uint:
		return types.Double(n)
	}
	return types.NewErr("sum: value is a %s, not a number", v.Type().TypeName())
}
