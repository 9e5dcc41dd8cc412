package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Defaults of Options.
const (
	// DefaultMaxDepth is how many levels of sub-agents' traces Build nests:
	// children, grandchildren and their children.
	DefaultMaxDepth = 3
	// DefaultMaxSessions bounds the sessions one trace nests, its own
	// included.
	DefaultMaxSessions = 1000
)

// ErrTooManySessions is returned when nesting sub-agents' traces would take
// more than Options.MaxSessions sessions: a trace is refused rather than
// cut, so that no one takes a partial tree for the whole.
var ErrTooManySessions = errors.New("too many sub-agent sessions to nest in one trace")

// Options tunes Build. A nil *Options means: no sub-agents' traces nested.
type Options struct {
	// Subagents, when set, returns a child session's complete journal
	// (payloads read back from blobs), so that the child's turns are nested
	// under its subagent span. A nil slice with a nil error means the
	// child has no journal to show. Default nil: not nested.
	Subagents func(childID string) ([]lt.Event, error)
	// MaxDepth bounds the nesting of sub-agents' traces: 1 nests the
	// children only; deeper sub-agents keep their span, without their own
	// trace. Default DefaultMaxDepth.
	MaxDepth int
	// MaxSessions bounds the sessions whose journals one trace reads, its
	// own included (ErrTooManySessions past it). Default
	// DefaultMaxSessions.
	MaxSessions int
}

// Build derives the trace of one session from its journal, in seq order.
// It fails on an event whose payload it cannot decode, or when the
// Subagents callback fails.
func Build(events []lt.Event, opts *Options) (*lt.Trace, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	return build(events, &o, 0, map[string]bool{})
}

func build(events []lt.Event, o *Options, depth int, seen map[string]bool) (*lt.Trace, error) {
	b := &builder{turnByID: map[string]*turnState{}, subagents: map[string]*node{}, early: map[string]lt.SubagentCompletedData{}}
	for _, ev := range events {
		if err := b.event(ev); err != nil {
			return nil, fmt.Errorf("trace: event %d (%s): %w", ev.Seq, ev.Type, err)
		}
	}
	if len(events) > 0 {
		b.tr.SessionID = events[0].SessionID
	}
	seen[b.tr.SessionID] = true
	if o.Subagents != nil && depth < o.MaxDepth {
		for _, sub := range b.subOrder {
			id := sub.span.Attributes.ChildSessionID
			if seen[id] {
				continue // a journal naming an ancestor as its child: never loop
			}
			if len(seen) >= o.MaxSessions {
				return nil, fmt.Errorf("trace: more than %d sessions: %w", o.MaxSessions, ErrTooManySessions)
			}
			seen[id] = true
			evs, err := o.Subagents(id)
			if err != nil {
				return nil, fmt.Errorf("trace: sub-agent %s: %w", id, err)
			}
			if len(evs) == 0 {
				continue
			}
			child, err := build(evs, o, depth+1, seen)
			if err != nil {
				return nil, err
			}
			sub.nested = child.Spans
		}
	}
	return b.finish(), nil
}

// node is a span being built; Children are filled in by finish.
type node struct {
	span lt.Span
	kids []*node
	// usage is what the span consumed itself (model calls, sub-agents).
	usage *lt.Usage
	// nested are the turns of a sub-agent's own trace.
	nested []lt.Span
	// cancelled: closed by its turn's end, not by an event of its own.
	cancelled bool
}

func (n *node) add(k *node) *node {
	n.kids = append(n.kids, k)
	return k
}

func (n *node) open() bool { return n.span.End == nil }

// close ends the span at t with status s, unless it already ended.
func (n *node) close(t time.Time, s lt.SpanStatus, errMsg string) {
	if !n.open() {
		return
	}
	end := t
	n.span.End, n.span.Status = &end, s
	if errMsg != "" {
		n.span.Error = errMsg
	}
}

// turnState is what the builder tracks of one turn.
type turnState struct {
	n     *node
	steps map[int]*stepState
	order []*stepState
	calls map[[2]int]*callState // by step and index
	// model is the model call waiting for its answer.
	model   *node
	actions map[string]*node
	// sideUsage sums the turn's compaction and verification calls, and
	// what sub-agents reported during the turn.
	sideUsage lt.Usage
	ended     bool
}

type stepState struct {
	n    *node
	num  int
	done bool
	// checkpoint is the time of the step's automatic checkpoint.
	checkpoint time.Time
	tools      int64 // executions started (each attempt counts)
	lastModel  *node
}

type callState struct {
	n            *node
	attemptStart time.Time
	attempts     int
	wait         *node
}

type builder struct {
	tr        lt.Trace
	turns     []*turnState
	turnByID  map[string]*turnState
	subagents map[string]*node
	subOrder  []*node
	// early holds completions a child reported before the spawn was
	// journaled in the parent (the child's report can commit first).
	early map[string]lt.SubagentCompletedData
	// reported is the last usage each child reported (its reports are
	// cumulative; a turn gets the difference).
	reported map[string]lt.Usage
	// idleUsage is what children reported while no turn was current: it
	// belongs to the session, not to a turn.
	idleUsage lt.Usage
	// pause is the span of the pause in effect, if any (pause.go).
	pause *node
	// callBySeq is the call span of each event of a call (monitor.go).
	callBySeq map[int64]*node
}

func decode[T any](ev lt.Event) (T, error) {
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		return v, fmt.Errorf("decode data: %w", err)
	}
	return v, nil
}

func (b *builder) event(ev lt.Event) error {
	if ev.Seq > b.tr.LastEventSeq {
		b.tr.LastEventSeq = ev.Seq
	}
	if ev.Time.After(b.tr.AsOf) {
		b.tr.AsOf = ev.Time
	}
	defer b.noteCallEvent(ev)
	switch ev.Type {
	case lt.EventSessionCreated:
		d, err := decode[lt.SessionCreatedData](ev)
		if err != nil {
			return err
		}
		b.tr.Agent = d.Agent
	case lt.EventTurnCreated:
		d, err := decode[lt.TurnCreatedData](ev)
		if err != nil {
			return err
		}
		if b.turnByID[d.TurnID] != nil {
			return nil
		}
		t := &turnState{
			n: &node{span: lt.Span{
				ID: d.TurnID, Kind: lt.SpanTurn, Name: "turn " + strconv.Itoa(d.Index), Start: ev.Time, Status: lt.SpanQueued,
				Attributes: lt.SpanAttributes{TurnID: d.TurnID, TurnIndex: d.Index},
			}},
			steps: map[int]*stepState{}, calls: map[[2]int]*callState{}, actions: map[string]*node{},
		}
		b.turns = append(b.turns, t)
		b.turnByID[d.TurnID] = t
	case lt.EventTurnStarted:
		d, err := decode[lt.TurnStartedData](ev)
		if err != nil {
			return err
		}
		if t := b.turnByID[d.TurnID]; t != nil && t.n.span.Status == lt.SpanQueued {
			t.n.span.Start, t.n.span.Status = ev.Time, lt.SpanRunning
		}
	case lt.EventTurnCompleted, lt.EventTurnFailed, lt.EventTurnCancelled:
		return b.turnEnd(ev)
	case lt.EventSessionPaused, lt.EventSessionResumed:
		return b.pauseEvent(ev)
	case lt.EventModelRequested:
		return b.modelRequested(ev)
	case lt.EventModelResponded, lt.EventModelFailed, lt.EventContextCompacted, lt.EventAcceptanceVerified:
		return b.modelAnswered(ev)
	case lt.EventToolRequested:
		return b.toolRequested(ev)
	case lt.EventPolicyDecided:
		d, err := decode[lt.PolicyDecidedData](ev)
		if err != nil {
			return err
		}
		if c := b.call(ev, d.Step, d.Index); c != nil {
			c.n.span.Attributes.Policy = d.Decision
		}
	case lt.EventToolStarted:
		d, err := decode[lt.ToolStartedData](ev)
		if err != nil {
			return err
		}
		c := b.call(ev, d.Step, d.Index)
		if c == nil {
			return nil
		}
		c.attempts++
		c.attemptStart = ev.Time
		a := &c.n.span.Attributes
		a.Attempts, a.EffectID, a.IdempotencyKey = c.attempts, d.EffectID, d.IdempotencyKey
		if d.Class != "" {
			a.EffectClass = d.Class
		}
		if s := b.turn(ev).steps[d.Step]; s != nil {
			s.tools++
		}
	case lt.EventToolCompleted, lt.EventToolFailed:
		return b.toolEnded(ev)
	case lt.EventEffectInDoubt:
		d, err := decode[lt.EffectInDoubtData](ev)
		if err != nil {
			return err
		}
		if c := b.call(ev, d.Step, d.Index); c != nil {
			c.n.span.Attributes.EffectStatus = lt.EffectInDoubt
		}
	case lt.EventWaitStarted:
		return b.waitStarted(ev)
	case lt.EventActionRequired:
		return b.actionRequired(ev)
	case lt.EventActionResolved:
		d, err := decode[lt.ActionResolvedData](ev)
		if err != nil {
			return err
		}
		for _, t := range b.turns {
			if n := t.actions[d.ActionID]; n != nil {
				n.span.Attributes.Decision, n.span.Attributes.DecidedBy = decisionName(d.Decision), d.Actor
				n.close(ev.Time, lt.SpanOK, "")
				break
			}
		}
	case lt.EventCheckpointCreated:
		d, err := decode[lt.CheckpointCreatedData](ev)
		if err != nil {
			return err
		}
		if d.Checkpoint.Kind != lt.CheckpointStep {
			return nil
		}
		if t := b.turnByID[d.Checkpoint.TurnID]; t != nil {
			if s := t.steps[d.Checkpoint.Step]; s != nil {
				s.checkpoint, s.done = ev.Time, true
			}
		}
	case lt.EventSubagentSpawned:
		return b.subagentSpawned(ev)
	case lt.EventMonitorFinding:
		return b.monitorFinding(ev)
	case lt.EventMonitorReviewed:
		return b.monitorReviewed(ev)
	case lt.EventSubagentCompleted:
		d, err := decode[lt.SubagentCompletedData](ev)
		if err != nil {
			return err
		}
		b.rollUpChild(d.ChildID, d.Usage)
		n := b.subagents[d.ChildID]
		if n == nil {
			b.early[d.ChildID] = d
			return nil
		}
		completeSubagent(n, d, ev.Time)
	}
	return nil
}

// current is the turn the session works on: the oldest one not ended
// (turns end in order), as in the journal's projection.
func (b *builder) current() *turnState {
	for _, t := range b.turns {
		if !t.ended {
			return t
		}
	}
	return nil
}

// turn returns the turn an event belongs to: the one it names, else the
// current one. It never returns nil (a stray event gets a throwaway turn).
func (b *builder) turn(ev lt.Event) *turnState {
	if t := b.turnByID[ev.TurnID]; t != nil {
		return t
	}
	if t := b.current(); t != nil {
		return t
	}
	return &turnState{n: &node{}, steps: map[int]*stepState{}, calls: map[[2]int]*callState{}, actions: map[string]*node{}, ended: true}
}

func (b *builder) call(ev lt.Event, step, index int) *callState {
	return b.turn(ev).calls[[2]int{step, index}]
}

// step returns the turn's step n, starting it at t if needed; a new step
// ends the ones before it.
func (t *turnState) step(n int, at time.Time) *stepState {
	if s := t.steps[n]; s != nil {
		return s
	}
	for _, s := range t.order {
		if s.num < n {
			s.done = true
		}
	}
	id := t.n.span.ID + "/step/" + strconv.Itoa(n)
	s := &stepState{num: n, n: &node{span: lt.Span{
		ID: id, Kind: lt.SpanStep, Name: "step " + strconv.Itoa(n), Start: at, Status: lt.SpanRunning,
		Attributes: lt.SpanAttributes{TurnID: t.n.span.ID, Step: n},
	}}}
	t.steps[n] = s
	t.order = append(t.order, s)
	t.n.add(s.n)
	return s
}

func (b *builder) modelRequested(ev lt.Event) error {
	d, err := decode[lt.ModelRequestedData](ev)
	if err != nil {
		return err
	}
	t := b.turn(ev)
	if t.model != nil {
		// The previous call never answered: its worker stopped, and this
		// is the call made again.
		t.model.close(ev.Time, lt.SpanError, "no answer was recorded: the call was interrupted and made again")
		t.model = nil
	}
	name := "model " + d.Model
	if d.Model == "" {
		name = "model " + d.Provider
	}
	if d.Purpose != "" {
		name += " (" + d.Purpose + ")"
	}
	n := &node{span: lt.Span{
		ID: t.n.span.ID + "/model/" + strconv.FormatInt(ev.Seq, 10), Kind: lt.SpanModelCall, Name: name, Start: ev.Time, Status: lt.SpanRunning,
		Attributes: lt.SpanAttributes{
			TurnID: t.n.span.ID, Step: d.Step, Provider: d.Provider, Model: d.Model, Purpose: d.Purpose,
			Attempt: d.Attempt, Position: d.Position, ContextTokens: d.ContextTokens,
		},
	}}
	if d.Purpose == "" {
		s := t.step(d.Step, ev.Time)
		s.n.add(n)
		s.lastModel = n
	} else {
		for _, s := range t.order {
			if s.num <= d.Step {
				s.done = true
			}
		}
		t.n.add(n)
	}
	t.model = n
	return nil
}

// modelAnswered closes the open model call with its answer or failure. An
// answer with no open call (a journal that starts mid-call) gets a span of
// its own, so its usage is not lost.
func (b *builder) modelAnswered(ev lt.Event) error {
	t := b.turn(ev)
	n := t.model
	if n == nil {
		n = &node{span: lt.Span{
			ID: t.n.span.ID + "/model/" + strconv.FormatInt(ev.Seq, 10), Kind: lt.SpanModelCall, Name: "model", Start: ev.Time, Status: lt.SpanRunning,
			Attributes: lt.SpanAttributes{TurnID: t.n.span.ID, Step: ev.Step},
		}}
		switch ev.Type {
		case lt.EventContextCompacted:
			n.span.Attributes.Purpose = lt.PurposeCompaction
		case lt.EventAcceptanceVerified:
			n.span.Attributes.Purpose = lt.PurposeVerification
		case lt.EventMonitorReviewed:
			n.span.Attributes.Purpose = lt.PurposeMonitor
		}
		if n.span.Attributes.Purpose == "" && ev.Step > 0 {
			t.step(ev.Step, ev.Time).n.add(n)
		} else {
			t.n.add(n)
		}
	}
	t.model = nil
	a := &n.span.Attributes
	usage := func(u lt.Usage, cost float64) {
		u.CostUSD, u.ModelCalls, u.ToolCalls = cost, 1, 0
		n.usage = &u
	}
	switch ev.Type {
	case lt.EventModelResponded:
		d, err := decode[lt.ModelRespondedData](ev)
		if err != nil {
			return err
		}
		usage(d.Usage, d.CostUSD)
		a.ResponseModel, a.StopReason = d.Model, d.StopReason
		n.close(ev.Time, lt.SpanOK, "")
	case lt.EventModelFailed:
		d, err := decode[lt.ModelFailedData](ev)
		if err != nil {
			return err
		}
		n.usage = &lt.Usage{ModelCalls: 1}
		a.ErrorKind, a.Retried = d.Kind, d.Retry
		msg := d.Message
		if msg == "" {
			msg = d.Kind
		}
		n.close(ev.Time, lt.SpanError, msg)
	case lt.EventContextCompacted:
		d, err := decode[lt.ContextCompactedData](ev)
		if err != nil {
			return err
		}
		usage(d.Usage, d.CostUSD)
		a.TokensBefore, a.TokensAfter = d.TokensBefore, d.TokensAfter
		n.close(ev.Time, lt.SpanOK, "")
	case lt.EventAcceptanceVerified:
		d, err := decode[lt.AcceptanceVerifiedData](ev)
		if err != nil {
			return err
		}
		usage(d.Usage, d.CostUSD)
		met := d.Verdict.AllMet
		a.AcceptanceMet = &met
		n.close(ev.Time, lt.SpanOK, "")
	case lt.EventMonitorReviewed:
		d, err := decode[lt.MonitorReviewedData](ev)
		if err != nil {
			return err
		}
		usage(d.Usage, d.CostUSD)
		n.usage.MonitorCostUSD = d.CostUSD
		a.Findings = append(a.Findings, reviewLine(&d))
		n.close(ev.Time, lt.SpanOK, "")
	}
	if a.Purpose != "" {
		t.sideUsage.Add(*n.usage)
	}
	return nil
}

func (b *builder) toolRequested(ev lt.Event) error {
	d, err := decode[lt.ToolRequestedData](ev)
	if err != nil {
		return err
	}
	t := b.turn(ev)
	s := t.step(d.Step, ev.Time)
	idx := d.Index
	n := s.n.add(&node{span: lt.Span{
		ID: s.n.span.ID + "/call/" + strconv.Itoa(d.Index), Kind: lt.SpanToolCall, Name: "tool " + d.Tool, Start: ev.Time, Status: lt.SpanRunning,
		Attributes: lt.SpanAttributes{
			TurnID: t.n.span.ID, Step: d.Step, Tool: d.Tool, CallID: d.CallID, CallKind: d.Kind, Index: &idx, EffectClass: d.Class,
		},
	}})
	t.calls[[2]int{d.Step, d.Index}] = &callState{n: n}
	return nil
}

func (b *builder) toolEnded(ev lt.Event) error {
	var (
		step, index         int
		effectID, resultErr string
		resolution, refused string
		retry               bool
	)
	if ev.Type == lt.EventToolCompleted {
		d, err := decode[lt.ToolCompletedData](ev)
		if err != nil {
			return err
		}
		step, index, effectID, resolution = d.Step, d.Index, d.EffectID, d.Resolution
	} else {
		d, err := decode[lt.ToolFailedData](ev)
		if err != nil {
			return err
		}
		step, index, effectID, resolution = d.Step, d.Index, d.EffectID, d.Resolution
		resultErr, refused, retry = d.Error, d.Refused, d.Retry
		if resultErr == "" {
			resultErr = "the tool failed"
		}
	}
	c := b.call(ev, step, index)
	if c == nil {
		return nil
	}
	a := &c.n.span.Attributes
	if effectID != "" {
		a.EffectID = effectID
	}
	if retry {
		start := c.attemptStart
		if start.IsZero() {
			start = c.n.span.Start
		}
		k := max(c.attempts, 1)
		at := c.n.add(&node{span: lt.Span{
			ID: c.n.span.ID + "/attempt/" + strconv.Itoa(k), Kind: lt.SpanAttempt, Name: "attempt " + strconv.Itoa(k), Start: start, Status: lt.SpanRunning,
			Attributes: lt.SpanAttributes{TurnID: a.TurnID, Step: step, Tool: a.Tool, CallID: a.CallID, EffectID: a.EffectID, Attempt: k, Retried: true},
		}})
		at.close(ev.Time, lt.SpanError, resultErr)
		return nil
	}
	a.Resolution, a.Refused = resolution, refused
	if c.wait != nil {
		c.wait.close(ev.Time, lt.SpanOK, "")
	}
	if ev.Type == lt.EventToolCompleted {
		c.n.close(ev.Time, lt.SpanOK, "")
	} else {
		c.n.close(ev.Time, lt.SpanError, resultErr)
	}
	return nil
}

func (b *builder) waitStarted(ev lt.Event) error {
	d, err := decode[lt.WaitStartedData](ev)
	if err != nil {
		return err
	}
	c := b.call(ev, d.Step, d.Index)
	if c == nil {
		return nil
	}
	name := "wait " + d.Kind
	if d.Name != "" {
		name += " " + d.Name
	}
	c.wait = c.n.add(&node{span: lt.Span{
		ID: c.n.span.ID + "/wait/" + strconv.FormatInt(ev.Seq, 10), Kind: lt.SpanWait, Name: name, Start: ev.Time, Status: lt.SpanRunning,
		Attributes: lt.SpanAttributes{TurnID: c.n.span.Attributes.TurnID, Step: d.Step, Tool: d.Tool, CallID: d.CallID, WaitKind: d.Kind, SignalName: d.Name, WaitUntil: d.Until},
	}})
	return nil
}

func (b *builder) actionRequired(ev lt.Event) error {
	d, err := decode[lt.ActionRequiredData](ev)
	if err != nil {
		return err
	}
	a := d.Action
	t := b.turnByID[a.TurnID]
	if t == nil {
		t = b.turn(ev)
	}
	parent := t.n
	for _, c := range t.calls {
		if a.CallID != "" && c.n.span.Attributes.CallID == a.CallID && c.n.span.Attributes.Step == a.Step {
			parent = c.n
			break
		}
	}
	n := parent.add(&node{span: lt.Span{
		ID: a.ID, Kind: lt.SpanAction, Name: "action " + string(a.Type), Start: ev.Time, Status: lt.SpanRunning,
		Attributes: lt.SpanAttributes{TurnID: t.n.span.ID, Step: a.Step, ActionID: a.ID, ActionType: a.Type, Tool: a.Tool, CallID: a.CallID, EffectID: a.EffectID},
	}})
	t.actions[a.ID] = n
	return nil
}

func (b *builder) subagentSpawned(ev lt.Event) error {
	d, err := decode[lt.SubagentSpawnedData](ev)
	if err != nil {
		return err
	}
	if b.subagents[d.ChildID] != nil {
		return nil
	}
	t := b.turn(ev)
	parent := t.n
	if c := t.calls[[2]int{d.Step, d.Index}]; c != nil {
		parent = c.n
	} else if s := t.steps[d.Step]; s != nil {
		parent = s.n
	}
	agent := d.Agent
	n := parent.add(&node{span: lt.Span{
		ID: t.n.span.ID + "/subagent/" + d.ChildID, Kind: lt.SpanSubagent, Name: "subagent " + agent.Name, Start: ev.Time, Status: lt.SpanRunning,
		Attributes: lt.SpanAttributes{TurnID: t.n.span.ID, Step: d.Step, CallID: d.CallID, ChildSessionID: d.ChildID, Agent: &agent},
	}})
	b.subagents[d.ChildID] = n
	b.subOrder = append(b.subOrder, n)
	if early, ok := b.early[d.ChildID]; ok {
		delete(b.early, d.ChildID)
		completeSubagent(n, early, ev.Time)
	}
	return nil
}

// rollUpChild adds to the current turn what a child reported beyond its
// previous report, as the journal's projection does.
func (b *builder) rollUpChild(childID string, u lt.Usage) {
	if b.reported == nil {
		b.reported = map[string]lt.Usage{}
	}
	prev := b.reported[childID]
	b.reported[childID] = u
	d := &b.idleUsage
	if t := b.current(); t != nil {
		d = &t.sideUsage
	}
	d.InputTokens += u.InputTokens - prev.InputTokens
	d.CachedInputTokens += u.CachedInputTokens - prev.CachedInputTokens
	d.OutputTokens += u.OutputTokens - prev.OutputTokens
	d.ReasoningTokens += u.ReasoningTokens - prev.ReasoningTokens
	d.CostUSD += u.CostUSD - prev.CostUSD
	d.ModelCalls += u.ModelCalls - prev.ModelCalls
	d.ToolCalls += u.ToolCalls - prev.ToolCalls
	d.Estimated = d.Estimated || u.Estimated
}

// completeSubagent records a child's report: its latest turn's end and its
// whole tree's usage so far. A later report (a later turn of the child)
// moves the end.
func completeSubagent(n *node, d lt.SubagentCompletedData, at time.Time) {
	u := d.Usage
	n.usage = &u
	a := &n.span.Attributes
	a.ChildStatus, a.StopReason = d.Status, d.StopReason
	if at.Before(n.span.Start) {
		at = n.span.Start
	}
	end := at
	n.span.End, n.span.Error = &end, ""
	switch d.Status {
	case lt.TurnCompleted:
		n.span.Status = lt.SpanOK
	case lt.TurnCancelled:
		n.span.Status = lt.SpanCancelled
	default:
		n.span.Status = lt.SpanError
		n.span.Error = d.Error
		if n.span.Error == "" {
			n.span.Error = "the sub-agent's turn " + string(d.Status)
		}
	}
}

func (b *builder) turnEnd(ev lt.Event) error {
	var turnID, errMsg, stopReason string
	status := lt.SpanOK
	switch ev.Type {
	case lt.EventTurnCompleted:
		d, err := decode[lt.TurnCompletedData](ev)
		if err != nil {
			return err
		}
		turnID = d.TurnID
	case lt.EventTurnFailed:
		d, err := decode[lt.TurnFailedData](ev)
		if err != nil {
			return err
		}
		turnID, errMsg, stopReason, status = d.TurnID, d.Error, d.StopReason, lt.SpanError
		if errMsg == "" {
			errMsg = d.StopReason
		}
	case lt.EventTurnCancelled:
		d, err := decode[lt.TurnCancelledData](ev)
		if err != nil {
			return err
		}
		turnID, stopReason, status = d.TurnID, lt.StopCancelled, lt.SpanCancelled
	}
	t := b.turnByID[turnID]
	if t == nil || t.ended {
		return nil
	}
	t.ended, t.model = true, nil
	for _, s := range t.order {
		s.done = true
	}
	cancelOpen(t.n, ev.Time)
	t.n.span.Attributes.StopReason = stopReason
	t.n.close(ev.Time, status, errMsg)
	return nil
}

// cancelOpen closes what a turn's end left open below n: it did not finish.
// Steps are closed by finish; sub-agents live on.
func cancelOpen(n *node, at time.Time) {
	for _, k := range n.kids {
		if k.span.Kind == lt.SpanSubagent {
			continue
		}
		cancelOpen(k, at)
		if k.span.Kind != lt.SpanStep && k.open() {
			k.close(at, lt.SpanCancelled, "")
			k.cancelled = true
		}
	}
}

func decisionName(d lt.Decision) string {
	switch {
	case d.Decision != "":
		return d.Decision
	case d.Error != "":
		return "error"
	case len(d.Output) > 0:
		return "output"
	case d.Answer != "":
		return "answer"
	}
	return ""
}

// finish closes the steps that are over, rolls usage up and converts the
// tree into wire spans.
func (b *builder) finish() *lt.Trace {
	tr := b.tr
	tr.Spans = make([]lt.Span, 0, len(b.turns))
	for _, t := range b.turns {
		var turnUsage lt.Usage
		for _, s := range t.order {
			closeStep(s)
			u := lt.Usage{ToolCalls: s.tools}
			for _, k := range s.n.kids {
				if k.span.Kind == lt.SpanModelCall && k.usage != nil {
					u.Add(*k.usage)
				}
			}
			s.n.usage = &u
			turnUsage.Add(u)
		}
		turnUsage.Add(t.sideUsage)
		t.n.usage = &turnUsage
		tr.Usage.Add(turnUsage)
	}
	tr.Usage.Add(b.idleUsage)
	for _, t := range b.turns {
		tr.Spans = append(tr.Spans, convert(t.n, nil, tr.AsOf))
	}
	return &tr
}

// closeStep ends a step that is over at the end of what it contains (its
// automatic checkpoint included); sub-agents, which outlive their step, do
// not count.
func closeStep(s *stepState) {
	if !s.done {
		return
	}
	end := s.n.span.Start
	if s.checkpoint.After(end) {
		end = s.checkpoint
	}
	cancelled := false
	var walk func(n *node)
	walk = func(n *node) {
		for _, k := range n.kids {
			if k.span.Kind == lt.SpanSubagent {
				continue
			}
			if k.span.End != nil && k.span.End.After(end) {
				end = *k.span.End
			}
			cancelled = cancelled || k.cancelled
			walk(k)
		}
	}
	walk(s.n)
	status := lt.SpanOK
	var errMsg string
	switch {
	case cancelled:
		status = lt.SpanCancelled
	case s.lastModel != nil && s.lastModel.span.Status == lt.SpanError && len(s.n.kids) > 0 && s.n.kids[len(s.n.kids)-1] == s.lastModel:
		// The step never got an answer from the model.
		status, errMsg = lt.SpanError, s.lastModel.span.Error
	}
	s.n.close(end, status, errMsg)
}

func convert(n *node, parent *string, asOf time.Time) lt.Span {
	sp := n.span
	sp.ParentID = parent
	if n.usage != nil {
		u := *n.usage
		sp.Usage = &u
	}
	if sp.End != nil {
		sp.DurationMS = sp.End.Sub(sp.Start).Milliseconds()
	} else {
		sp.DurationMS = max(asOf.Sub(sp.Start).Milliseconds(), 0)
	}
	id := sp.ID
	sp.Children = make([]lt.Span, 0, len(n.kids)+len(n.nested))
	for _, k := range n.kids {
		sp.Children = append(sp.Children, convert(k, &id, asOf))
	}
	for _, nested := range n.nested {
		nested.ParentID = &id
		sp.Children = append(sp.Children, nested)
	}
	return sp
}
