package engine

import (
	"fmt"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The model is told which files a person changed (workspace.changed) at
// its next call: a person's message after everything else in the context,
// built from the changes journaled since its last call. When the call is
// answered (model.responded), the message takes its place in the
// conversation just before the answer, so every later context, and one
// rebuilt from the journal after a crash, shows the model what it saw, in
// order. Tool results of a step a person changed files in the middle of
// still come right after the call that asked for them: the message waits
// for the next model call.

// changedMessage is the message telling the pending changes, if any.
func (t *transcript) changedMessage() (model.Message, bool) {
	if len(t.changed) == 0 && len(t.notApplied) == 0 {
		return model.Message{}, false
	}
	var parts []string
	if len(t.changed) > 0 {
		parts = append(parts, personChangesText(t.changed))
	}
	if len(t.notApplied) > 0 {
		parts = append(parts, notAppliedText(t.notApplied))
	}
	return model.Message{Role: model.RoleUser, Text: strings.Join(parts, "\n")}, true
}

// changeNotApplied notes a person's change that was not applied: one the
// model was not told of yet is simply never told (nothing changed); one
// it was told of is taken back at its next call.
func (t *transcript) changeNotApplied(d lt.WorkspaceChangeNotAppliedData) {
	for i, c := range t.changed {
		if c.Seq == d.ChangeSeq {
			t.changed = append(t.changed[:i:i], t.changed[i+1:]...)
			return
		}
	}
	t.notApplied = append(t.notApplied, d)
}

// notAppliedText tells the model which changes it was told of were not
// made after all.
func notAppliedText(ds []lt.WorkspaceChangeNotAppliedData) string {
	var conflicts, failed strings.Builder
	for _, d := range ds {
		if d.Reason == lt.NotAppliedFailed {
			fmt.Fprintf(&failed, "\n- %s %s: %s", d.Op, d.Path, d.Error)
		} else {
			fmt.Fprintf(&conflicts, "\n- %s %s", d.Op, d.Path)
		}
	}
	var parts []string
	if conflicts.Len() > 0 {
		parts = append(parts, "These changes a person made were not applied after all: you had changed the file since the person saw it, and what you wrote is kept:"+conflicts.String())
	}
	if failed.Len() > 0 {
		parts = append(parts, "These changes a person made could not be applied to the workspace as it is now, and are not:"+failed.String())
	}
	return "(" + strings.Join(parts, "\n") + ")"
}

// flushChanged moves the pending changes' message into the conversation
// (at a model response: the call that was told).
func (t *transcript) flushChanged() {
	if m, ok := t.changedMessage(); ok {
		t.msgs = append(t.msgs, m)
		t.changed, t.notApplied = nil, nil
	}
}

// personChangesText lists the changes, the latest of each path last.
func personChangesText(changes []lt.WorkspaceChange) string {
	var b strings.Builder
	b.WriteString("(A person changed files in the workspace since your last step:")
	for _, c := range changes {
		switch c.Op {
		case lt.WorkspaceDelete:
			fmt.Fprintf(&b, "\n- deleted %s", c.Path)
		default:
			fmt.Fprintf(&b, "\n- wrote %s (%d bytes, sha256 %s)", c.Path, c.Size, c.SHA256)
		}
	}
	b.WriteString("\nRead these files again before you rely on what you knew of them.)")
	return b.String()
}
