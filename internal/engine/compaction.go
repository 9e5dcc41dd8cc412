package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// defaultCompactionThreshold is the share of the context window the next
// context may fill before older items are summarised.
const defaultCompactionThreshold = 0.7

func (r *runner) compactionEnabled() bool {
	return r.spec.Compaction == nil || !r.spec.Compaction.Disabled
}

func (r *runner) compactionThreshold() float64 {
	if c := r.spec.Compaction; c != nil && c.Threshold > 0 {
		return c.Threshold
	}
	return defaultCompactionThreshold
}

// compactIfNeeded summarises older conversation items when the next
// context would pass the agent's threshold of the model's window, or when
// the provider said the context is too long (DESIGN.md principle 5). The
// pinned block is never summarised; the journal keeps every item. It
// reports whether it made a call (done: the caller's tick ends there).
func (r *runner) compactIfNeeded(ctx context.Context, stepN int) (bool, error) {
	if !r.compactionEnabled() {
		return false, nil
	}
	forced := r.st.ForceCompact
	window := model.ContextWindow(r.spec.Model)
	if window <= 0 && !forced {
		return false, nil
	}
	counter := model.CounterFor(r.spec.Model.Provider, r.spec.Model.Name)
	before := r.tx.contextTokens(counter, r.tools.definitions())
	limit := int(r.compactionThreshold() * float64(window))
	if !forced && before <= limit {
		return false, nil
	}
	keep := limit / 2
	if window <= 0 {
		keep = before / 2
	}
	cut := r.tx.chooseCut(counter, keep)
	if cut <= r.tx.cut {
		if forced {
			return true, r.failTurn(lt.StopProviderError, "the context is too long for the model, and nothing is left to compact: the pinned block and the latest items alone are too large")
		}
		return false, nil // nothing to summarise yet: send as is
	}
	if r.lookDeferred {
		// The summary's call is made under no conditional request of its
		// own: the tick's look comes first, and anything it reads in
		// sends the runner back to its tick.
		r.lookDeferred = false
		seen := r.durableSeq
		if err := r.readControls(ctx); err != nil {
			return true, err
		}
		if err := r.readSteers(ctx, false); err != nil || r.durableSeq != seen || r.st.Pause != nil {
			return true, err
		}
	}
	res, err := r.invoke(ctx, lt.PurposeCompaction, stepN, r.tx.summaryRequest(cut), nil, nil)
	if res == nil || err != nil {
		return true, err
	}
	summary := strings.TrimSpace(res.resp.Text)
	if summary == "" {
		summary = "(The summariser returned nothing; the earlier conversation is in the journal.)"
	}
	after := model.CountMessages(counter, r.tx.messagesFrom(cut, summary), r.tools.definitions())
	turn := r.st.CurrentTurn()
	d := lt.ContextCompactedData{
		Step: stepN, Items: cut, TokensBefore: before, TokensAfter: after, Summary: summary, Forced: forced,
		Usage: res.usage(), CostUSD: res.resp.CostUSD, DurationMS: res.durMS,
	}
	// A worker resuming the session starts from here (resume.go).
	snap, ok, err := r.contextSnapshotFor(ctx, cut, summary)
	if err != nil {
		return true, err
	}
	if ok {
		d.Snapshot = &lt.BlobRef{SHA256: r.b.blob(snap), Size: int64(len(snap))}
	}
	return true, r.add(lt.EventContextCompacted, turn.ID, stepN, d)
}

// chooseCut returns how many items to summarise so that the items kept fit
// in keep tokens: the latest items are kept (at least the last one), and
// the kept part never starts with a tool result (its call must come with
// it).
func (t *transcript) chooseCut(c model.Counter, keep int) int {
	end := t.end()
	cut := end
	used := 0
	// A model answer kept brings the answers a context adds for its calls
	// left without a result (messagesFrom): they count where it does.
	answers := leftAnswers(t.from(t.cut))
	for i := end - 1; i > t.cut; i-- {
		item := t.from(i)[:1]
		used += model.CountMessages(c, item, nil)
		for n := len(answers); n > 0 && t.cut+answers[n-1].of >= i; n-- {
			if t.cut+answers[n-1].of == i {
				used += model.MessageTokens(c, &answers[n-1].msg)
			}
			answers = answers[:n-1]
		}
		if used > keep && cut < end {
			break
		}
		if item[0].Role != model.RoleTool {
			cut = i
		}
	}
	if cut == end {
		return t.cut
	}
	return cut
}

// summarisePrompt is the instruction of the compaction call.
const summarisePrompt = `You compact the working memory of an agent that works on a long task. Summarise the conversation below for the agent itself, so it can go on without it: what was asked, what was done (files, commands, calls and their outcomes), what was learned, decisions made and why, open problems, and what remains to do. Keep names, paths, ids and numbers exact. Write plain prose and short lists that a person can read. Do not restate the task's instructions, goal, constraints or acceptance criteria: they are kept verbatim elsewhere.`

// pinnedForSummariser introduces the pinned block in the compaction call:
// like every model call it carries the task, so the summary keeps what the
// goal and the constraints make important.
const pinnedForSummariser = "## The agent's instructions and task (pinned; kept verbatim elsewhere, for reference only)"

// summaryRequest builds the compaction call: the pinned block, the previous
// summary and the items from the last cut up to cut, rendered as text.
func (t *transcript) summaryRequest(cut int) []model.Message {
	var b strings.Builder
	if t.summary != "" {
		b.WriteString("## Summary so far\n" + t.summary + "\n\n")
	}
	b.WriteString("## Conversation to summarise\n")
	items := t.from(t.cut)[:cut-t.cut]
	answers := leftAnswers(t.from(t.cut)) // a call left without a result says so here too
	for len(answers) > 0 && answers[len(answers)-1].at > len(items) {
		answers = answers[:len(answers)-1]
	}
	for _, m := range withAnswers(nil, items, answers) {
		switch m.Role {
		case model.RoleUser:
			b.WriteString("[person] " + m.Text + "\n")
		case model.RoleAssistant:
			if m.Text != "" {
				b.WriteString("[agent] " + m.Text + "\n")
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "[agent calls %s] %s\n", c.Name, c.Arguments)
			}
		case model.RoleTool:
			label := "result"
			if m.IsError {
				label = "error"
			}
			fmt.Fprintf(&b, "[tool %s] %s\n", label, clip(m.Text, 4000))
		}
	}
	system := summarisePrompt
	if pinned := t.pinned(); pinned != "" {
		system += "\n\n" + pinnedForSummariser + "\n" + pinned
	}
	return []model.Message{
		{Role: model.RoleSystem, Text: system},
		{Role: model.RoleUser, Text: b.String()},
	}
}
