package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/policy"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// flakyTool is a read-only tool that fails every call whose n is a
// multiple of 3, so a history holds failed effects beside succeeded ones.
type flakyTool struct{}

func (flakyTool) Name() string                { return "flaky" }
func (flakyTool) Description() string         { return "Fails one call in three." }
func (flakyTool) Parameters() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (flakyTool) Effect() lt.EffectClass      { return lt.EffectRead }
func (flakyTool) Run(_ context.Context, c *tool.Call) (*tool.Result, error) {
	var args struct {
		N int `json:"n"`
	}
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return nil, err
	}
	if args.N%3 == 0 {
		return &tool.Result{Error: fmt.Sprintf("call %d failed", args.N)}, nil
	}
	return &tool.Result{Output: "ok"}, nil
}

// trajectoryCall is the call number n of the trajectory test's model:
// echo and flaky in turn, with amounts, a nested object and, every fifth
// call, arguments padded past the test's blob threshold (journaled as a
// blob).
func trajectoryCall(n int) model.ToolCall {
	args := map[string]any{"n": n, "amount_usd": float64(n%7) + 0.25, "meta": map[string]any{"tag": fmt.Sprintf("t%d", n%4)}}
	if n%5 == 0 {
		args["pad"] = strings.Repeat("p", 400)
	}
	name := "echo"
	if n%2 == 0 {
		name = "flaky"
	}
	raw, _ := json.Marshal(args)
	return model.ToolCall{Name: name, Arguments: raw}
}

// trajectoryRules are rules of every kind the policy tests exercise
// (count, sum over arguments, last with a status, filters, the error, the
// step and turn, has on arguments, nested arguments), each deciding ask
// when its condition holds.
var trajectoryRules = []string{
	`count(effects, e.tool == "flaky") >= 3`,
	`count(effects, e.status == "failed") > 2`,
	`sum(effects.filter(x, x.tool == "echo"), e.args.amount_usd) + args.amount_usd > 100`,
	`sum(effects, has(e.args.pad) ? 1.0 : 0.0) >= 2.0`,
	`last(effects, e.tool == "flaky").status == "failed"`,
	`last(effects, e.status == "failed").error.contains("failed")`,
	`effects.exists(x, x.args.meta.tag == "t3" && x.step > 50)`,
	`size(effects) > 0 && effects[size(effects) - 1].turn_id != ""`,
	`effects.all(x, x.session_id != "" && x.class == "read")`,
	`count(effects, e.args.n > args.n) == 0`,
}

// TestTrajectoryPolicyResumesFromTheSnapshot: an agent whose policy reads
// past effects compacts many times and is resumed: its claim reads none of
// the journal before the latest compaction's snapshot, and the effect
// history it starts from is the one a replay of the whole journal gives,
// so every trajectory rule decides alike on both.
func TestTrajectoryPolicyResumesFromTheSnapshot(t *testing.T) {
	const perTurn = 40
	e, cs := startResumeEngine(t, perTurn, func(c *Config) {
		c.Tools = append(c.Tools, flakyTool{})
		c.Providers["trajectory"] = &stepsModel{perTurn: perTurn, call: trajectoryCall}
		// Arguments past this are journaled as a blob.
		c.BlobThreshold = 300
	})
	ctx := context.Background()
	spec := resumeSpec(perTurn)
	spec.Model.Provider = "trajectory"
	spec.Tools = append(spec.Tools, lt.ToolSpec{Name: "flaky"})
	// Never matches, but makes the runner keep the effect history.
	spec.Policies = []lt.Policy{{Name: "never", Tool: "*", When: `count(effects, e.tool == "none") > 0`, Decision: lt.PolicyDeny}}
	s, err := e.CreateSession(ctx, &lt.CreateSessionRequest{AgentSpec: spec, Input: "go"})
	require.NoError(t, err)
	waitIdle(t, e, s.ID)
	for range 3 {
		continueTurn(t, e, s.ID)
	}
	_, st, err := e.loadState(ctx, s.ID)
	require.NoError(t, err)
	require.NotNil(t, st.ContextSnapshot, "the session compacted")
	from, journal := st.ContextSnapshot.Seq, st.Session.LastEventSeq
	require.Greater(t, from, journal/2, "compacted late in the session")

	cs.arm(true)
	continueTurn(t, e, s.ID)
	reads := cs.arm(false)
	require.NotEmpty(t, reads)
	for _, r := range reads {
		require.GreaterOrEqual(t, r.after, from, "a read before the latest compaction (seq %d)", from)
	}

	resumed, full := resumedAndReplayed(t, e, s.ID)
	require.NotNil(t, resumed.h)
	require.NotNil(t, full.h)
	require.Equal(t, full.h.effects, resumed.h.effects)
	require.Equal(t, full.h.byID, resumed.h.byID)
	require.Equal(t, full.h.args, resumed.h.args)
	// A tree's other session is followed from its snapshot the same way
	// (treeEffects): its history and the events after it give the replay's.
	other, at, err := e.snapshotHistory(ctx, s.ID)
	require.NoError(t, err)
	require.NotNil(t, other)
	require.GreaterOrEqual(t, at, from, "from the latest compaction")
	evs, err := e.store.EventList(ctx, s.ID, at, 10000)
	require.NoError(t, err)
	for _, ev := range evs {
		w, err := e.resolveBlob(ctx, wireEvent(ev), true)
		require.NoError(t, err)
		other.observe(w)
	}
	require.Equal(t, full.h.effects, other.effects)

	var failed, padded int
	for _, eff := range full.h.effects {
		if eff.Status == lt.EffectFailed {
			failed++
		}
		if m, ok := eff.Args.(map[string]any); ok && m["pad"] != nil {
			padded++
		}
	}
	require.Positive(t, failed, "the history holds failed effects")
	require.Positive(t, padded, "the history holds arguments journaled as a blob")

	for i, when := range trajectoryRules {
		set, err := policy.Compile([]lt.Policy{{Tool: "*", When: when, Decision: lt.PolicyAsk}}, []string{"echo", "flaky"})
		require.NoError(t, err, "rule %d", i)
		for _, call := range []string{`{"n":1,"amount_usd":1}`, `{"n":1000,"amount_usd":90}`} {
			in := func(h *history) *policy.Input {
				return &policy.Input{Tool: "echo", Arguments: json.RawMessage(call), Effects: h.effects}
			}
			require.Equal(t, set.Evaluate(in(full.h)), set.Evaluate(in(resumed.h)), "rule %d (%s) on %s", i, when, call)
		}
	}
}

// resumedAndReplayed builds a runner of the session as a claim does (from
// its latest snapshot) and another from the whole journal.
func resumedAndReplayed(t *testing.T, e *Engine, id string) (resumed, full *runner) {
	t.Helper()
	ctx := context.Background()
	resumed, err := e.newRunner(ctx, store.Lease{SessionID: id})
	require.NoError(t, err)
	t.Cleanup(resumed.env.close)
	require.Positive(t, resumed.tx.base, "resumed from a snapshot")

	full, err = e.newRunner(ctx, store.Lease{SessionID: id})
	require.NoError(t, err)
	t.Cleanup(full.env.close)
	full.tx, full.mcp, full.wsWriter = newTranscript(&full.spec), newMCPTools(), ""
	full.tools = newToolCatalog(e.tools, &full.spec)
	if full.h != nil {
		full.h = newHistory()
	}
	full.st.ContextSnapshot = nil
	require.NoError(t, full.rebuild(ctx, full.durableSeq))
	return resumed, full
}
