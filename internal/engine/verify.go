package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/longhaul-dev/longhaul/internal/journal"
	"github.com/longhaul-dev/longhaul/internal/model"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// defaultVerifyAttempts is how often unmet acceptance criteria send the
// agent back to work before the turn completes with the verdict.
const defaultVerifyAttempts = 2

func maxVerifyAttempts(spec *lt.AgentSpec) int {
	if v := spec.VerifyAcceptance; v != nil && v.MaxAttempts > 0 {
		return v.MaxAttempts
	}
	return defaultVerifyAttempts
}

// sendsBack reports whether a verdict sends the agent back to work: some
// criterion is unmet, the verdict was readable, and attempts are left.
func sendsBack(v *lt.AcceptanceVerdict, maxAttempts int) bool {
	return !v.AllMet && v.Error == "" && v.Attempt <= maxAttempts
}

// unmetFeedback is what the agent reads when its answer fell short.
func unmetFeedback(v *lt.AcceptanceVerdict) string {
	var b strings.Builder
	b.WriteString("Your answer does not meet every acceptance criterion yet:\n")
	for _, c := range v.Criteria {
		if !c.Met {
			fmt.Fprintf(&b, "- %s: %s\n", c.Criterion, c.Reason)
		}
	}
	b.WriteString("Keep working until they are met, then give your final answer again.")
	return b.String()
}

// needsVerification reports whether the final answer of step must be
// checked against the session's acceptance criteria before the turn
// completes.
func (r *runner) needsVerification(step *journal.Step) bool {
	if len(r.st.Session.AcceptanceCriteria) == 0 {
		return false
	}
	if v := r.spec.VerifyAcceptance; v != nil && v.Disabled {
		return false
	}
	return r.st.Verification == nil || r.st.Verification.Step != step.N
}

// verifyPrompt is the instruction of the verification call.
const verifyPrompt = `You check whether an agent's final answer meets the acceptance criteria of its task. Judge each criterion strictly from the answer and the delivered files below; a criterion you cannot confirm is not met. Reply with JSON only, in this form:
{"criteria": [{"criterion": "<the criterion, verbatim>", "met": true, "reason": "<one sentence>"}]}`

// verify runs the verification call on the final answer of step and
// journals its verdict; the next tick completes the turn or sends the agent
// back.
func (r *runner) verify(ctx context.Context, step *journal.Step, answer string) error {
	// A model call like any other: the stop conditions and the budget hold.
	if ok, err := r.checkStop(); !ok || err != nil {
		return err
	}
	if ok, err := r.checkBudget(false); !ok || err != nil {
		return err
	}
	files, err := r.deliveredFiles(ctx)
	if err != nil {
		return err
	}
	var b strings.Builder
	if g := r.st.Session.Goal; g != "" {
		b.WriteString("## Goal\n" + g + "\n\n")
	}
	if cs := r.st.Session.Constraints; len(cs) > 0 {
		b.WriteString("## Constraints\n- " + strings.Join(cs, "\n- ") + "\n\n")
	}
	b.WriteString("## Acceptance criteria\n- " + strings.Join(r.st.Session.AcceptanceCriteria, "\n- ") + "\n\n")
	b.WriteString("## Final answer\n" + answer + "\n")
	for _, f := range files {
		b.WriteString("\n## Delivered file " + f + "\n")
	}
	msgs := []model.Message{{Role: model.RoleSystem, Text: verifyPrompt}, {Role: model.RoleUser, Text: b.String()}}
	res, err := r.invoke(ctx, lt.PurposeVerification, step.N, msgs, nil, nil)
	if res == nil || err != nil {
		return err
	}
	attempt := 1
	if v := r.st.Verification; v != nil && v.Verdict != nil {
		attempt = v.Verdict.Attempt + 1
	}
	verdict := parseVerdict(res.resp.Text, r.st.Session.AcceptanceCriteria)
	verdict.Attempt = attempt
	turn := r.st.CurrentTurn()
	return r.add(lt.EventAcceptanceVerified, turn.ID, step.N, lt.AcceptanceVerifiedData{
		Step: step.N, Verdict: verdict, Usage: res.usage(), CostUSD: res.resp.CostUSD, DurationMS: res.durMS,
	})
}

// maxVerifiedFileBytes bounds how much of one delivered file the verifier
// reads.
const maxVerifiedFileBytes = 16 << 10

// deliveredFiles returns the turn's final artifacts, newest version of each
// name, as "name (type, size)\n<text>" for the verifier (binary files by
// name only).
func (r *runner) deliveredFiles(ctx context.Context) ([]string, error) {
	turn := r.st.CurrentTurn()
	rows, err := r.e.store.ArtifactList(ctx, r.st.Session.ID)
	if err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	arts, err := decodeDocs[lt.Artifact](rows)
	if err != nil {
		return nil, err
	}
	latest := map[string]lt.Artifact{}
	var order []string
	for _, a := range arts {
		if a.TurnID != turn.ID || !a.Final {
			continue
		}
		if _, ok := latest[a.Name]; !ok {
			order = append(order, a.Name)
		}
		if a.Version >= latest[a.Name].Version {
			latest[a.Name] = a
		}
	}
	var out []string
	for _, name := range order {
		a := latest[name]
		head := fmt.Sprintf("%s (%s, %d bytes)", a.Name, a.ContentType, a.Size)
		data, err := r.e.store.BlobGet(ctx, a.SHA256)
		if err != nil {
			return nil, fmt.Errorf("read artifact %s: %w", a.ID, err)
		}
		if !utf8.Valid(data) {
			out = append(out, head+"\n(binary content not shown)")
			continue
		}
		text := string(data)
		if len(text) > maxVerifiedFileBytes {
			text = clip(text, maxVerifiedFileBytes) + "\n(cut: the file is longer)"
		}
		out = append(out, head+"\n"+text)
	}
	return out, nil
}

// parseVerdict reads the verifier's JSON (the first object in its text).
// Criteria it left out count as unmet; a reply that is not the expected
// JSON gives a verdict with Error set, which completes the turn rather
// than sending the agent back on a guess.
func parseVerdict(text string, criteria []string) lt.AcceptanceVerdict {
	v := lt.AcceptanceVerdict{Criteria: make([]lt.CriterionVerdict, len(criteria))}
	for i, c := range criteria {
		v.Criteria[i] = lt.CriterionVerdict{Criterion: c, Reason: "not assessed by the verifier"}
	}
	start, end := strings.Index(text, "{"), strings.LastIndex(text, "}")
	var reply struct {
		Criteria []lt.CriterionVerdict `json:"criteria"`
	}
	if start < 0 || end < start || json.Unmarshal([]byte(text[start:end+1]), &reply) != nil || len(reply.Criteria) == 0 {
		v.Error = "the verifier's reply is not the expected JSON: " + clip(strings.TrimSpace(text), 200)
		return v
	}
	for _, got := range reply.Criteria {
		for i := range v.Criteria {
			if strings.EqualFold(strings.TrimSpace(got.Criterion), strings.TrimSpace(v.Criteria[i].Criterion)) {
				v.Criteria[i].Met, v.Criteria[i].Reason = got.Met, got.Reason
			}
		}
	}
	v.AllMet = true
	for _, c := range v.Criteria {
		v.AllMet = v.AllMet && c.Met
	}
	return v
}
