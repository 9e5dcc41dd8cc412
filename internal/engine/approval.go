package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/policy"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// askApproval turns a call a policy asked about into an approval action
// carrying what a person needs to decide (API.md "Required actions"): the
// action in plain language, who or what it affects, the evidence, the
// consequence, and the exact arguments with their hash.
//
// The summary names who or what is affected first, in plain words (the
// call as code is beside it); the consequence is built from the effect
// class and the environment (sandbox, network, secrets, workspace); the
// evidence shows the workspace files the call runs or changes.
func (r *runner) askApproval(ctx context.Context, c *journal.Call, v policy.Verdict) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	sid := r.st.Session.ID
	now := r.e.clock.Now()
	red, err := r.e.redactor(ctx)
	if err != nil {
		return err
	}
	ac := &approvalContext{ctx: ctx, r: r, red: red}
	var affectsNames []string
	if en, ok := r.tools.lookup(c.Tool); ok {
		affectsNames = en.spec.Affects // the agent's entry of that name: none for an MCP tool
	}
	evidence := []string{}
	if text := strings.TrimSpace(r.st.Step.Text); text != "" {
		evidence = append(evidence, "The agent's reasoning for this step: "+clip(text, 2000))
	}
	evidence = append(evidence, fmt.Sprintf("Policy %s asked for approval: %s", v.Rule, v.Reason))
	if d := firstSentence(r.toolDescription(c.Tool)); d != "" {
		evidence = append(evidence, fmt.Sprintf("What %s does: %s", c.Tool, d))
	}
	evidence = append(evidence, ac.fileEvidence(c)...)
	evidence = append(evidence, browserEvidence(c, r.browserPage())...)
	a := lt.Action{
		ID: derivedID("act_", sid, turnID, step, c.Index, "approval"), SessionID: sid, Type: lt.ActionApproval, Status: lt.ActionPending,
		TurnID: turnID, Step: step, CallID: c.ID, Tool: c.Tool, Arguments: c.Arguments, ArgumentsSHA256: c.ArgumentsSHA256,
		Summary:     journal.DescribeCall(c.Tool, c.Arguments),
		Call:        journal.RawCall(c.Tool, c.Arguments),
		Affects:     affects(affectsNames, c.Tool, c.Arguments),
		Evidence:    evidence,
		Consequence: ac.consequence(ctx, c),
		Policy:      v.Rule,
		Approvers:   v.Approvers,
		CreatedAt:   now,
	}
	if v.ExpiresIn > 0 {
		at := now.Add(v.ExpiresIn).Truncate(time.Millisecond)
		a.ExpiresAt = &at
	}
	return r.add(lt.EventActionRequired, turnID, step, lt.ActionRequiredData{Action: a})
}

// askHuman turns an ask_human call into an input action; the answer becomes
// the tool's result.
func (r *runner) askHuman(c *journal.Call) error {
	step, turnID := r.st.Step.N, r.st.Step.TurnID
	sid := r.st.Session.ID
	var args askHumanArgs
	_ = json.Unmarshal(c.Arguments, &args) // validated against askHumanSchema when requested
	a := lt.Action{
		ID: derivedID("act_", sid, turnID, step, c.Index, "input"), SessionID: sid, Type: lt.ActionInput, Status: lt.ActionPending,
		TurnID: turnID, Step: step, CallID: c.ID, Tool: c.Tool, Question: args.Question, Choices: args.Choices,
		Summary:   "The agent asks: " + clip(args.Question, 500),
		CreatedAt: r.e.clock.Now(),
	}
	if text := strings.TrimSpace(r.st.Step.Text); text != "" {
		a.Evidence = []string{"The agent's reasoning for this step: " + clip(text, 2000)}
	}
	if args.Kind == lt.InputFile {
		// Answered by an upload to that path (files.go). A sub-agent's
		// workspace is its root's, which no person may change while the
		// sub-agent runs: asked there, the file could never come.
		p, err := askFilePath(args)
		if err == nil && r.st.Workspace != "" {
			err = fmt.Errorf("ask_human: a sub-agent cannot ask for a file (kind %q): it works in its parent's workspace, which a person can change only once its sub-agents are done; ask in words, or report what you need to your parent", lt.InputFile)
		}
		if err != nil {
			return r.add(lt.EventToolFailed, turnID, step, lt.ToolFailedData{Step: step, Index: c.Index, CallID: c.ID, Tool: c.Tool, Error: err.Error()})
		}
		a.Kind, a.Path = lt.InputFile, p
		a.Summary = "The agent asks for a file at " + p + ": " + clip(args.Question, 500)
	}
	return r.add(lt.EventActionRequired, turnID, step, lt.ActionRequiredData{Action: a})
}

func (r *runner) toolDescription(name string) string {
	if en, ok := r.tools.lookup(name); ok {
		return en.description
	}
	return ""
}

// firstSentence is a tool description's first sentence.
func firstSentence(description string) string {
	if i := strings.IndexAny(description, ".\n"); i >= 0 {
		description = description[:i]
	}
	return strings.TrimSpace(description)
}

// affects lists who or what a call touches: the named arguments' values, or
// by default every string value that looks like an address, a URL, a path or
// a command.
func affects(names []string, toolName string, args json.RawMessage) []string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		s = clip(s, 200)
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if len(names) > 0 {
		for _, n := range names {
			collectStrings(m[n], func(s string) { add(s) })
		}
		return out
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		collectStrings(m[k], func(s string) {
			switch {
			case k == "command" && toolName == "shell":
				add("the workspace, by the shell command: " + s)
			case k == "path":
				add("workspace file " + s)
			case journal.LooksLikeEmail(s):
				add(s)
			case journal.LooksLikeURL(s):
				add(s)
			}
		})
	}
	return out
}

func collectStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			collectStrings(e, f)
		}
	}
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string { return journal.Clip(s, n) }

// expired reports whether a pending action's expiry has passed.
func expired(a *lt.Action, now time.Time) bool {
	return a.ExpiresAt != nil && !now.Before(*a.ExpiresAt)
}
