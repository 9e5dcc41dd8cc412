package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// planProvider is a model for context tests. It answers by what a call is
// for, as a real model would: a compaction call gets a numbered summary, a
// verification call the next verdict, and a step call the next step of its
// plan. It records every request.
type planProvider struct {
	mu        sync.Mutex
	plan      []model.Response
	next      int
	summaries int
	verdicts  []string
	// tooLong, when set, refuses a step call the way a provider refuses a
	// context over its window.
	tooLong  func(msgs []model.Message) bool
	requests []recorded
}

type recorded struct {
	purpose string // "", "compaction" or "verification"
	msgs    []model.Message
	apiKey  string
}

// planURL is where the plan provider's calls would go: the host model keys
// are bound to in these tests.
const planURL = "https://api.example.com/v1"

// DefaultBaseURL implements model.Endpoint, as a remote provider does.
func (p *planProvider) DefaultBaseURL(lt.ModelSpec) string { return planURL }

func (p *planProvider) Respond(_ context.Context, req *model.Request) (*model.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	purpose := ""
	if len(req.Messages) > 0 && req.Messages[0].Role == model.RoleSystem {
		switch sys := req.Messages[0].Text; {
		case strings.HasPrefix(sys, "You compact the working memory"):
			purpose = lt.PurposeCompaction
		case strings.HasPrefix(sys, "You check whether an agent's final answer"):
			purpose = lt.PurposeVerification
		}
	}
	p.requests = append(p.requests, recorded{purpose: purpose, msgs: append([]model.Message(nil), req.Messages...), apiKey: req.APIKey})
	usage := lt.Usage{InputTokens: 100, OutputTokens: 10}
	switch purpose {
	case lt.PurposeCompaction:
		p.summaries++
		return &model.Response{Text: fmt.Sprintf("Summary %d: the agent read parts of big.txt.", p.summaries), Usage: usage}, nil
	case lt.PurposeVerification:
		v := p.verdicts[0]
		if len(p.verdicts) > 1 {
			p.verdicts = p.verdicts[1:]
		}
		return &model.Response{Text: v, Usage: usage}, nil
	}
	if p.tooLong != nil && p.tooLong(req.Messages) {
		return nil, &model.Error{Kind: model.KindContextTooLong, Status: 400, Message: "maximum context length exceeded"}
	}
	if p.next >= len(p.plan) {
		return &model.Response{Text: "done", Usage: usage}, nil
	}
	r := p.plan[p.next]
	p.next++
	r.Usage = usage
	return &r, nil
}

func (p *planProvider) stepRequests() []recorded {
	return p.requestsFor("")
}

// requestsFor returns the recorded requests of one purpose.
func (p *planProvider) requestsFor(purpose string) []recorded {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []recorded
	for _, r := range p.requests {
		if r.purpose == purpose {
			out = append(out, r)
		}
	}
	return out
}

func call(name, args string) model.Response {
	return model.Response{ToolCalls: []model.ToolCall{{Name: name, Arguments: json.RawMessage(args)}}}
}

func systemText(msgs []model.Message) string {
	if len(msgs) > 0 && msgs[0].Role == model.RoleSystem {
		return msgs[0].Text
	}
	return ""
}

// TestPinnedIntentSurvivesCompaction: over a long session whose context is
// compacted again and again, the constraint given at the start reaches
// every model call verbatim after five compactions, and a constraint a
// person adds mid-session after three more; the journal keeps every item.
func TestPinnedIntentSurvivesCompaction(t *testing.T) {
	const (
		initial = "Never email the customer directly."
		later   = "Quote every amount in euros."
	)
	plan := []model.Response{call("write_file", fmt.Sprintf(`{"path":"big.txt","content":%q}`, strings.Repeat("0123456789 abcdefghij ", 110)))}
	for i := range 14 {
		plan = append(plan, call("read_file", fmt.Sprintf(`{"path":"big.txt","offset":%d}`, i)))
	}
	plan = append(plan, call("pause", `{}`)) // the person adds a constraint here
	for i := range 14 {
		plan = append(plan, call("read_file", fmt.Sprintf(`{"path":"big.txt","offset":%d}`, 100+i)))
	}
	plan = append(plan, model.Response{Text: "All parts read."})
	p := &planProvider{plan: plan}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	sp := &lt.AgentSpec{
		Model:        lt.ModelSpec{Provider: "plan", Name: "planner", ContextWindow: 3000},
		Instructions: "Read the file in parts.",
		Tools:        []lt.ToolSpec{{Name: "write_file"}, {Name: "read_file"}, {Name: "pause", Type: "function"}},
		Compaction:   &lt.Compaction{Threshold: 0.5},
		MaxSteps:     200,
	}
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: sp, Input: "Read big.txt.", Goal: "every part read", Constraints: []string{initial},
	})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	before := len(events(t, h, s.ID, lt.EventContextCompacted))
	require.GreaterOrEqual(t, before, 5, "compactions before the pause")
	_, err = h.eng.AddConstraint(ctx, s.ID, &lt.AddConstraintRequest{Constraint: later})
	require.NoError(t, err)
	_, err = h.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"go on"`)})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	compactions := events(t, h, s.ID, lt.EventContextCompacted)
	require.GreaterOrEqual(t, len(compactions)-before, 3, "compactions after the constraint was added")
	for _, ev := range compactions {
		d := data[lt.ContextCompactedData](t, ev)
		require.Less(t, d.TokensAfter, d.TokensBefore)
		require.Contains(t, d.Summary, "Summary ")
	}
	// Every step call carries the pinned block verbatim; the later
	// constraint from the moment it was added.
	addedAt := -1
	for i, r := range p.stepRequests() {
		sys := systemText(r.msgs)
		require.Contains(t, sys, "Constraint: "+initial, "step call %d", i)
		require.Contains(t, sys, "Goal: every part read", "step call %d", i)
		if strings.Contains(sys, "Constraint: "+later) && addedAt < 0 {
			addedAt = i
		}
		if addedAt >= 0 {
			require.Contains(t, sys, "Constraint: "+later, "step call %d", i)
		}
	}
	require.Positive(t, addedAt)
	// The summarising calls carry the pinned block too, like every call
	// (the later constraint once added), so the summary keeps what matters.
	summarising := p.requestsFor(lt.PurposeCompaction)
	require.Len(t, summarising, len(compactions))
	laterSeen := false
	for i, r := range summarising {
		sys := systemText(r.msgs)
		require.Contains(t, sys, "Read the file in parts.", "compaction call %d", i)
		require.Contains(t, sys, "Goal: every part read", "compaction call %d", i)
		require.Contains(t, sys, "Constraint: "+initial, "compaction call %d", i)
		if strings.Contains(sys, "Constraint: "+later) {
			laterSeen = true
		} else {
			require.False(t, laterSeen, "compaction call %d lost the later constraint", i)
		}
	}
	require.True(t, laterSeen, "a compaction after the constraint was added carries it")
	// Compaction changes what is sent, never what is stored.
	require.Len(t, events(t, h, s.ID, lt.EventToolCompleted), len(plan)-1)
	view, err := h.eng.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, []string{initial, later}, view.Constraints)
	checkJournal(t, h.store, s.ID)
}

// TestContextTooLongCompactsOnceThenRetries: a provider's context-length
// error forces one compaction and one retry; a second one ends the turn.
func TestContextTooLongCompactsOnceThenRetries(t *testing.T) {
	plan := []model.Response{call("list_files", `{}`), call("list_files", `{"path":"."}`), {Text: "fits now"}}
	t.Run("the retry fits", func(t *testing.T) {
		p := &planProvider{plan: plan, tooLong: func(msgs []model.Message) bool {
			return len(msgs) > 4 && !strings.Contains(systemText(msgs), "Summary of the earlier conversation")
		}}
		h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
		s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{{Name: "list_files"}}}, nil)
		s = h.waitStatus(s.ID, lt.SessionIdle)
		failed := events(t, h, s.ID, lt.EventModelFailed)
		require.Len(t, failed, 1)
		require.Equal(t, "context_length_exceeded", data[lt.ModelFailedData](t, failed[0]).Kind)
		compacted := events(t, h, s.ID, lt.EventContextCompacted)
		require.Len(t, compacted, 1)
		require.True(t, data[lt.ContextCompactedData](t, compacted[0]).Forced)
		checkJournal(t, h.store, s.ID)
	})
	t.Run("still too long", func(t *testing.T) {
		p := &planProvider{plan: plan, tooLong: func(msgs []model.Message) bool {
			return len(msgs) > 4 || strings.Contains(systemText(msgs), "Summary of the earlier conversation")
		}}
		h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
		s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, Tools: []lt.ToolSpec{{Name: "list_files"}}}, nil)
		s = h.waitStatus(s.ID, lt.SessionFailed)
		require.Equal(t, lt.StopProviderError, *s.StopReason)
		require.Len(t, events(t, h, s.ID, lt.EventContextCompacted), 1)
		require.Len(t, events(t, h, s.ID, lt.EventModelFailed), 2)
	})
}

// TestAcceptanceVerification: a final answer is checked against the
// acceptance criteria by a journaled model call; unmet criteria send the
// agent back with the reasons, at most max_attempts times. The budget is
// checked before the call as before a step's (docs/api.md, Budgets).
func TestAcceptanceVerification(t *testing.T) {
	ctx := context.Background()
	const unmet = `{"criteria":[{"criterion":"mentions ACME","met":true,"reason":"it does"},{"criterion":"under 20 words","met":false,"reason":"it has 31 words"}]}`
	const met = `Verdict: {"criteria":[{"criterion":"mentions ACME","met":true,"reason":"it does"},{"criterion":"under 20 words","met":true,"reason":"6 words"}]}`
	criteria := []string{"mentions ACME", "under 20 words"}
	plan := []model.Response{{Text: "ACME " + strings.Repeat("is a company ", 10)}, {Text: "ACME renews on 31 March."}, {Text: "third"}}
	t.Run("met on the second attempt", func(t *testing.T) {
		p := &planProvider{plan: plan, verdicts: []string{unmet, met}}
		h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
		s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
			AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}}, Input: "brief", AcceptanceCriteria: criteria,
		})
		require.NoError(t, err)
		s = h.waitStatus(s.ID, lt.SessionIdle)
		verified := events(t, h, s.ID, lt.EventAcceptanceVerified)
		require.Len(t, verified, 2)
		first := data[lt.AcceptanceVerifiedData](t, verified[0]).Verdict
		require.False(t, first.AllMet)
		require.Equal(t, 1, first.Attempt)
		steps := p.stepRequests()
		require.Len(t, steps, 2)
		last := steps[1].msgs[len(steps[1].msgs)-1]
		require.Equal(t, model.RoleUser, last.Role)
		require.Contains(t, last.Text, "under 20 words: it has 31 words")
		turns, err := h.eng.ListTurns(ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, "ACME renews on 31 March.", turns[0].Output)
		require.NotNil(t, turns[0].Acceptance)
		require.True(t, turns[0].Acceptance.AllMet)
		require.Equal(t, 2, turns[0].Acceptance.Attempt)
		require.Equal(t, int64(4), s.Usage.ModelCalls, "two steps, two checks")
		checkJournal(t, h.store, s.ID)
	})
	t.Run("attempts run out", func(t *testing.T) {
		p := &planProvider{plan: plan, verdicts: []string{unmet}}
		h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
		s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
			AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}, VerifyAcceptance: &lt.VerifyAcceptance{MaxAttempts: 1}},
			Input:     "brief", AcceptanceCriteria: criteria,
		})
		require.NoError(t, err)
		s = h.waitStatus(s.ID, lt.SessionIdle)
		require.Len(t, events(t, h, s.ID, lt.EventAcceptanceVerified), 2)
		turns, err := h.eng.ListTurns(ctx, s.ID)
		require.NoError(t, err)
		require.False(t, turns[0].Acceptance.AllMet, "the verdict is recorded as it is")
		require.Equal(t, 2, turns[0].Acceptance.Attempt)
	})
	t.Run("the budget is checked before it", func(t *testing.T) {
		p := &planProvider{plan: plan, verdicts: []string{met}}
		h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
		s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
			AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}}, Input: "brief", AcceptanceCriteria: criteria,
			Budget: &lt.Budget{MaxModelCalls: 1},
		})
		require.NoError(t, err)
		s = requireStopped(t, h, s.ID, lt.StopBudgetExceeded)
		require.Equal(t, int64(1), s.Usage.ModelCalls, "the step's call, not the verification's")
		require.Len(t, events(t, h, s.ID, lt.EventModelResponded), 1, "the answer stays in the journal")
		require.Empty(t, events(t, h, s.ID, lt.EventAcceptanceVerified))
		checkJournal(t, h.store, s.ID)
	})
	t.Run("an unreadable verdict completes the turn", func(t *testing.T) {
		p := &planProvider{plan: plan, verdicts: []string{"looks fine to me"}}
		h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
		s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
			AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan"}}, Input: "brief", AcceptanceCriteria: criteria,
		})
		require.NoError(t, err)
		h.waitStatus(s.ID, lt.SessionIdle)
		turns, err := h.eng.ListTurns(ctx, s.ID)
		require.NoError(t, err)
		require.Contains(t, turns[0].Acceptance.Error, "not the expected JSON")
	})
}

// TestStreamedTextBecomesCoalescedDeltas: a streamed answer is journaled
// as a few model.delta events (not one per token) that add up to the
// complete answer in model.responded.
func TestStreamedTextBecomesCoalescedDeltas(t *testing.T) {
	h := newHarness(t)
	text := strings.Repeat("Streaming is coalesced. ", 100)
	raw, err := json.Marshal([]map[string]any{{"text": text}})
	require.NoError(t, err)
	s := create(t, h, spec(t, string(raw)), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	deltas := events(t, h, s.ID, lt.EventModelDelta)
	require.GreaterOrEqual(t, len(deltas), 4)
	require.Less(t, len(deltas), len(text)/100, "coalesced, not one event per chunk")
	var got strings.Builder
	for i, ev := range deltas {
		d := data[lt.ModelDeltaData](t, ev)
		require.Equal(t, 1, d.Step)
		if i < len(deltas)-1 {
			require.GreaterOrEqual(t, len(d.Text), 512)
		}
		got.WriteString(d.Text)
	}
	require.Equal(t, text, got.String())
	responded := events(t, h, s.ID, lt.EventModelResponded)
	require.Equal(t, text, data[lt.ModelRespondedData](t, responded[0]).Text)
	require.Less(t, deltas[len(deltas)-1].Seq, responded[0].Seq)
}

// TestAPIKeyFromTheServersEnvironment: a spec names the environment
// variable that holds its key; the provider gets the key, and nothing the
// server writes contains it.
func TestAPIKeyFromTheServersEnvironment(t *testing.T) {
	const key = "sk-canary-4f1d9a"
	p := &planProvider{plan: []model.Response{{Text: "ok"}}}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, map[string]string{"PLAN_API_KEY": key})
	h.modelKeyEnv = map[string][]string{"PLAN_API_KEY": {"api.example.com"}}
	h.restart("node-a")
	ctx := context.Background()
	s := create(t, h, &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan", APIKeyEnv: "PLAN_API_KEY"}}, nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Equal(t, key, p.requests[0].apiKey)
	for _, ev := range events(t, h, s.ID) {
		require.NotContains(t, string(ev.Data), key)
	}

	for field, m := range map[string]lt.ModelSpec{
		"agent_spec.model.api_key_env":    {Provider: "plan", APIKeyEnv: "NOT_SET_HERE"},
		"agent_spec.model.api_key_secret": {Provider: "plan", APIKeySecret: "OPENAI"},
	} {
		_, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &lt.AgentSpec{Model: m}, Input: "go"})
		requireAPIError(t, err, lt.CodeInvalidRequest, "")
		require.Contains(t, err.Error(), field)
	}
	_, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: &lt.AgentSpec{Model: lt.ModelSpec{Provider: "plan", APIKeyEnv: key}}, Input: "go"})
	requireAPIError(t, err, lt.CodeInvalidRequest, "")
	require.NotContains(t, err.Error(), key, "a key pasted where a variable name goes is not echoed")
}
