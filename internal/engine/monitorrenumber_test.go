package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// meddlingTool fails every call, and while it runs another writer (a
// person adding a constraint over the API) appends to the session: the
// runner's unsaved tool.failed then lands after that event, at another seq
// than the one it had when the monitor read it.
type meddlingTool struct{ h **harness }

func (meddlingTool) Name() string                { return "meddle" }
func (meddlingTool) Description() string         { return "Fails, while someone else writes." }
func (meddlingTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (meddlingTool) Effect() lt.EffectClass      { return lt.EffectRead }
func (m meddlingTool) Run(ctx context.Context, c *tool.Call) (*tool.Result, error) {
	if _, err := (*m.h).eng.AddConstraint(ctx, c.SessionID, &lt.AddConstraintRequest{Constraint: "stay calm"}); err != nil {
		return nil, err
	}
	return &tool.Result{Error: "it did not work"}, nil
}

// TestMonitorEvidenceAfterAConcurrentAppend: a finding whose evidence
// events were appended after another writer's names those events, not the
// seqs they had before (with and without a policy over past effects, which
// merge the other writer's events two ways).
func TestMonitorEvidenceAfterAConcurrentAppend(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policies []lt.Policy
	}{
		{"rederived", nil},
		{"followed", []lt.Policy{{Name: "never", Tool: "*", When: `count(effects, e.tool == "none") > 0`, Decision: lt.PolicyDeny}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			h = newHarness(t, meddlingTool{h: &h})
			meddle := `{"name":"meddle","arguments":{"x":1}}`
			sp := spec(t, calls(t, meddle, meddle, meddle), lt.ToolSpec{Name: "meddle"})
			sp.Monitor = allLog()
			sp.Policies = tc.policies
			s := create(t, h, sp, nil)
			h.waitStatus(s.ID, lt.SessionIdle)
			require.Len(t, events(t, h, s.ID, lt.EventConstraintAdded), 3, "three writes landed during the calls")
			got := findings(t, h, s.ID)["repeated_failure"]
			require.Len(t, got, 1, "%v", findings(t, h, s.ID))
			evs := events(t, h, s.ID)
			require.Len(t, got[0].Evidence, 3)
			for _, seq := range got[0].Evidence {
				ev := evs[seq-1]
				require.Equal(t, lt.EventToolFailed, ev.Type, "evidence seq %d names a %s", seq, ev.Type)
				require.Equal(t, "meddle", data[lt.ToolFailedData](t, ev).Tool)
			}
			checkJournal(t, h.store, s.ID)
		})
	}
}
