package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Steering a running turn (steer.go). The scripted provider plays the
// script; its delay_ms waits on a gate the test opens (scripted.Config
// After), so a call lasts exactly as long as the test wants, and the
// provider records every request it was sent.

// gatedScripted is the scripted provider whose delays end when the test
// opens the gate, recording the requests it receives.
type gatedScripted struct {
	*scripted.Provider
	gate     chan time.Time
	openOnce sync.Once
	mu       sync.Mutex
	requests []*model.Request
}

func newGatedScripted() *gatedScripted {
	p := &gatedScripted{gate: make(chan time.Time)}
	p.Provider = scripted.New(&scripted.Config{After: func(time.Duration) <-chan time.Time { return p.gate }})
	return p
}

// open ends every delay, now and later.
func (p *gatedScripted) open() { p.openOnce.Do(func() { close(p.gate) }) }

func (p *gatedScripted) Respond(ctx context.Context, req *model.Request) (*model.Response, error) {
	p.mu.Lock()
	c := *req
	c.Messages = append([]model.Message(nil), req.Messages...)
	p.requests = append(p.requests, &c)
	p.mu.Unlock()
	return p.Provider.Respond(ctx, req)
}

// sent returns the requests received so far.
func (p *gatedScripted) sent() []*model.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*model.Request(nil), p.requests...)
}

func newSteerHarness(t *testing.T) (*harness, *gatedScripted) {
	t.Helper()
	p := newGatedScripted()
	t.Cleanup(p.open) // a call still waiting ends with the test
	return newHarnessWith(t, map[string]model.Provider{"scripted": p}, nil), p
}

func steer(t *testing.T, h *harness, id, input string, interrupt bool) *lt.Session {
	t.Helper()
	s, err := h.eng.SteerSession(context.Background(), id, &lt.SteerRequest{Input: input, Interrupt: interrupt})
	require.NoError(t, err)
	return s
}

// waitEvents polls until the session journaled n events of typ.
func waitEvents(t *testing.T, h *harness, id, typ string, n int) []lt.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs := events(t, h, id, typ)
		if len(evs) >= n {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s journaled %d %s, want %d", id, len(evs), typ, n)
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

func user(text string) model.Message { return model.Message{Role: model.RoleUser, Text: text} }

// roles lists the messages' roles and, for user messages, their text: what
// a context looks like, in order.
func roles(msgs []model.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role)
		if m.Role == model.RoleUser {
			out[i] += ": " + m.Text
		}
	}
	return out
}

// TestSteerReachesTheNextCall: two messages sent while a model call runs
// do not disturb it; the next call carries both verbatim, in order, as
// user messages after the tool result of the step they came during; a
// later turn's context (built by another claim, from the journal alone)
// has them where they were sent: before the answer of the call that
// carried them.
func TestSteerReachesTheNextCall(t *testing.T) {
	h, p := newSteerHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"delay_ms":60000,"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"done as asked"}]`,
		lt.ToolSpec{Name: "list_files"}), nil)
	waitEvent(t, h, s.ID, lt.EventModelRequested)
	const first, second = "Use British spelling.", "  And keep it short:\n  three lines at most.  "
	steer(t, h, s.ID, first, false)
	steer(t, h, s.ID, second, false)
	steered := events(t, h, s.ID, lt.EventTurnSteered)
	require.Len(t, steered, 2)
	d := data[lt.TurnSteeredData](t, steered[1])
	require.Equal(t, second, d.Input, "journaled verbatim")
	require.Equal(t, s.CurrentTurnID, d.TurnID)
	require.False(t, d.Interrupt)
	p.open()
	s = h.waitStatus(s.ID, lt.SessionIdle)

	require.Empty(t, events(t, h, s.ID, lt.EventModelFailed), "the call in flight was not cut")
	reqs := p.sent()
	require.Len(t, reqs, 2)
	require.NotContains(t, roles(reqs[0].Messages), "user: "+first)
	next := reqs[1].Messages
	n := len(next)
	require.Equal(t, model.RoleAssistant, next[n-4].Role)
	require.Equal(t, model.RoleTool, next[n-3].Role, "after the result of the step they came during")
	require.Equal(t, []model.Message{user(first), user(second)}, next[n-2:], "verbatim and in order")
	requested := events(t, h, s.ID, lt.EventModelRequested)
	require.Equal(t, 0, data[lt.ModelRequestedData](t, requested[0]).Steers)
	require.Equal(t, 2, data[lt.ModelRequestedData](t, requested[1]).Steers)

	// A follow-up turn: a new claim rebuilds the context from the journal.
	_, err := h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "now the summary"})
	require.NoError(t, err)
	h.waitStatus(s.ID, lt.SessionIdle)
	reqs = p.sent()
	require.Len(t, reqs, 3)
	later := reqs[2].Messages
	require.Equal(t, next, later[:n], "the later context is the one sent plus what came after")
	require.Equal(t, model.RoleAssistant, later[n].Role)
	require.Equal(t, "done as asked", later[n].Text)
	require.Equal(t, user("now the summary"), later[n+1])
	checkJournal(t, h.store, s.ID)
}

// TestSteerDuringTheFinalAnswer: a message sent while the model writes its
// final answer is read before the turn may end: the model is called again,
// and its second answer ends the turn.
func TestSteerDuringTheFinalAnswer(t *testing.T) {
	h, p := newSteerHarness(t)
	s := create(t, h, spec(t, `[{"delay_ms":60000,"text":"the report, in French"},{"text":"the report, in English"}]`), nil)
	waitEvent(t, h, s.ID, lt.EventModelRequested)
	steer(t, h, s.ID, "Write it in English.", false)
	p.open()
	s = h.waitStatus(s.ID, lt.SessionIdle)

	requireAnsweredAfterTheSteer(t, h, s.ID, p.sent())
	checkJournal(t, h.store, s.ID)
}

// requireAnsweredAfterTheSteer checks a turn steered with "Write it in
// English." as the model gave its final answer "the report, in French":
// the model was called once more, the answer and then the message ending
// its context, and the second answer ended the one turn.
func requireAnsweredAfterTheSteer(t *testing.T, h *harness, id string, reqs []*model.Request) {
	t.Helper()
	require.Len(t, reqs, 2, "the first answer was kept, not asked for again")
	last := reqs[1].Messages
	require.Equal(t, "the report, in French", last[len(last)-2].Text)
	require.Equal(t, user("Write it in English."), last[len(last)-1])
	turns, err := h.eng.ListTurns(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, turns, 1)
	require.Equal(t, "the report, in English", turns[0].Output)
}

// steerBeforeEnd is the runner's store: just before the append that ends
// a turn (after the runner's last look at the session), it steers the
// session once, through another engine (an API node), so that append
// meets a write it has not read. With onlyChildren, only a sub-agent's
// turn is steered.
type steerBeforeEnd struct {
	store.Store
	once         sync.Once
	steer        func(sessionID string)
	onlyChildren bool
}

func (s *steerBeforeEnd) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	for _, ev := range p.Events {
		if ev.Type == lt.EventTurnCompleted && (!s.onlyChildren || s.isChild(ctx, p.SessionID)) {
			s.once.Do(func() { s.steer(p.SessionID) })
		}
	}
	return s.Store.EventAppend(ctx, p)
}

func (s *steerBeforeEnd) isChild(ctx context.Context, id string) bool {
	row, err := s.Store.SessionGet(ctx, id)
	return err == nil && row.ParentID != ""
}

// TestSteerJustBeforeTheTurnEnds: a message that lands after the runner
// last looked at the session, as it ends the turn, still reaches the
// model before the turn may end, and the final answer it had is not lost:
// the model is called twice in all, not asked the same step again.
func TestSteerJustBeforeTheTurnEnds(t *testing.T) {
	p := newGatedScripted()
	h := newHarnessThrough(t, p, 0, func(h *harness) store.Store {
		api := apiNode(t, h, p)
		return &steerBeforeEnd{Store: h.store, steer: func(id string) {
			_, err := api.SteerSession(context.Background(), id, &lt.SteerRequest{Input: "Write it in English."})
			require.NoError(t, err)
		}}
	})

	s := create(t, h, spec(t, `[{"text":"the report, in French"},{"text":"the report, in English"}]`), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	requireAnsweredAfterTheSteer(t, h, s.ID, p.sent())
	responded := events(t, h, s.ID, lt.EventModelResponded)
	require.Len(t, responded, 2)
	require.Equal(t, 1, data[lt.ModelRespondedData](t, responded[1]).Position)
	require.Len(t, events(t, h, s.ID, lt.EventTurnCompleted), 1)
	checkJournal(t, h.store, s.ID)
}

// TestSteerInterruptsModelCall: with interrupt, a model call that would
// never answer is abandoned at once, counted like a cancelled call, and
// made again with the message; the turn goes on.
func TestSteerInterruptsModelCall(t *testing.T) {
	h, p := newSteerHarness(t)
	s := create(t, h, spec(t, `[{"delay_ms":600000,"tool_calls":[{"name":"list_files","arguments":{}}]},{"text":"redirected"}]`,
		lt.ToolSpec{Name: "list_files"}), nil)
	waitEvent(t, h, s.ID, lt.EventModelRequested)
	const msg = "Stop listing files; answer now."
	start := time.Now()
	steer(t, h, s.ID, msg, true)
	failed := waitEvents(t, h, s.ID, lt.EventModelFailed, 1)
	require.Less(t, time.Since(start), 2*time.Second, "the call in flight is abandoned within the bound")
	s = h.waitStatus(s.ID, lt.SessionIdle)

	require.Len(t, failed, 1)
	d := data[lt.ModelFailedData](t, failed[0])
	require.Equal(t, lt.InterruptedSteered, d.Interrupted)
	require.False(t, d.Retry)
	require.NotNil(t, d.Usage)
	require.Positive(t, d.Usage.InputTokens, "the abandoned call counts what it was sent")
	responded := events(t, h, s.ID, lt.EventModelResponded)
	require.Len(t, responded, 1)
	answered := data[lt.ModelRespondedData](t, responded[0]).Usage
	require.Equal(t, d.Usage.InputTokens+answered.InputTokens, s.Usage.InputTokens)
	require.Equal(t, int64(2), s.Usage.ModelCalls)

	requested := events(t, h, s.ID, lt.EventModelRequested)
	require.Len(t, requested, 2)
	again := data[lt.ModelRequestedData](t, requested[1])
	require.Equal(t, 1, again.Step, "the same step, made again")
	require.Equal(t, 1, again.Attempt, "a fresh start, not a retry")
	require.Equal(t, 1, again.Steers)
	reqs := p.sent()
	require.Len(t, reqs, 2)
	require.Equal(t, append(append([]model.Message(nil), reqs[0].Messages...), user(msg)), reqs[1].Messages)
	require.Empty(t, events(t, h, s.ID, lt.EventToolRequested), "the abandoned answer's call never came")
	checkJournal(t, h.store, s.ID)
}

// TestSteerDoesNotCutToolCall: a tool call is an effect: a steer with
// interrupt lets it finish, and the message goes in at the next call,
// after its result.
func TestSteerDoesNotCutToolCall(t *testing.T) {
	h, p := newSteerHarness(t)
	dir := t.TempDir()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	args, err := json.Marshal(map[string]string{"command": fmt.Sprintf("touch %s; while [ ! -f %s ]; do sleep 0.01; done; echo finished", started, release)})
	require.NoError(t, err)
	s := create(t, h, spec(t, `[{"tool_calls":[{"name":"shell","arguments":`+string(args)+`}]},{"text":"ok"}]`,
		lt.ToolSpec{Name: "shell", Effect: lt.EffectIdempotent}), nil)
	waitFile(t, started)
	steer(t, h, s.ID, "Mind the tests.", true)
	// The runner learns of a steer at once on this node (the store's
	// notification): had it cut the command, it would within this span.
	require.Never(t, func() bool { return len(events(t, h, s.ID, lt.EventToolFailed)) > 0 }, 300*time.Millisecond, 10*time.Millisecond)
	require.NoError(t, os.WriteFile(release, nil, 0o600))
	s = h.waitStatus(s.ID, lt.SessionIdle)

	require.Empty(t, events(t, h, s.ID, lt.EventToolFailed, lt.EventModelFailed))
	done := events(t, h, s.ID, lt.EventToolCompleted)
	require.Len(t, done, 1)
	require.Contains(t, string(data[lt.ToolCompletedData](t, done[0]).Output), "finished")
	reqs := p.sent()
	require.Len(t, reqs, 2)
	last := reqs[1].Messages
	require.Equal(t, model.RoleTool, last[len(last)-2].Role)
	require.Contains(t, last[len(last)-2].Text, "finished")
	require.Equal(t, user("Mind the tests."), last[len(last)-1])
	checkJournal(t, h.store, s.ID)
}

// TestSteerRefusals: a message is required and bounded; an unknown session
// is 404; a session with no turn running is 409, saying what to do.
func TestSteerRefusals(t *testing.T) {
	h, _ := newSteerHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"text":"done"}]`), nil)
	s = h.waitStatus(s.ID, lt.SessionIdle)

	_, err := h.eng.SteerSession(ctx, s.ID, &lt.SteerRequest{Input: " \n"})
	requireAPIError(t, err, lt.CodeInvalidRequest, "input")
	_, err = h.eng.SteerSession(ctx, s.ID, &lt.SteerRequest{Input: strings.Repeat("x", 33<<10)})
	requireAPIError(t, err, lt.CodeInvalidRequest, "input")
	_, err = h.eng.SteerSession(ctx, "ses_nope", &lt.SteerRequest{Input: "hi"})
	requireAPIError(t, err, lt.CodeNotFound, "ses_nope")
	_, err = h.eng.SteerSession(ctx, s.ID, &lt.SteerRequest{Input: "hi", Interrupt: true})
	requireAPIError(t, err, lt.CodeConflict, "send a follow-up turn instead")
	require.Empty(t, events(t, h, s.ID, lt.EventTurnSteered))
	checkJournal(t, h.store, s.ID)
}

// TestSteerWhileRequiresActionSurvivesCompaction: a steer with interrupt
// to a session waiting for a person's decision leaves the action pending;
// the message reaches the call after the decision, stays in every later
// context until compaction summarises it as a person's words, and the
// pinned block of every call is byte-identical.
func TestSteerWhileRequiresActionSurvivesCompaction(t *testing.T) {
	const msg = "Report the checksum of every part too."
	plan := []model.Response{call("write_file", fmt.Sprintf(`{"path":"big.txt","content":%q}`, strings.Repeat("0123456789 abcdefghij ", 110)))}
	plan = append(plan, call("pause", `{}`))
	for i := range 12 {
		plan = append(plan, call("read_file", fmt.Sprintf(`{"path":"big.txt","offset":%d}`, i)))
	}
	plan = append(plan, model.Response{Text: "All parts read."})
	p := &planProvider{plan: plan}
	h := newHarnessWith(t, map[string]model.Provider{"plan": p}, nil)
	ctx := context.Background()
	s, err := h.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model:        lt.ModelSpec{Provider: "plan", Name: "planner", ContextWindow: 3000},
			Instructions: "Read the file in parts.",
			Tools:        []lt.ToolSpec{{Name: "write_file"}, {Name: "read_file"}, {Name: "pause", Type: "function"}},
			Compaction:   &lt.Compaction{Threshold: 0.5},
			MaxSteps:     100,
		},
		Input: "Read big.txt.", Goal: "every part read", Constraints: []string{"Never delete a file."},
	})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionRequiresAction)
	act := s.RequiredActions[0]
	calls := len(p.stepRequests())
	s = steer(t, h, s.ID, msg, true)
	require.Equal(t, lt.SessionRequiresAction, s.Status)
	require.Equal(t, []lt.Action{act}, s.RequiredActions, "the action stays pending")
	_, err = h.eng.DecideAction(ctx, s.ID, act.ID, &lt.Decision{Output: json.RawMessage(`"go on"`)})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status)
	require.Empty(t, events(t, h, s.ID, lt.EventModelFailed), "nothing was in flight to cut")

	steps := p.stepRequests()
	after := steps[calls].msgs
	require.Equal(t, model.RoleTool, after[len(after)-2].Role, "after the decision's result")
	require.Equal(t, user(msg), after[len(after)-1])
	pinned := systemText(steps[0].msgs)
	require.Contains(t, pinned, "Constraint: Never delete a file.")
	for i, r := range steps {
		sys := systemText(r.msgs)
		require.True(t, strings.HasPrefix(sys, pinned), "step call %d: the pinned block is unchanged", i)
		require.NotContains(t, sys[:len(pinned)], msg)
		if rest := sys[len(pinned):]; rest != "" {
			require.True(t, strings.HasPrefix(rest, "\n\n## Summary of the earlier conversation"), "step call %d", i)
		}
	}
	// Until compaction summarises it, every context carries it verbatim;
	// the summary call then gets it as a person's words.
	require.NotEmpty(t, events(t, h, s.ID, lt.EventContextCompacted))
	summarised := -1
	for i, r := range p.requests {
		if r.purpose == lt.PurposeCompaction && strings.Contains(r.msgs[1].Text, "[person] "+msg) {
			summarised = i
			break
		}
	}
	require.Positive(t, summarised, "compaction summarised the message like any item")
	first, seen := -1, 0 // the first step call after the steer
	for i, r := range p.requests {
		if r.purpose == "" {
			if seen == calls {
				first = i
				break
			}
			seen++
		}
	}
	require.Less(t, first, summarised)
	for i := first; i < summarised; i++ {
		if r := p.requests[i]; r.purpose == "" {
			require.True(t, containsMsg(r.msgs, user(msg)), "request %d lost the message before it was summarised", i)
		}
	}
	checkJournal(t, h.store, s.ID)
}

func containsMsg(msgs []model.Message, m model.Message) bool {
	for _, x := range msgs {
		if x.Role == m.Role && x.Text == m.Text {
			return true
		}
	}
	return false
}

// TestSteerQueuedTurn: a message to a turn that has not started yet (no
// worker runs the session) comes after that turn's input, not before it.
func TestSteerQueuedTurn(t *testing.T) {
	h, p := newSteerHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"text":"first answer"},{"text":"second answer"}]`), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.NoError(t, h.eng.Stop(ctx))
	turn, err := h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "Now the second part."})
	require.NoError(t, err)
	s = steer(t, h, s.ID, "Only the figures, please.", false)
	require.Equal(t, lt.SessionQueued, s.Status)
	steered := events(t, h, s.ID, lt.EventTurnSteered)
	require.Len(t, steered, 1)
	require.Equal(t, turn.ID, data[lt.TurnSteeredData](t, steered[0]).TurnID, "the queued turn is the current one")

	h.start("node-a")
	h.waitStatus(s.ID, lt.SessionIdle)
	reqs := p.sent()
	require.Len(t, reqs, 2)
	require.Equal(t, []model.Message{user("Now the second part."), user("Only the figures, please.")}, reqs[1].Messages[len(reqs[1].Messages)-2:])
	checkJournal(t, h.store, s.ID)
}

// TestSteerToATurnThatNeverRan: a message to a queued turn that is
// cancelled before it starts is not lost, and does not hold the next turn:
// the next turn's first call carries it, before that turn's input, and
// the turn ends.
func TestSteerToATurnThatNeverRan(t *testing.T) {
	h, p := newSteerHarness(t)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"text":"first answer"},{"text":"third answer"}]`), nil)
	h.waitStatus(s.ID, lt.SessionIdle)
	require.NoError(t, h.eng.Stop(ctx))
	_, err := h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "The second part."})
	require.NoError(t, err)
	steer(t, h, s.ID, "Mind the units.", false)
	_, err = h.eng.CancelSession(ctx, s.ID, &lt.CancelRequest{Reason: "not now"})
	require.NoError(t, err)
	h.start("node-a")
	h.waitStatus(s.ID, lt.SessionCancelled)
	require.Empty(t, events(t, h, s.ID, lt.EventTurnStarted)[1:], "the steered turn never started")

	_, err = h.eng.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "The third part."})
	require.NoError(t, err)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	reqs := p.sent()
	require.Len(t, reqs, 2, "one call for the third turn: the message is read with it")
	require.Equal(t, []model.Message{user("Mind the units."), user("The third part.")}, reqs[1].Messages[len(reqs[1].Messages)-2:])
	turns, err := h.eng.ListTurns(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, "third answer", turns[2].Output)
	checkJournal(t, h.store, s.ID)
}

// TestSteerLongMessageStaysInline: a message at the size limit, which JSON
// escapes to more than the blob threshold, is journaled inline, so a
// replay of the journal reads its interrupt flag.
func TestSteerLongMessageStaysInline(t *testing.T) {
	h, p := newSteerHarness(t)
	s := create(t, h, spec(t, `[{"delay_ms":600000,"text":"never"},{"text":"ok"}]`), nil)
	waitEvent(t, h, s.ID, lt.EventModelRequested)
	msg := strings.Repeat("<", 32<<10) // each one \u003c in JSON: 192 KiB
	steer(t, h, s.ID, msg, true)
	s = h.waitStatus(s.ID, lt.SessionIdle)
	steered := events(t, h, s.ID, lt.EventTurnSteered)
	require.Len(t, steered, 1)
	require.Greater(t, len(steered[0].Data), 64<<10)
	d := data[lt.TurnSteeredData](t, steered[0])
	require.Equal(t, msg, d.Input)
	require.True(t, d.Interrupt)
	reqs := p.sent()
	require.Len(t, reqs, 2)
	require.Equal(t, user(msg), reqs[1].Messages[len(reqs[1].Messages)-1])
	checkJournal(t, h.store, s.ID)
}

// TestSteerSubagentJustBeforeItsTurnEnds: a person steers a sub-agent as
// its turn ends. Its report to the parent is made durable whatever the
// merge of the steer does: the node does not crash (a nil report due, seen
// once), the parent gets its answer and ends, and both journals hold.
func TestSteerSubagentJustBeforeItsTurnEnds(t *testing.T) {
	p := newGatedScripted()
	p.open()
	h := newHarnessThrough(t, p, 0, func(h *harness) store.Store {
		api := apiNode(t, h, p)
		return &steerBeforeEnd{Store: h.store, onlyChildren: true, steer: func(id string) {
			_, err := api.SteerSession(context.Background(), id, &lt.SteerRequest{Input: "Say it again."})
			require.NoError(t, err)
		}}
	})
	child := childSpec(script(t, map[string]any{"text": "first"}, map[string]any{"text": "second"}))
	parent := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("spawn_agent", map[string]any{"agent_spec": child, "input": "go"})}},
		map[string]any{"tool_calls": []any{toolCall("wait_agents", map[string]any{})}},
		map[string]any{"text": "all done"},
	), lt.ToolSpec{Name: "spawn_agent"}, lt.ToolSpec{Name: "wait_agents"})
	s := create(t, h, parent, nil)
	s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
	require.Equal(t, lt.SessionIdle, s.Status)
	checkJournal(t, h.store, s.ID)
	kids := events(t, h, s.ID, lt.EventSubagentSpawned)
	require.Len(t, kids, 1)
	var sp lt.SubagentSpawnedData
	require.NoError(t, json.Unmarshal(kids[0].Data, &sp))
	checkJournal(t, h.store, sp.ChildID)
}

// TestSteerBeforeTheTurnEndsWithAFollowUpQueued: a follow-up turn is
// queued and a steer lands just before the append that ends the first
// turn. Every model call the provider received is in the journal as a
// model.requested: none is made unrecorded.
func TestSteerBeforeTheTurnEndsWithAFollowUpQueued(t *testing.T) {
	p := newGatedScripted()
	t.Cleanup(p.open)
	h := newHarnessThrough(t, p, 0, func(h *harness) store.Store {
		api := apiNode(t, h, p)
		return &steerBeforeEnd{Store: h.store, steer: func(id string) {
			_, _ = api.SteerSession(context.Background(), id, &lt.SteerRequest{Input: "Say it again."})
		}}
	})
	sp := spec(t, script(t,
		map[string]any{"tool_calls": []any{toolCall("write_file", map[string]any{"path": "a.txt", "content": "x"})}},
		map[string]any{"text": "first"},
		map[string]any{"text": "second"},
		map[string]any{"text": "third"},
		map[string]any{"text": "fourth"},
	), lt.ToolSpec{Name: "write_file"})
	s := create(t, h, sp, nil)
	waitEvent(t, h, s.ID, lt.EventModelRequested)
	_, err := h.eng.CreateTurn(context.Background(), s.ID, &lt.CreateTurnRequest{Input: "follow-up"})
	require.NoError(t, err)
	p.open()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s = h.waitStatus(s.ID, lt.SessionIdle, lt.SessionFailed)
		turns, err := h.eng.ListTurns(context.Background(), s.ID)
		require.NoError(t, err)
		if ended := len(turns) == 2 && (turns[1].Status == lt.TurnCompleted || turns[1].Status == lt.TurnFailed); ended || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	checkJournal(t, h.store, s.ID)
	require.Len(t, events(t, h, s.ID, lt.EventModelRequested), len(p.sent()), "every model call sent is journaled")
}
