// Package policy compiles and evaluates an agent's tool-call policies
// (longhaultype.Policy): per tool, allow, ask or deny, with an optional
// condition written in CEL over the call's arguments and the session's
// trajectory.
//
// Compile checks every policy when the agent is defined, so that a bad one
// is a 400 naming its field ("policies[2].when") and never a surprise at
// run time: the decision, the tool (one of the agent's, "" / "*" for all,
// or a prefix pattern such as "docs__*" for every tool whose name starts
// with "docs__"; the agent's tool names may be such patterns themselves,
// for tools known only at run time, like an MCP server's), the name (unique, optional), expires_in_seconds (ask only) and the
// condition (syntax, undeclared names, a result that is not a bool). Set.
// Evaluate then decides each call: among the policies that match, the most
// restrictive wins (deny over ask over allow, ties to the first); a call
// nothing matches is allowed.
//
// # Conditions
//
// A condition sees:
//
//	tool     string   the called tool's name
//	args     dyn      the call's arguments (a map, from its JSON object)
//	effects  list     earlier effects of the session, oldest first; each a map
//	                  with tool, args, class, status, error, session_id,
//	                  turn_id (strings) and step (int)
//	usage    map      input_tokens, output_tokens, cost_usd, model_calls,
//	                  tool_calls (all doubles)
//
// Every number of the JSON arguments is a double, whether it was written 10
// or 10.5, so args.amount_usd > 10 and sums behave the same for both.
// Comparisons across int and double work (args.amount_usd > 10); arithmetic
// needs one type, so write args.n + 1.0, not args.n + 1.
//
// A key that the arguments lack is an error, not null: on a call without
// amount_usd, args.amount_usd > 10 fails (see below). Guard optional
// arguments with has: has(args.amount_usd) && args.amount_usd > 10.
//
// CEL's standard library is there (size, in, matches, filter, map, exists,
// all, ...), with the string extensions: args.to.endsWith("@ourco.com"),
// args.command.lowerAscii().contains("rm -rf"), args.path.split("/")....
//
// # Trajectory macros
//
// Three macros iterate over a list with the element named e. They expand
// into CEL comprehensions when the condition is parsed, so they are checked
// and cost-limited like everything else.
//
//	count(list, pred)  the number of elements for which pred is true (an int)
//	sum(list, expr)    the sum of expr over the elements (a double; an error
//	                   when a value is not a number); 0.0 for an empty list
//	last(list, pred)   the last element for which pred is true; when none is
//	                   (or the list is empty), an effect-shaped map whose
//	                   tool, class, status, error, session_id and turn_id
//	                   are "", args is {} and step is 0
//
// Examples:
//
//	// at most three e-mails per session (tool: send_email, decision: deny)
//	count(effects, e.tool == "send_email") >= 3
//
//	// ask once payments would pass 100 dollars (tool: pay, decision: ask)
//	sum(effects.filter(x, x.tool == "pay"), e.args.amount_usd) + args.amount_usd > 100
//
//	// no deploy right after a failing test run (tool: deploy, decision: ask);
//	// false when no test ran at all
//	last(effects, e.tool == "run_tests").status == "failed"
//
//	// only mail inside the company without asking (tool: send_email, decision: ask)
//	!args.to.endsWith("@ourco.com")
//
// Inside a macro, e is the macro's element: a macro nested in another's
// predicate shadows the outer e. An effect is in the list once it was
// recorded as started, so its status may be started, succeeded, failed,
// in_doubt or resolved.
//
// # Failing closed
//
// Evaluate never returns an error. A condition that fails at run time (a
// missing key, a value of the wrong type, a result that is not a bool, the
// cost limit) makes an allow policy not match, and makes a deny or ask
// policy match with decision ask: a person decides instead of the engine
// guessing. The verdict's EvalError says what failed.
//
// # Invariants
//
//   - A Set is immutable after Compile and safe for concurrent use; every
//     program is built by Compile, none at evaluation.
//   - One evaluation of one condition is bounded by a CEL cost limit, and
//     a condition's source by a length limit.
//   - Effects are exposed to conditions without copying them, and only when
//     a condition that reads them is evaluated.
//
// It imports longhaultype and CEL (cel.dev/cel-go) only. The engine decides
// every tool call with it and validates agents' policies. Who may import
// it: internal/engine and tests.
package policy
