package engine

import (
	"encoding/json"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// transcript is the model context of a session, rebuilt from its journal: the
// pinned block (instructions, goal, constraints, acceptance criteria) first
// and verbatim, then the conversation. A turn's input enters the
// conversation when the turn starts, not when it is queued.
type transcript struct {
	system string
	inputs map[string]string
	msgs   []model.Message
	// edited holds, per call id, arguments a person edited when approving:
	// the model is told what actually ran.
	edited map[string]string
}

func newTranscript(spec *lt.AgentSpec, st *journal.State) *transcript {
	var b strings.Builder
	b.WriteString(spec.Instructions)
	s := st.Session
	if s.Goal != "" || len(s.Constraints) > 0 || len(s.AcceptanceCriteria) > 0 {
		b.WriteString("\n\n## Task (pinned)\n")
		if s.Goal != "" {
			b.WriteString("Goal: " + s.Goal + "\n")
		}
		for _, c := range s.Constraints {
			b.WriteString("Constraint: " + c + "\n")
		}
		for _, c := range s.AcceptanceCriteria {
			b.WriteString("Acceptance criterion: " + c + "\n")
		}
	}
	return &transcript{system: strings.TrimSpace(b.String()), inputs: make(map[string]string), edited: make(map[string]string)}
}

func transcriptWants(typ string) bool {
	switch typ {
	case lt.EventTurnCreated, lt.EventTurnStarted, lt.EventModelResponded, lt.EventToolCompleted, lt.EventToolFailed,
		lt.EventActionResolved:
		return true
	}
	return false
}

// observe folds one event into the conversation.
func (t *transcript) observe(ev lt.Event) {
	switch ev.Type {
	case lt.EventTurnCreated:
		var d journal.TurnCreated
		if json.Unmarshal(ev.Data, &d) == nil {
			t.inputs[d.TurnID] = d.Input
		}
	case lt.EventTurnStarted:
		var d journal.TurnStarted
		if json.Unmarshal(ev.Data, &d) == nil {
			t.msgs = append(t.msgs, model.Message{Role: model.RoleUser, Text: t.inputs[d.TurnID]})
			delete(t.inputs, d.TurnID)
		}
	case lt.EventModelResponded:
		var d journal.ModelResponded
		if json.Unmarshal(ev.Data, &d) == nil {
			m := model.Message{Role: model.RoleAssistant, Text: d.Text}
			for _, c := range d.ToolCalls {
				m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
			}
			t.msgs = append(t.msgs, m)
		}
	case lt.EventActionResolved:
		var d journal.ActionResolved
		if json.Unmarshal(ev.Data, &d) == nil && len(d.Arguments) > 0 && d.CallID != "" {
			t.edited[d.CallID] = string(d.Arguments)
		}
	case lt.EventToolCompleted:
		var d journal.ToolCompleted
		if json.Unmarshal(ev.Data, &d) == nil {
			t.msgs = append(t.msgs, model.Message{Role: model.RoleTool, CallID: d.CallID, Text: t.editNote(d.CallID) + string(d.Output)})
		}
	case lt.EventToolFailed:
		var d journal.ToolFailed
		if json.Unmarshal(ev.Data, &d) == nil && !d.Retry {
			text := t.editNote(d.CallID) + d.Error
			if len(d.Output) > 0 {
				text += "\n" + string(d.Output)
			}
			t.msgs = append(t.msgs, model.Message{Role: model.RoleTool, CallID: d.CallID, Text: text, IsError: true})
		}
	}
}

// editNote tells the model that a person changed a call's arguments.
func (t *transcript) editNote(callID string) string {
	args, ok := t.edited[callID]
	if !ok {
		return ""
	}
	delete(t.edited, callID)
	return "(A person edited the arguments before approving; the call ran with " + args + ")\n"
}

// messages returns the context of the next model call.
func (t *transcript) messages() []model.Message {
	out := make([]model.Message, 0, len(t.msgs)+1)
	if t.system != "" {
		out = append(out, model.Message{Role: model.RoleSystem, Text: t.system})
	}
	return append(out, t.msgs...)
}

// toolDefs describes the agent's tools to the model.
func (e *Engine) toolDefs(spec *lt.AgentSpec) []model.ToolDef {
	var out []model.ToolDef
	for _, ts := range spec.Tools {
		switch {
		case ts.Type == "function":
			params := ts.Parameters
			if len(params) == 0 {
				params = json.RawMessage(`{"type":"object"}`)
			}
			out = append(out, model.ToolDef{Name: ts.Name, Description: ts.Description, Parameters: params})
		case engineTools[ts.Name].kind != "":
			et := engineTools[ts.Name]
			desc := et.description
			if ts.Description != "" {
				desc = ts.Description
			}
			out = append(out, model.ToolDef{Name: ts.Name, Description: desc, Parameters: et.schema})
		default:
			if t, ok := e.tools.Get(ts.Name); ok {
				desc := t.Description()
				if ts.Description != "" {
					desc = ts.Description
				}
				out = append(out, model.ToolDef{Name: t.Name(), Description: desc, Parameters: t.Parameters()})
			}
		}
	}
	return out
}
