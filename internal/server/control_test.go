package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Human control through the real HTTP API: policies, approvals bound to
// their arguments, input actions, budgets and stop conditions (issue 3).

// sendEmailTool is an application tool with a schema, so edited arguments
// have something to be validated against.
var sendEmailTool = lt.ToolSpec{
	Name: "send_email", Type: "function", Effect: lt.EffectIrreversible,
	Description: "Send an email to one recipient. The message leaves the company.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"}},` +
		`"required":["to","subject"],"additionalProperties":false}`),
}

// payTool is an application tool whose amount policies look at.
var payTool = lt.ToolSpec{
	Name: "pay", Type: "function", Effect: lt.EffectIrreversible,
	Parameters: json.RawMessage(`{"type":"object","properties":{"payee":{"type":"string"},"amount_usd":{"type":"number"}},"required":["payee","amount_usd"]}`),
}

// lookupTool is a read-only application tool: the session waits on it
// without any policy involved.
var lookupTool = lt.ToolSpec{
	Name: "lookup", Type: "function", Effect: lt.EffectRead,
	Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
}

// askEmail is the policy that puts every email in front of a person.
var askEmail = lt.Policy{Name: "outbound-email", Tool: "send_email", Decision: lt.PolicyAsk, Reason: "an email leaves the company"}

// callStep is a script step asking for one tool call.
func callStep(name, args string) scripted.Step {
	return scripted.Step{ToolCalls: []scripted.ToolCall{{Name: name, Arguments: json.RawMessage(args)}}}
}

func textStep(text string) scripted.Step { return scripted.Step{Text: text} }

// agent is a scripted agent spec playing steps.
func agent(t *testing.T, tools []lt.ToolSpec, policies []lt.Policy, steps ...scripted.Step) lt.AgentSpec {
	t.Helper()
	script, err := json.Marshal(steps)
	require.NoError(t, err)
	return lt.AgentSpec{
		Model:        lt.ModelSpec{Provider: "scripted", Name: "demo", Script: script},
		Instructions: "Do the task.",
		Tools:        tools,
		Policies:     policies,
	}
}

// sessionBody is a create-session body with an inline spec.
func sessionBody(t *testing.T, spec lt.AgentSpec, budget *lt.Budget) string {
	t.Helper()
	raw, err := json.Marshal(lt.CreateSessionRequest{AgentSpec: &spec, Input: "do the task", Budget: budget})
	require.NoError(t, err)
	return string(raw)
}

// forT is h seen from a subtest, so its failures stop the subtest.
func (h *harness) forT(t *testing.T) *harness {
	c := *h
	c.t = t
	return &c
}

func (h *harness) start(body string) lt.Session {
	h.t.Helper()
	r := h.post("/v1/sessions", body)
	require.Equal(h.t, http.StatusCreated, r.status, "body: %s", r.body)
	return decode[lt.Session](h.t, r)
}

// waitAction waits until the session requires exactly one action, of type
// typ, and returns it.
func (h *harness) waitAction(sessionID string, typ lt.ActionType) lt.Action {
	h.t.Helper()
	s := h.waitStatus(sessionID, lt.SessionRequiresAction)
	require.Len(h.t, s.RequiredActions, 1)
	a := s.RequiredActions[0]
	require.Equal(h.t, typ, a.Type, "action: %+v", a)
	require.Equal(h.t, lt.ActionPending, a.Status)
	return a
}

func (h *harness) decide(sessionID, actionID, body string) *response {
	h.t.Helper()
	return h.post("/v1/sessions/"+sessionID+"/actions/"+actionID, body)
}

// decideOK decides an action and returns the resolved action.
func (h *harness) decideOK(sessionID, actionID, body string) lt.Action {
	h.t.Helper()
	r := h.decide(sessionID, actionID, body)
	require.Equal(h.t, http.StatusOK, r.status, "body: %s", r.body)
	a := decode[lt.Action](h.t, r)
	require.Equal(h.t, actionID, a.ID)
	require.Equal(h.t, lt.ActionResolved, a.Status)
	require.NotNil(h.t, a.ResolvedAt)
	return a
}

// events returns the session's whole journal.
func (h *harness) events(sessionID string) []lt.Event {
	h.t.Helper()
	raws := h.allEvents(sessionID, 500)
	out := make([]lt.Event, len(raws))
	for i, raw := range raws {
		require.NoError(h.t, json.Unmarshal(raw, &out[i]))
	}
	return out
}

func ofType(evs []lt.Event, typ string) []lt.Event {
	var out []lt.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func eventData[T any](t *testing.T, ev lt.Event) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(ev.Data, &v), "%s: %s", ev.Type, ev.Data)
	return v
}

// dataOf decodes the data of every event of type typ.
func dataOf[T any](t *testing.T, evs []lt.Event, typ string) []T {
	t.Helper()
	var out []T
	for _, ev := range ofType(evs, typ) {
		out = append(out, eventData[T](t, ev))
	}
	return out
}

func argsSHA(t *testing.T, args string) string {
	t.Helper()
	sum, err := tool.ArgumentsSHA256(json.RawMessage(args))
	require.NoError(t, err)
	return sum
}

func canonical(t *testing.T, args string) string {
	t.Helper()
	c, err := tool.CanonicalJSON(json.RawMessage(args))
	require.NoError(t, err)
	return string(c)
}

// requireFailed asserts the session failed with stopReason, on the session
// and on its turn.
func (h *harness) requireFailed(sessionID, stopReason string) lt.Session {
	h.t.Helper()
	s := h.waitStatus(sessionID, lt.SessionFailed)
	require.NotNil(h.t, s.StopReason)
	require.Equal(h.t, stopReason, *s.StopReason)
	turns := decode[lt.List[lt.Turn]](h.t, h.get("/v1/sessions/"+sessionID+"/turns"))
	last := turns.Data[len(turns.Data)-1]
	require.Equal(h.t, lt.TurnFailed, last.Status)
	require.NotNil(h.t, last.StopReason)
	require.Equal(h.t, stopReason, *last.StopReason)
	return s
}

// emailSession starts a session whose model sends one email that the
// outbound-email policy asks about, then answers "done"; it returns the
// session and its pending approval.
func (h *harness) emailSession(args string) (lt.Session, lt.Action) {
	h.t.Helper()
	spec := agent(h.t, []lt.ToolSpec{sendEmailTool}, []lt.Policy{askEmail}, callStep("send_email", args), textStep("done"))
	s := h.start(sessionBody(h.t, spec, nil))
	return s, h.waitAction(s.ID, lt.ActionApproval)
}

const ceoEmail = `{"to": "ceo@acme.com", "subject": "Q3 numbers"}`

func TestApprovalDecisions(t *testing.T) {
	t.Parallel()
	root := newHarness(t, harnessOpts{})

	t.Run("approve", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		s, a := h.emailSession(ceoEmail)

		// What a person needs to decide, and the exact arguments with their hash.
		require.Equal(t, s.ID, a.SessionID)
		require.Equal(t, "send_email", a.Tool)
		require.JSONEq(t, ceoEmail, string(a.Arguments))
		require.Equal(t, argsSHA(t, ceoEmail), a.ArgumentsSHA256)
		// In plain words, who is affected first; the call as code beside it.
		require.Equal(t, "Email to ceo@acme.com: “Q3 numbers”", a.Summary)
		require.Equal(t, `send_email(subject="Q3 numbers", to="ceo@acme.com")`, a.Call)
		require.Contains(t, strings.Join(a.Evidence, "\n"), "What send_email does: Send an email to one recipient")
		require.Equal(t, []string{"ceo@acme.com"}, a.Affects)
		require.Equal(t, "Your application performs send_email once approved: Longhaul cannot see or limit what it does; it is irreversible: it cannot be undone, and may not be repeated safely", a.Consequence)
		require.Equal(t, "outbound-email", a.Policy)
		require.NotEmpty(t, a.Evidence)
		require.Contains(t, strings.Join(a.Evidence, "\n"), "an email leaves the company")
		require.Nil(t, a.ExpiresAt)
		require.Equal(t, s.CurrentTurnID, a.TurnID)

		got := h.decideOK(s.ID, a.ID, `{"decision": "approve"}`)
		require.JSONEq(t, `{"decision": "approve"}`, string(got.Resolution))

		// The approved call runs with the approved arguments: the
		// application is asked to perform it.
		fc := h.waitAction(s.ID, lt.ActionFunctionCall)
		require.JSONEq(t, ceoEmail, string(fc.Arguments))
		require.Equal(t, a.ArgumentsSHA256, fc.ArgumentsSHA256)
		h.decideOK(s.ID, fc.ID, `{"output": {"sent": true}}`)
		h.waitStatus(s.ID, lt.SessionIdle)

		evs := h.events(s.ID)
		decided := dataOf[lt.PolicyDecidedData](t, evs, lt.EventPolicyDecided)
		require.Len(t, decided, 1)
		require.Equal(t, "outbound-email", decided[0].Rule)
		require.Equal(t, lt.PolicyAsk, decided[0].Decision)
		require.Equal(t, "an email leaves the company", decided[0].Reason)
		resolved := dataOf[lt.ActionResolvedData](t, evs, lt.EventActionResolved)
		require.Len(t, resolved, 2)
		require.Equal(t, a.ID, resolved[0].ActionID)
		require.Equal(t, a.ArgumentsSHA256, resolved[0].ArgumentsSHA256, "the approval binds the arguments shown")
		require.Empty(t, resolved[0].Arguments, "not edited")
		completed := dataOf[lt.ToolCompletedData](t, evs, lt.EventToolCompleted)
		require.Len(t, completed, 1)
		require.JSONEq(t, `{"sent": true}`, string(completed[0].Output))
	})

	t.Run("approve with the hash of the arguments seen", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		s, a := h.emailSession(ceoEmail)

		// A stale view (another hash) is a conflict, and nothing is decided.
		stale := argsSHA(t, `{"to": "cfo@acme.com", "subject": "Q3 numbers"}`)
		e := requireError(t, h.decide(s.ID, a.ID, `{"decision": "approve", "arguments_sha256": "`+stale+`"}`),
			http.StatusConflict, lt.CodeConflict, "")
		require.Contains(t, e.Message, a.ArgumentsSHA256)
		require.Equal(t, a, h.waitAction(s.ID, lt.ActionApproval), "still pending, unchanged")

		h.decideOK(s.ID, a.ID, `{"decision": "approve", "arguments_sha256": "`+a.ArgumentsSHA256+`"}`)
		fc := h.waitAction(s.ID, lt.ActionFunctionCall)
		require.Equal(t, a.ArgumentsSHA256, fc.ArgumentsSHA256)
		require.Len(t, ofType(h.events(s.ID), lt.EventActionResolved), 1)
	})

	t.Run("approve edited arguments", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		s, a := h.emailSession(ceoEmail)
		edited := `{"subject": "Q3 numbers (draft)", "to": "cfo@acme.com"}`

		got := h.decideOK(s.ID, a.ID, `{"decision": "approve", "arguments": `+edited+`}`)
		require.JSONEq(t, ceoEmail, string(got.Arguments), "the action keeps what was asked")

		// The call that runs is the edited one, bound to the edited hash.
		fc := h.waitAction(s.ID, lt.ActionFunctionCall)
		require.JSONEq(t, edited, string(fc.Arguments))
		require.Equal(t, argsSHA(t, edited), fc.ArgumentsSHA256)
		resolved := dataOf[lt.ActionResolvedData](t, h.events(s.ID), lt.EventActionResolved)
		require.Len(t, resolved, 1)
		require.Equal(t, argsSHA(t, edited), resolved[0].ArgumentsSHA256, "the approval re-binds to the edit")
		require.Equal(t, canonical(t, edited), string(resolved[0].Arguments))

		h.decideOK(s.ID, fc.ID, `{"output": "sent"}`)
		h.waitStatus(s.ID, lt.SessionIdle)
		effects := decode[lt.List[lt.Effect]](t, h.get("/v1/sessions/"+s.ID+"/effects"))
		require.Len(t, effects.Data, 1)
		require.Equal(t, argsSHA(t, edited), effects.Data[0].ArgumentsSHA256, "the ledger holds what ran")
	})

	t.Run("invalid edits name the field", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		s, a := h.emailSession(ceoEmail)
		for _, tc := range []struct{ body, field string }{
			{`{"decision": "approve", "arguments": {"subject": "no recipient"}}`, "arguments.to"},
			{`{"decision": "approve", "arguments": {"to": 5, "subject": "x"}}`, "arguments.to"},
			{`{"decision": "approve", "arguments": {"to": "a@b.co", "subject": ["x"]}}`, "arguments.subject"},
			{`{"decision": "approve", "arguments": "to ceo"}`, "arguments"},
			{`{"decision": "reject", "reason": "no", "arguments": ` + ceoEmail + `}`, "arguments"},
			{`{"decision": "maybe"}`, "decision"},
			{`{"decision": "approve", "answer": "yes"}`, "decision"},
		} {
			requireError(t, h.decide(s.ID, a.ID, tc.body), http.StatusBadRequest, lt.CodeInvalidRequest, tc.field)
		}
		require.Equal(t, a, h.waitAction(s.ID, lt.ActionApproval), "a bad decision decides nothing")
		require.Empty(t, ofType(h.events(s.ID), lt.EventActionResolved))
	})

	t.Run("reject with a reason", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		s, a := h.emailSession(ceoEmail)

		requireError(t, h.decide(s.ID, a.ID, `{"decision": "reject"}`), http.StatusBadRequest, lt.CodeInvalidRequest, "reason")
		requireError(t, h.decide(s.ID, a.ID, `{"decision": "reject", "reason": "  "}`), http.StatusBadRequest, lt.CodeInvalidRequest, "reason")
		got := h.decideOK(s.ID, a.ID, `{"decision": "reject", "reason": "the CEO is on leave; write to the CFO"}`)
		require.JSONEq(t, `{"decision": "reject", "reason": "the CEO is on leave; write to the CFO"}`, string(got.Resolution))

		// The reason goes back to the model as the tool's result, and the
		// turn goes on.
		h.waitStatus(s.ID, lt.SessionIdle)
		evs := h.events(s.ID)
		failed := dataOf[lt.ToolFailedData](t, evs, lt.EventToolFailed)
		require.Len(t, failed, 1)
		require.Equal(t, lt.RefusedRejected, failed[0].Refused)
		require.Contains(t, failed[0].Error, "the CEO is on leave; write to the CFO")
		require.Empty(t, ofType(evs, lt.EventToolStarted), "a rejected call never starts")
		require.Len(t, ofType(evs, lt.EventModelResponded), 2, "the model answered after the rejection")
	})

	t.Run("stop", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		s, a := h.emailSession(ceoEmail)
		h.decideOK(s.ID, a.ID, `{"decision": "stop", "reason": "wrong task"}`)
		h.requireFailed(s.ID, lt.StopStopped)

		evs := h.events(s.ID)
		failed := dataOf[lt.ToolFailedData](t, evs, lt.EventToolFailed)
		require.Len(t, failed, 1)
		require.Equal(t, lt.RefusedStopped, failed[0].Refused)
		turnFailed := dataOf[lt.TurnFailedData](t, evs, lt.EventTurnFailed)
		require.Len(t, turnFailed, 1)
		require.Contains(t, turnFailed[0].Error, "wrong task")
		require.Len(t, ofType(evs, lt.EventModelResponded), 1, "no model call after a stop")
		require.Empty(t, ofType(evs, lt.EventToolStarted))
	})
}

// TestEditedWriteIsWhatRuns edits a workspace write and reads the workspace
// back through later calls of the same turn.
func TestEditedWriteIsWhatRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	spec := agent(t,
		[]lt.ToolSpec{{Name: "write_file"}, {Name: "read_file"}},
		[]lt.Policy{{Name: "writes", Tool: "write_file", Decision: lt.PolicyAsk}},
		callStep("write_file", `{"path": "draft.md", "content": "first draft"}`),
		callStep("read_file", `{"path": "final.md"}`),
		callStep("read_file", `{"path": "draft.md"}`),
		textStep("done"),
	)
	s := h.start(sessionBody(t, spec, nil))
	a := h.waitAction(s.ID, lt.ActionApproval)
	require.Contains(t, a.Affects, "workspace file draft.md")
	require.Equal(t, "Changes only the workspace file draft.md; nothing leaves the workspace, and it is safe to repeat: running it again has the same effect", a.Consequence)

	requireError(t, h.decide(s.ID, a.ID, `{"decision": "approve", "arguments": {"path": "final.md"}}`),
		http.StatusBadRequest, lt.CodeInvalidRequest, "arguments.content")
	h.decideOK(s.ID, a.ID, `{"decision": "approve", "arguments": {"path": "final.md", "content": "approved text"}}`)
	h.waitStatus(s.ID, lt.SessionIdle)

	evs := h.events(s.ID)
	completed := dataOf[lt.ToolCompletedData](t, evs, lt.EventToolCompleted)
	require.Len(t, completed, 2, "the write and the read of final.md")
	require.Equal(t, "write_file", completed[0].Tool)
	require.Equal(t, "read_file", completed[1].Tool)
	var read tool.ReadFileOutput
	require.NoError(t, json.Unmarshal(completed[1].Output, &read))
	require.Equal(t, "final.md", read.Path)
	require.Equal(t, "approved text", read.Content)
	failed := dataOf[lt.ToolFailedData](t, evs, lt.EventToolFailed)
	require.Len(t, failed, 1, "draft.md was never written")
	require.Equal(t, "read_file", failed[0].Tool)
	require.Empty(t, failed[0].Refused)

	// The ledger's row is the edited write, whole: the arguments a person
	// approved, not the ones the model asked for.
	effects := decode[lt.List[lt.Effect]](t, h.get("/v1/sessions/"+s.ID+"/effects"))
	require.Equal(t, "Write final.md (13 bytes)", effects.Data[0].Summary)
	require.Equal(t, "wrote 13 bytes to final.md", effects.Data[0].Result)
	whole := decode[lt.Effect](t, h.get("/v1/sessions/"+s.ID+"/effects/"+effects.Data[0].ID))
	require.JSONEq(t, `{"path": "final.md", "content": "approved text"}`, string(whole.Arguments))
	require.JSONEq(t, string(completed[0].Output), string(whole.Output))
}

func TestDecidingTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})

	s, a := h.emailSession(ceoEmail)
	first := h.decide(s.ID, a.ID, `{"decision": "reject", "reason": "not now"}`)
	require.Equal(t, http.StatusOK, first.status, "body: %s", first.body)
	h.waitStatus(s.ID, lt.SessionIdle)

	// The same body (in another spelling) returns the first result.
	again := h.decide(s.ID, a.ID, `{"reason":"not now","decision":"reject"}`)
	require.Equal(t, http.StatusOK, again.status, "body: %s", again.body)
	require.Equal(t, decode[lt.Action](t, first), decode[lt.Action](t, again))

	// Anything else is a conflict, and changes nothing.
	for _, body := range []string{
		`{"decision": "reject", "reason": "never"}`,
		`{"decision": "approve"}`,
		`{"decision": "stop"}`,
	} {
		requireError(t, h.decide(s.ID, a.ID, body), http.StatusConflict, lt.CodeConflict, "")
	}
	evs := h.events(s.ID)
	require.Len(t, ofType(evs, lt.EventActionResolved), 1)
	require.Len(t, ofType(evs, lt.EventToolFailed), 1)

	// An edited approval repeats the same way.
	s2, a2 := h.emailSession(ceoEmail)
	edit := `{"decision": "approve", "arguments": {"to": "cfo@acme.com", "subject": "Q3"}}`
	first = h.decide(s2.ID, a2.ID, edit)
	require.Equal(t, http.StatusOK, first.status, "body: %s", first.body)
	h.waitAction(s2.ID, lt.ActionFunctionCall)
	again = h.decide(s2.ID, a2.ID, edit)
	require.Equal(t, http.StatusOK, again.status, "body: %s", again.body)
	require.Equal(t, decode[lt.Action](t, first), decode[lt.Action](t, again))
	requireError(t, h.decide(s2.ID, a2.ID, `{"decision": "approve"}`), http.StatusConflict, lt.CodeConflict, "")
	require.Len(t, ofType(h.events(s2.ID), lt.EventActionResolved), 1)
}

func TestDecidingAnotherSessionsAction(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s1, a1 := h.emailSession(ceoEmail)
	s2, a2 := h.emailSession(ceoEmail)
	require.NotEqual(t, a1.ID, a2.ID)

	e := requireError(t, h.decide(s2.ID, a1.ID, `{"decision": "approve"}`), http.StatusNotFound, lt.CodeNotFound, "")
	require.Contains(t, e.Message, a1.ID)
	requireError(t, h.decide(s2.ID, "act_missing", `{"decision": "approve"}`), http.StatusNotFound, lt.CodeNotFound, "")
	requireError(t, h.decide("ses_missing", a1.ID, `{"decision": "approve"}`), http.StatusNotFound, lt.CodeNotFound, "")

	// Neither session moved.
	require.Equal(t, a1, h.waitAction(s1.ID, lt.ActionApproval))
	require.Equal(t, a2, h.waitAction(s2.ID, lt.ActionApproval))
}

// postRaw sends a decision from a goroutine that is not the test's: it
// returns errors instead of failing the test.
func postRaw(client *http.Client, url, body string) (int, []byte, error) {
	res, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	return res.StatusCode, data, err
}

func TestConcurrentDecisionsOneWins(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s, a := h.emailSession(ceoEmail)

	bodies := []string{`{"decision": "approve"}`, `{"decision": "reject", "reason": "too late"}`}
	const n = 20
	type result struct {
		body   int
		status int
		data   []byte
		err    error
	}
	results := make([]result, n)
	url := h.ts.URL + "/v1/sessions/" + s.ID + "/actions/" + a.ID
	startLine := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startLine
			status, data, err := postRaw(h.ts.Client(), url, bodies[i%2])
			results[i] = result{i % 2, status, data, err}
		}()
	}
	close(startLine)
	wg.Wait()

	// One body won: every request with it gets the same resolved action,
	// every request with the other a conflict.
	winner := -1
	var won []byte
	for _, r := range results {
		require.NoError(t, r.err)
		if r.status != http.StatusOK {
			continue
		}
		require.True(t, winner == -1 || winner == r.body, "both decisions succeeded: %s", r.data)
		winner = r.body
		if won == nil {
			won = r.data
		}
		require.Equal(t, decode[lt.Action](t, &response{body: won}), decode[lt.Action](t, &response{body: r.data}))
	}
	require.NotEqual(t, -1, winner, "no decision succeeded")
	for _, r := range results {
		if r.body != winner {
			require.Equal(t, http.StatusConflict, r.status, "body: %s", r.data)
		}
	}
	var d lt.Decision
	require.NoError(t, json.Unmarshal(decode[lt.Action](t, &response{body: won}).Resolution, &d))
	require.Equal(t, []string{"approve", "reject"}[winner], d.Decision)

	resolved := dataOf[lt.ActionResolvedData](t, h.events(s.ID), lt.EventActionResolved)
	require.Len(t, resolved, 1, "exactly one decision is in the journal")
	require.Equal(t, d, resolved[0].Decision)

	// The session goes on with the decision that won.
	if winner == 0 {
		fc := h.waitAction(s.ID, lt.ActionFunctionCall)
		h.decideOK(s.ID, fc.ID, `{"output": "sent"}`)
	}
	h.waitStatus(s.ID, lt.SessionIdle)
}

// offsetClock is the system clock moved forward by a settable offset:
// timers run in real time, and a test jumps the engine's "now".
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().UTC().Add(c.offset)
}

func (c *offsetClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (c *offsetClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// expiringEmailSession starts an email session whose approval expires
// after a minute, and returns it with its pending approval.
func (h *harness) expiringEmailSession() (lt.Session, lt.Action) {
	h.t.Helper()
	policy := askEmail
	policy.ExpiresInSeconds = 60
	spec := agent(h.t, []lt.ToolSpec{sendEmailTool}, []lt.Policy{policy}, callStep("send_email", ceoEmail), textStep("done"))
	s := h.start(sessionBody(h.t, spec, nil))
	return s, h.waitAction(s.ID, lt.ActionApproval)
}

// requireExpired asserts the session's approval expired exactly once, the
// call was refused without running, and the turn went on to its end.
func (h *harness) requireExpired(sessionID string) {
	h.t.Helper()
	h.waitStatus(sessionID, lt.SessionIdle)
	evs := h.events(sessionID)
	failed := dataOf[lt.ToolFailedData](h.t, evs, lt.EventToolFailed)
	require.Len(h.t, failed, 1)
	require.Equal(h.t, lt.RefusedApprovalExpired, failed[0].Refused)
	require.Contains(h.t, failed[0].Error, "expired")
	require.Empty(h.t, ofType(evs, lt.EventToolStarted), "an expired approval never runs the call")
	resolved := dataOf[lt.ActionResolvedData](h.t, evs, lt.EventActionResolved)
	require.Len(h.t, resolved, 1)
	require.Equal(h.t, lt.DecisionExpired, resolved[0].Decision.Decision)
	require.Len(h.t, ofType(evs, lt.EventModelResponded), 2, "the model was told, and answered")
}

func TestExpiredApprovalIsRefused(t *testing.T) {
	t.Parallel()
	clock := &offsetClock{}
	h := newHarness(t, harnessOpts{clock: clock})
	s, a := h.expiringEmailSession()
	require.NotNil(t, a.ExpiresAt)
	require.InDelta(t, 60*time.Second, a.ExpiresAt.Sub(a.CreatedAt), float64(time.Millisecond))

	// The session is parked (no lease held) while its clock jumps; the
	// worker wakes at the expiry and refuses the call by itself.
	clock.advance(61 * time.Second)
	h.requireExpired(s.ID)

	// Deciding it now, whatever the decision, is a conflict.
	e := requireError(t, h.decide(s.ID, a.ID, `{"decision": "approve"}`), http.StatusConflict, lt.CodeConflict, "")
	require.Contains(t, e.Message, "expired")
	requireError(t, h.decide(s.ID, a.ID, `{"decision": "reject", "reason": "late"}`), http.StatusConflict, lt.CodeConflict, "")
	require.Len(t, ofType(h.events(s.ID), lt.EventActionResolved), 1)
}

// TestDecisionRacingExpiry decides approvals just after they expired, while
// the worker wakes to expire them too: whoever gets there first, the
// decision is refused, the call is refused once, and the turn goes on.
func TestDecisionRacingExpiry(t *testing.T) {
	t.Parallel()
	clock := &offsetClock{}
	h := newHarness(t, harnessOpts{clock: clock})
	const n = 8
	sessions := make([]lt.Session, n)
	actions := make([]lt.Action, n)
	for i := range n {
		sessions[i], actions[i] = h.expiringEmailSession()
	}

	clock.advance(61 * time.Second)
	type result struct {
		status int
		data   []byte
		err    error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := h.ts.URL + "/v1/sessions/" + sessions[i].ID + "/actions/" + actions[i].ID
			status, data, err := postRaw(h.ts.Client(), url, `{"decision": "approve"}`)
			results[i] = result{status, data, err}
		}()
	}
	wg.Wait()
	for i, r := range results {
		require.NoError(t, r.err)
		require.Equal(t, http.StatusConflict, r.status, "body: %s", r.data)
		h.requireExpired(sessions[i].ID)
	}
}

func TestAskHuman(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	spec := agent(t, []lt.ToolSpec{{Name: "ask_human"}}, nil,
		callStep("ask_human", `{"question": "Which region?", "choices": ["eu", "us"]}`),
		callStep("ask_human", `{"question": "Anything else to know?"}`),
		textStep("done"),
	)
	s := h.start(sessionBody(t, spec, nil))

	a := h.waitAction(s.ID, lt.ActionInput)
	require.Equal(t, "Which region?", a.Question)
	require.Equal(t, []string{"eu", "us"}, a.Choices)
	e := requireError(t, h.decide(s.ID, a.ID, `{"answer": "asia"}`), http.StatusBadRequest, lt.CodeInvalidRequest, "answer")
	require.Contains(t, e.Message, "eu, us")
	requireError(t, h.decide(s.ID, a.ID, `{"answer": ""}`), http.StatusBadRequest, lt.CodeInvalidRequest, "answer")
	requireError(t, h.decide(s.ID, a.ID, `{"decision": "approve"}`), http.StatusBadRequest, lt.CodeInvalidRequest, "decision")
	h.decideOK(s.ID, a.ID, `{"answer": "eu"}`)

	b := h.waitAction(s.ID, lt.ActionInput)
	require.Equal(t, "Anything else to know?", b.Question)
	require.Empty(t, b.Choices)
	requireError(t, h.decide(s.ID, b.ID, `{"answer": "   "}`), http.StatusBadRequest, lt.CodeInvalidRequest, "answer")
	h.decideOK(s.ID, b.ID, `{"answer": "the budget is tight"}`)
	h.waitStatus(s.ID, lt.SessionIdle)

	completed := dataOf[lt.ToolCompletedData](t, h.events(s.ID), lt.EventToolCompleted)
	require.Len(t, completed, 2)
	require.JSONEq(t, `{"answer": "eu"}`, string(completed[0].Output))
	require.JSONEq(t, `{"answer": "the budget is tight"}`, string(completed[1].Output))
}

func TestDenyPolicies(t *testing.T) {
	t.Parallel()
	root := newHarness(t, harnessOpts{})

	t.Run("condition on the arguments", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		spec := agent(t, []lt.ToolSpec{payTool},
			[]lt.Policy{{Name: "big-payments", Tool: "pay", When: "args.amount_usd > 10", Decision: lt.PolicyDeny, Reason: "payments over $10 need a purchase order"}},
			callStep("pay", `{"payee": "acme", "amount_usd": 5}`),
			callStep("pay", `{"payee": "acme", "amount_usd": 25.5}`),
			textStep("done"),
		)
		s := h.start(sessionBody(t, spec, nil))
		fc := h.waitAction(s.ID, lt.ActionFunctionCall)
		require.JSONEq(t, `{"payee": "acme", "amount_usd": 5}`, string(fc.Arguments), "a small payment is allowed")
		h.decideOK(s.ID, fc.ID, `{"output": {"paid": 5}}`)
		h.waitStatus(s.ID, lt.SessionIdle)

		evs := h.events(s.ID)
		decided := dataOf[lt.PolicyDecidedData](t, evs, lt.EventPolicyDecided)
		require.Len(t, decided, 1, "the policy did not match the small payment")
		require.Equal(t, lt.PolicyDecidedData{Step: 2, Index: 0, CallID: decided[0].CallID, Tool: "pay", Decision: lt.PolicyDeny,
			Rule: "big-payments", Reason: "payments over $10 need a purchase order"}, decided[0])
		failed := dataOf[lt.ToolFailedData](t, evs, lt.EventToolFailed)
		require.Len(t, failed, 1)
		require.Equal(t, lt.RefusedPolicy, failed[0].Refused)
		require.Equal(t, decided[0].CallID, failed[0].CallID)
		require.Contains(t, failed[0].Error, "big-payments")
		require.Contains(t, failed[0].Error, "payments over $10 need a purchase order")
		effects := decode[lt.List[lt.Effect]](t, h.get("/v1/sessions/"+s.ID+"/effects"))
		require.Len(t, effects.Data, 1, "a denied call never reaches the ledger")
	})

	t.Run("trajectory rule", func(t *testing.T) {
		t.Parallel()
		h := root.forT(t)
		spec := agent(t, []lt.ToolSpec{sendEmailTool},
			[]lt.Policy{{Name: "two-emails", Tool: "send_email", When: `count(effects, e.tool == "send_email") >= 2`, Decision: lt.PolicyDeny, Reason: "at most two emails per session"}},
			callStep("send_email", `{"to": "a@acme.com", "subject": "1"}`),
			callStep("send_email", `{"to": "b@acme.com", "subject": "2"}`),
			callStep("send_email", `{"to": "c@acme.com", "subject": "3"}`),
			textStep("done"),
		)
		s := h.start(sessionBody(t, spec, nil))
		for _, to := range []string{"a@acme.com", "b@acme.com"} {
			fc := h.waitAction(s.ID, lt.ActionFunctionCall)
			require.Contains(t, string(fc.Arguments), to)
			h.decideOK(s.ID, fc.ID, `{"output": "sent"}`)
		}
		h.waitStatus(s.ID, lt.SessionIdle)

		evs := h.events(s.ID)
		decided := dataOf[lt.PolicyDecidedData](t, evs, lt.EventPolicyDecided)
		require.Len(t, decided, 1)
		require.Equal(t, 3, decided[0].Step)
		require.Equal(t, "two-emails", decided[0].Rule)
		require.Equal(t, lt.PolicyDeny, decided[0].Decision)
		failed := dataOf[lt.ToolFailedData](t, evs, lt.EventToolFailed)
		require.Len(t, failed, 1)
		require.Equal(t, lt.RefusedPolicy, failed[0].Refused)
		require.Contains(t, failed[0].Error, "at most two emails per session")
		require.Len(t, ofType(evs, lt.EventToolStarted), 2)
	})
}

func TestInvalidPolicyExpression(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for _, tc := range []struct{ when, message string }{
		{"args.amount_usd >", "Syntax error"},
		{`count(effects, e.tool == "send_email")`, "bool"},
		{"amount_usd > 10", "undeclared reference"},
	} {
		spec := agent(t, []lt.ToolSpec{sendEmailTool},
			[]lt.Policy{{Tool: "send_email", When: tc.when, Decision: lt.PolicyDeny}}, textStep("done"))

		raw, err := json.Marshal(lt.PutAgentRequest{Name: "mailer", Spec: spec})
		require.NoError(t, err)
		e := requireError(t, h.post("/v1/agents", string(raw)), http.StatusBadRequest, lt.CodeInvalidRequest, "spec.policies[0].when")
		require.Contains(t, e.Message, tc.message)

		e = requireError(t, h.post("/v1/sessions", sessionBody(t, spec, nil)), http.StatusBadRequest, lt.CodeInvalidRequest, "agent_spec.policies[0].when")
		require.Contains(t, e.Message, tc.message)
	}
	requireError(t, h.get("/v1/agents/mailer"), http.StatusNotFound, lt.CodeNotFound, "")
	require.Empty(t, decode[lt.List[lt.Session]](t, h.get("/v1/sessions")).Data, "no session was created")
}

func TestDecisionIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s, a := h.emailSession(ceoEmail)
	path := "/v1/sessions/" + s.ID + "/actions/" + a.ID
	key := map[string]string{"Idempotency-Key": "decide-1"}
	approve := []byte(`{"decision": "approve"}`)

	first := h.do(http.MethodPost, path, approve, key)
	require.Equal(t, http.StatusOK, first.status, "body: %s", first.body)
	require.Empty(t, first.header.Get("Idempotent-Replayed"))
	fc := h.waitAction(s.ID, lt.ActionFunctionCall)

	// Replayed byte for byte, even after the session moved on.
	again := h.do(http.MethodPost, path, approve, key)
	require.Equal(t, http.StatusOK, again.status, "body: %s", again.body)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.body), string(again.body))

	other := h.do(http.MethodPost, path, []byte(`{"decision": "reject", "reason": "changed my mind"}`), key)
	requireError(t, other, http.StatusConflict, lt.CodeConflict, "")
	require.Empty(t, other.header.Get("Idempotent-Replayed"))

	// The same key on another action is another request.
	out := h.do(http.MethodPost, "/v1/sessions/"+s.ID+"/actions/"+fc.ID, []byte(`{"output": "sent"}`), key)
	require.Equal(t, http.StatusOK, out.status, "body: %s", out.body)
	require.Empty(t, out.header.Get("Idempotent-Replayed"))
	h.waitStatus(s.ID, lt.SessionIdle)
	require.Len(t, ofType(h.events(s.ID), lt.EventActionResolved), 2)
}
