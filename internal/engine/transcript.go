package engine

import (
	"slices"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// transcript is the model context of a session, rebuilt from its journal:
// the pinned block (instructions, goal, constraints, acceptance criteria)
// first and verbatim, then the latest compaction summary, then the
// conversation items after it. A turn's input enters the conversation when
// the turn starts, not when it is queued. Compaction changes what is sent,
// never what is stored: the journal keeps every item, and cut says how many
// of the first ones the summary stands for. Items are numbered from the
// session's start; msgs holds those from base on (the ones a summary stands
// for are dropped: no later context or compaction reads them), so a long
// session's transcript stays the size of its context, and one resumed from
// a context snapshot (resume.go) starts at its cut. A person's steering
// messages follow every item before them and enter msgs as user messages
// (steer.go).
type transcript struct {
	instructions string
	goal         string
	constraints  []string
	criteria     []string
	maxVerify    int // how often unmet criteria send the agent back

	inputs map[string]string
	// msgs are the items from number base on.
	msgs []model.Message
	base int
	// edited holds, per call id, arguments a person edited when approving:
	// the model is told what actually ran.
	edited map[string]string

	summary string
	cut     int
	// tokens remembers the items' token counts (contextTokens).
	tokens itemTokens
	// note is told to the model with the next tool result (e.g. that the
	// workspace was restored from a checkpoint).
	note string
	// changed are the people's workspace changes since the last model
	// call: told at the next one (personnote.go).
	changed []lt.WorkspaceChange
	// notApplied are the people's changes the model was told of that
	// were then not applied (a conflict), to tell it at its next call.
	notApplied []lt.WorkspaceChangeNotAppliedData

	steering
}

func newTranscript(spec *lt.AgentSpec) *transcript {
	return &transcript{
		instructions: spec.Instructions, maxVerify: maxVerifyAttempts(spec),
		inputs: make(map[string]string), edited: make(map[string]string),
	}
}

func transcriptWants(typ string) bool {
	switch typ {
	case lt.EventSessionCreated, lt.EventConstraintAdded, lt.EventTurnCreated, lt.EventTurnStarted,
		lt.EventModelResponded, lt.EventToolCompleted, lt.EventToolFailed, lt.EventActionResolved,
		lt.EventContextCompacted, lt.EventAcceptanceVerified, lt.EventEnvironmentRestored,
		lt.EventTurnSteered, lt.EventModelRequested, lt.EventWorkspaceChanged, lt.EventWorkspaceChangeNotApplied:
		return true
	}
	return false
}

// observe folds one event into the context.
func (t *transcript) observe(ev lt.Event) {
	if !transcriptWants(ev.Type) {
		return
	}
	switch ev.Type {
	case lt.EventSessionCreated:
		if d, err := lt.DataAs[lt.SessionCreatedData](ev); err == nil {
			t.goal, t.constraints, t.criteria = d.Goal, d.Constraints, d.AcceptanceCriteria
		}
	case lt.EventConstraintAdded:
		if d, err := lt.DataAs[lt.ConstraintAddedData](ev); err == nil {
			t.constraints = append(t.constraints, d.Constraint)
		}
	case lt.EventTurnCreated:
		if d, err := lt.DataAs[lt.TurnCreatedData](ev); err == nil {
			t.inputs[d.TurnID] = d.Input
		}
	case lt.EventTurnStarted:
		if d, err := lt.DataAs[lt.TurnStartedData](ev); err == nil {
			t.startTurn(d.TurnID, t.inputs[d.TurnID])
			delete(t.inputs, d.TurnID)
		}
	case lt.EventWorkspaceChanged:
		if d, err := lt.DataAs[lt.WorkspaceChange](ev); err == nil {
			d.Seq = ev.Seq
			t.changed = append(t.changed, d)
		}
	case lt.EventWorkspaceChangeNotApplied:
		if d, err := lt.DataAs[lt.WorkspaceChangeNotAppliedData](ev); err == nil {
			t.changeNotApplied(d)
		}
	case lt.EventModelResponded:
		if d, err := lt.DataAs[lt.ModelRespondedData](ev); err == nil {
			// What the call was told comes before its answer: the people's
			// file changes, then the messages it carried.
			t.flushChanged()
			t.placeSteers(t.sent)
			m := model.Message{Role: model.RoleAssistant, Text: d.Text, Reasoning: d.Reasoning}
			for i, c := range d.ToolCalls {
				m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: callIDOf(c.ID, d.Step, i), Name: c.Name, Arguments: c.Arguments})
			}
			t.msgs = append(t.msgs, m)
		}
	case lt.EventActionResolved:
		if d, err := lt.DataAs[lt.ActionResolvedData](ev); err == nil && len(d.Arguments) > 0 && d.CallID != "" {
			t.edited[d.CallID] = string(d.Arguments)
		}
	case lt.EventToolCompleted:
		if d, err := lt.DataAs[lt.ToolCompletedData](ev); err == nil {
			t.msgs = append(t.msgs, model.Message{Role: model.RoleTool, CallID: d.CallID, Text: t.editNote(d.CallID) + string(d.Output)})
		}
	case lt.EventToolFailed:
		if d, err := lt.DataAs[lt.ToolFailedData](ev); err == nil && !d.Retry {
			text := t.editNote(d.CallID) + d.Error
			if len(d.Output) > 0 {
				text += "\n" + string(d.Output)
			}
			t.msgs = append(t.msgs, model.Message{Role: model.RoleTool, CallID: d.CallID, Text: text, IsError: true})
		}
	case lt.EventEnvironmentRestored:
		if d, err := lt.DataAs[lt.EnvironmentRestoredData](ev); err == nil && d.Note != "" {
			// No note: nothing was lost (an idle stop's recreate).
			t.note = "(" + d.Note + ")\n"
		}
	case lt.EventContextCompacted:
		if d, err := lt.DataAs[lt.ContextCompactedData](ev); err == nil && d.Items <= t.end() && d.Items >= t.base {
			t.summary, t.cut = d.Summary, d.Items
			t.dropSummarised()
		}
	case lt.EventTurnSteered, lt.EventModelRequested:
		t.observeSteering(ev)
	case lt.EventAcceptanceVerified:
		if d, err := lt.DataAs[lt.AcceptanceVerifiedData](ev); err == nil && sendsBack(&d.Verdict, t.maxVerify) {
			t.msgs = append(t.msgs, model.Message{Role: model.RoleUser, Text: unmetFeedback(&d.Verdict)})
		}
	}
}

// leftCallNote answers, in a context, a call that no result followed.
const leftCallNote = "No result: the turn ended before this call finished."

// leftAnswer is an answer a context adds to its items: the result of a
// call that none followed, to go before item at; of is the model answer
// whose call it answers (kept or cut with it).
type leftAnswer struct {
	at, of int
	msg    model.Message
}

// leftAnswers lists the answers items lack: of each model answer that
// other items follow, the calls no result right after it answers. A turn
// that ends before its calls have run leaves them so: its calls not
// started are journaled as not run (answerUnrun), but not a call whose
// approval, function result or answer the turn still awaited, nor any call
// in a journal written before. Providers refuse a context with a call
// left unanswered, so each context answers them; the items themselves stay
// as the journal made them, since a compaction's cut counts them. The
// last answer, which nothing follows, belongs to the step that runs. nil
// (the common case) allocates nothing.
func leftAnswers(items []model.Message) []leftAnswer {
	var out []leftAnswer
	for i, m := range items {
		if m.Role != model.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		j := i + 1
		for j < len(items) && items[j].Role == model.RoleTool {
			j++
		}
		if j == len(items) {
			break
		}
		for _, c := range m.ToolCalls {
			if !slices.ContainsFunc(items[i+1:j], func(r model.Message) bool { return r.CallID == c.ID }) {
				out = append(out, leftAnswer{at: j, of: i, msg: model.Message{Role: model.RoleTool, CallID: c.ID, Text: leftCallNote, IsError: true}})
			}
		}
	}
	return out
}

// withAnswers appends items to out with the answers in their places.
func withAnswers(out, items []model.Message, answers []leftAnswer) []model.Message {
	from := 0
	for _, a := range answers {
		out = append(out, items[from:a.at]...)
		out = append(out, a.msg)
		from = a.at
	}
	return append(out, items[from:]...)
}

// end is the number of items so far.
func (t *transcript) end() int { return t.base + len(t.msgs) }

// from returns the items from number i on.
func (t *transcript) from(i int) []model.Message { return t.msgs[i-t.base:] }

// dropSummarised forgets the items the summary stands for.
func (t *transcript) dropSummarised() {
	t.msgs = slices.Clone(t.from(t.cut))
	t.base = t.cut
}

// editNote tells the model that a person changed a call's arguments.
func (t *transcript) editNote(callID string) string {
	note := t.note
	t.note = ""
	args, ok := t.edited[callID]
	if !ok {
		return note
	}
	delete(t.edited, callID)
	return note + "(A person edited the arguments before approving; the call ran with " + args + ")\n"
}

// pinned is the block every context starts with, verbatim: it is never
// summarised.
func (t *transcript) pinned() string {
	var b strings.Builder
	b.WriteString(t.instructions)
	if t.goal != "" || len(t.constraints) > 0 || len(t.criteria) > 0 {
		b.WriteString("\n\n## Task (pinned)\n")
		if t.goal != "" {
			b.WriteString("Goal: " + t.goal + "\n")
		}
		for _, c := range t.constraints {
			b.WriteString("Constraint: " + c + "\n")
		}
		for _, c := range t.criteria {
			b.WriteString("Acceptance criterion: " + c + "\n")
		}
	}
	return strings.TrimSpace(b.String())
}

// summaryHeading introduces the compaction summary in the system message.
const summaryHeading = "## Summary of the earlier conversation (compacted; the full record is in the journal)"

// continueNote opens the kept items when they do not start with a person's
// message, as some providers require.
const continueNote = "(The earlier conversation is summarised above. Continue the task from where it stands.)"

// messages returns the context of the next model call.
func (t *transcript) messages() []model.Message {
	return t.messagesFrom(t.cut, t.summary)
}

// messagesFrom returns the context with the first cut items replaced by
// summary.
func (t *transcript) messagesFrom(cut int, summary string) []model.Message {
	kept := t.from(cut)
	answers := leftAnswers(kept)
	out := t.contextHead(make([]model.Message, 0, len(kept)+len(answers)+2), cut, summary)
	out = withAnswers(out, kept, answers)
	return t.contextTail(out)
}

// contextHead appends to out what a context starts with before the kept
// items from number cut on: the system message (the pinned block and the
// summary), and a note when the kept items do not start with a person's.
func (t *transcript) contextHead(out []model.Message, cut int, summary string) []model.Message {
	kept := t.from(cut)
	system := t.pinned()
	if summary != "" {
		system = strings.TrimSpace(system + "\n\n" + summaryHeading + "\n" + summary)
	}
	if system != "" {
		out = append(out, model.Message{Role: model.RoleSystem, Text: system})
	}
	if cut > 0 && len(kept) > 0 && kept[0].Role != model.RoleUser {
		out = append(out, model.Message{Role: model.RoleUser, Text: continueNote})
	}
	return out
}

// contextTail appends to out what a context ends with after its items:
// the people's pending changes, then the steering messages no call has
// answered yet.
func (t *transcript) contextTail(out []model.Message) []model.Message {
	if m, ok := t.changedMessage(); ok {
		out = append(out, m)
	}
	return append(out, t.heldSteers()...)
}

// contextTokens is model.CountMessages(c, t.messages(), tools), the count
// every model call of a step is reserved and journaled with. The items'
// counts are remembered (itemTokens): each step counts what was added since
// the last one instead of the whole context again, which a long turn would
// otherwise pay at every step (the items' text hashed or scanned, each
// call's arguments checked for compaction). The answers the context adds
// (leftAnswers) are counted with its edges.
func (t *transcript) contextTokens(c model.Counter, tools []model.ToolDef) int {
	edges := t.contextTail(t.contextHead(make([]model.Message, 0, 4), t.cut, t.summary))
	for _, a := range leftAnswers(t.from(t.cut)) {
		edges = append(edges, a.msg)
	}
	return model.CountMessages(c, edges, tools) + t.tokens.from(c, t, t.cut)
}

// itemTokens remembers the token counts of a transcript's items for one
// counter: sums[i] is the count of msgs[:i]. Items are only ever appended
// to msgs; a compaction or a restore replaces the slice (and its base), and
// an append may move it, so counts made for another slice (its first item
// elsewhere) or another counter are dropped and made again.
type itemTokens struct {
	counter model.Counter
	first   *model.Message
	base    int
	sums    []int
}

// from returns the tokens of t's items from number i on, counting those
// not counted yet.
func (m *itemTokens) from(c model.Counter, t *transcript, i int) int {
	if len(t.msgs) == 0 {
		return 0
	}
	if m.counter != c || m.first != &t.msgs[0] || m.base != t.base || len(m.sums) > len(t.msgs)+1 {
		*m = itemTokens{counter: c, first: &t.msgs[0], base: t.base, sums: append(m.sums[:0], 0)}
	}
	for j := len(m.sums) - 1; j < len(t.msgs); j++ {
		m.sums = append(m.sums, m.sums[j]+model.MessageTokens(c, &t.msgs[j]))
	}
	return m.sums[len(t.msgs)] - m.sums[i-t.base]
}
