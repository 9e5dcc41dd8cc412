package journal

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestApplyAcceptsEveryEventType plays one session's journal that holds
// every event type of lt.EventTypes, each with its registered payload type,
// in an order a writer could produce: Apply accepts each event. A type
// added to the registry fails here until the journal holds it.
func TestApplyAcceptsEveryEventType(t *testing.T) {
	t.Parallel()
	b := &builder{t: t}
	played := map[string]bool{}
	must := func(typ, turn string, data any) {
		t.Helper()
		want, ok := lt.NewEventData(typ)
		require.True(t, ok, "%s is registered", typ)
		require.Equal(t, reflect.TypeOf(want).Elem(), reflect.TypeOf(data), "%s carries its registered type", typ)
		b.must(typ, turn, data)
		played[typ] = true
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	usage := lt.Usage{InputTokens: 100, OutputTokens: 10}

	must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go", Budget: lt.Budget{MaxCostUSD: 5}})
	must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	must(lt.EventSessionStatusChanged, "", lt.SessionStatusChangedData{From: lt.SessionQueued, To: lt.SessionRunning})
	must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1", Deadline: &at})
	must(lt.EventMCPToolsListed, "t1", lt.MCPToolsListedData{Server: "fs", Reason: "first", Tools: []lt.MCPTool{{Name: "fs__read", Tool: "read", InputSchema: json.RawMessage(`{}`), Effect: lt.EffectRead, EffectFrom: "default"}}})
	must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 1, Attempt: 1, Provider: "scripted"})
	must(lt.EventModelDelta, "t1", lt.ModelDeltaData{Step: 1, Attempt: 1, Text: "wor"})
	must(lt.EventModelFailed, "t1", lt.ModelFailedData{Step: 1, Attempt: 1, Kind: "rate_limited", Message: "429", Consumed: true, Retry: true})
	must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 1, Position: 1, Usage: usage, CostUSD: 0.1, ToolCalls: []lt.ToolCall{
		{ID: "c1", Name: "shell"}, {ID: "c2", Name: "wait_for_signal"}, {ID: "c3", Name: "spawn_agent"}, {ID: "c4", Name: "fs__read"}, {ID: "c5", Name: "nope"},
	}})

	// A built-in call through a policy, the network and a lost workspace.
	must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 0, CallID: "c1", Tool: "shell", Kind: lt.CallBuiltin, Class: lt.EffectIdempotent, Arguments: json.RawMessage(`{}`)})
	must(lt.EventPolicyDecided, "t1", lt.PolicyDecidedData{Step: 1, Index: 0, CallID: "c1", Tool: "shell", Decision: lt.PolicyAllow, Rule: "r1"})
	must(lt.EventToolStarted, "t1", lt.ToolStartedData{Step: 1, Index: 0, CallID: "c1", Tool: "shell", EffectID: "e1", IdempotencyKey: "k1", Class: lt.EffectIdempotent, Attempt: 1})
	must(lt.EventNetworkConnection, "t1", lt.NetworkConnectionData{Step: 1, Index: 0, CallID: "c1", Tool: "shell", Via: "proxy", Host: "example.org", Port: 443, Allowed: true})
	must(lt.EventEnvironmentStopping, "t1", lt.EnvironmentStoppingData{Reason: "idle", Snapshot: "s1"})
	must(lt.EventEnvironmentStopFailed, "t1", lt.EnvironmentStopFailedData{Reason: "idle", Error: "busy"})
	must(lt.EventEnvironmentStopped, "t1", lt.EnvironmentStoppedData{Reason: "idle", Snapshot: "s1"})
	must(lt.EventEnvironmentProvisioned, "t1", lt.EnvironmentProvisionedData{})
	must(lt.EventEnvironmentOpened, "t1", lt.EnvironmentOpenedData{Runner: "box1", Provisioned: true})
	must(lt.EventEnvironmentLost, "t1", lt.EnvironmentLostData{Reason: "gone"})
	must(lt.EventEnvironmentRestored, "t1", lt.EnvironmentRestoredData{Note: "restored empty"})
	must(lt.EventToolCompleted, "t1", lt.ToolCompletedData{Step: 1, Index: 0, CallID: "c1", Tool: "shell", EffectID: "e1", Output: json.RawMessage(`"ok"`)})

	// A durable wait a signal ends.
	must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 1, CallID: "c2", Tool: "wait_for_signal", Kind: lt.CallWait, Class: lt.EffectRead, Arguments: json.RawMessage(`{}`)})
	must(lt.EventWaitStarted, "t1", lt.WaitStartedData{Step: 1, Index: 1, CallID: "c2", Tool: "wait_for_signal", Kind: lt.WaitSignal, Name: "go"})
	must(lt.EventSignalReceived, "", lt.SignalReceivedData{ID: "sig_1", Name: "go"})
	require.True(t, b.st.Wait.Ready(at))
	must(lt.EventToolCompleted, "t1", lt.ToolCompletedData{Step: 1, Index: 1, CallID: "c2", Tool: "wait_for_signal", Output: json.RawMessage(`{}`)})

	// A sub-agent: spawned, reported, asked to stop.
	must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 2, CallID: "c3", Tool: "spawn_agent", Kind: lt.CallSpawn, Class: lt.EffectIdempotent, Arguments: json.RawMessage(`{}`)})
	must(lt.EventSubagentSpawned, "t1", lt.SubagentSpawnedData{Step: 1, Index: 2, CallID: "c3", ChildID: "ses_c", Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "help"})
	must(lt.EventSubagentCompleted, "t1", lt.SubagentCompletedData{ChildID: "ses_c", TurnID: "tc", Status: lt.TurnCompleted, Output: "done", Usage: usage})
	must(lt.EventSubagentCancelRequested, "t1", lt.SubagentCancelRequestedData{ChildID: "ses_c", Reason: "turn ended"})
	must(lt.EventToolCompleted, "t1", lt.ToolCompletedData{Step: 1, Index: 2, CallID: "c3", Tool: "spawn_agent", Output: json.RawMessage(`{}`)})

	// An MCP call whose server died: in doubt, decided by a person.
	must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 3, CallID: "c4", Tool: "fs__read", Server: "fs", Kind: lt.CallMCP, Class: lt.EffectIrreversible, Arguments: json.RawMessage(`{}`)})
	must(lt.EventToolStarted, "t1", lt.ToolStartedData{Step: 1, Index: 3, CallID: "c4", Tool: "fs__read", Server: "fs", EffectID: "e4", IdempotencyKey: "k4", Class: lt.EffectIrreversible, Attempt: 1})
	must(lt.EventMCPServerLost, "t1", lt.MCPServerLostData{Step: 1, Index: 3, CallID: "c4", Tool: "fs__read", Server: "fs", Error: "EOF"})
	must(lt.EventEffectInDoubt, "t1", lt.EffectInDoubtData{Step: 1, Index: 3, CallID: "c4", Tool: "fs__read", EffectID: "e4", ActionID: "a1", Reason: "server lost"})
	must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: lt.Action{ID: "a1", Type: lt.ActionInDoubt, TurnID: "t1", Step: 1, CallID: "c4", EffectID: "e4"}})
	must(lt.EventActionResolved, "t1", lt.ActionResolvedData{ActionID: "a1", Type: string(lt.ActionInDoubt), CallID: "c4", Decision: lt.Decision{Decision: lt.DecisionHappened}})
	must(lt.EventToolCompleted, "t1", lt.ToolCompletedData{Step: 1, Index: 3, CallID: "c4", Tool: "fs__read", Server: "fs", EffectID: "e4", Output: json.RawMessage(`null`), Resolution: lt.DecisionHappened})

	// An invalid call fails at once.
	must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 4, CallID: "c5", Tool: "nope", Kind: lt.CallInvalid, Class: lt.EffectRead, Arguments: json.RawMessage(`{}`)})
	must(lt.EventToolFailed, "t1", lt.ToolFailedData{Step: 1, Index: 4, CallID: "c5", Tool: "nope", Error: "unknown tool"})

	// The step's checkpoint, an artifact, budgets, a person's constraint and file.
	must(lt.EventCheckpointCreated, "t1", lt.CheckpointCreatedData{Checkpoint: lt.Checkpoint{ID: "cp1", TurnID: "t1", Step: 1, Kind: lt.CheckpointStep, Snapshot: "snap1"}})
	must(lt.EventArtifactCreated, "t1", lt.ArtifactCreatedData{Artifact: lt.Artifact{ID: "art1", TurnID: "t1", Name: "out.md", Version: 1}})
	must(lt.EventBudgetWarning, "t1", lt.BudgetWarningData{Limit: lt.BudgetLimit{Name: "cost_usd", Max: 5, Used: 4.1}})
	must(lt.EventBudgetExceeded, "t1", lt.BudgetExceededData{Limit: "cost_usd", Max: 5, Used: 5})
	must(lt.EventBudgetUpdated, "", lt.BudgetUpdatedData{Budget: lt.Budget{MaxCostUSD: 10}})
	must(lt.EventConstraintAdded, "", lt.ConstraintAddedData{Constraint: "be brief"})
	must(lt.EventWorkspaceChanged, "", lt.WorkspaceChange{By: lt.ChangedByPerson, Op: lt.WorkspaceWrite, Path: "notes.md", SHA256: "ab", Size: 2})
	must(lt.EventWorkspaceChanged, "", lt.WorkspaceChange{By: lt.ChangedByPerson, Op: lt.WorkspaceWrite, Path: "old.md", SHA256: "ab", Size: 2, BasedOn: lt.BasedOnAbsent})
	must(lt.EventWorkspaceChangeNotApplied, "", lt.WorkspaceChangeNotAppliedData{ChangeSeq: b.seq, Op: lt.WorkspaceWrite, Path: "old.md", Reason: lt.NotAppliedConflict, BasedOn: lt.BasedOnAbsent, Found: "sha256:cd"})

	// Step 2 compacts, carries a steer, answers and is verified.
	must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 2, Position: 2, Attempt: 1, Provider: "scripted", Purpose: lt.PurposeCompaction})
	must(lt.EventContextCompacted, "t1", lt.ContextCompactedData{Step: 2, Items: 2, TokensBefore: 900, TokensAfter: 100, Summary: "so far", Usage: usage})
	must(lt.EventTurnSteered, "t1", lt.TurnSteeredData{TurnID: "t1", Input: "shorter", Interrupt: true})
	must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 2, Position: 3, Attempt: 1, Provider: "scripted", Steers: 1})
	must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 2, Position: 3, Text: "done", Usage: usage})
	must(lt.EventAcceptanceVerified, "t1", lt.AcceptanceVerifiedData{Step: 2, Verdict: lt.AcceptanceVerdict{Attempt: 1, AllMet: true}, Usage: usage})
	// A monitor finding that asks, and the person lets the turn go on.
	finding := lt.MonitorFindingData{Detector: "secret_probe", Severity: "high", Summary: "a shell call reads /proc/self/environ", Evidence: []int64{b.seq}, Action: "ask"}
	must(lt.EventMonitorFinding, "t1", finding)
	b.must(lt.EventActionRequired, "t1", lt.ActionRequiredData{Action: lt.Action{ID: "act_m", Type: lt.ActionMonitor, TurnID: "t1", Finding: &finding}})
	require.Len(t, b.st.Pending, 1)
	require.True(t, b.st.HoldDue(), "runnable until its hold is carried down to the sub-agents")
	require.True(t, b.st.Runnable())
	must(lt.EventMonitorHeld, "t1", lt.MonitorHeldData{ActionID: "act_m"})
	require.False(t, b.st.HoldDue())
	require.False(t, b.st.Runnable(), "then parked on the action")
	b.must(lt.EventActionResolved, "t1", lt.ActionResolvedData{ActionID: "act_m", Type: string(lt.ActionMonitor), Decision: lt.Decision{Decision: lt.DecisionContinue}})
	require.Empty(t, b.st.Pending)
	// The model monitor reviews step 2: its own script position, its cost
	// apart.
	position := b.st.ModelPosition
	b.must(lt.EventModelRequested, "t1", lt.ModelRequestedData{Step: 2, Attempt: 1, Provider: "scripted", Purpose: lt.PurposeMonitor})
	must(lt.EventMonitorReviewed, "t1", lt.MonitorReviewedData{Trigger: lt.ReviewEverySteps, Step: 2, Verdict: lt.VerdictWarn, Reasons: []string{"hm"},
		Prompt: "…", Provider: "scripted", Usage: lt.Usage{InputTokens: 10, ModelCalls: 1}, CostUSD: 0.25})
	require.Equal(t, position, b.st.ModelPosition, "the agent's script position is untouched")
	require.Equal(t, 1, b.st.MonitorPosition)
	require.True(t, b.st.Step.Reviewed)
	require.InDelta(t, 0.25, b.st.Session.Usage.MonitorCostUSD, 1e-9)
	require.Empty(t, b.st.OpenModelCalls)
	must(lt.EventTurnCompleted, "t1", lt.TurnCompletedData{TurnID: "t1", Output: "done"})
	must(lt.EventSessionReviewed, "", lt.SessionReviewedData{Review: lt.Review{Accepted: true, At: at}})

	// A second turn, paused, resumed and cancelled; a third that fails.
	must(lt.EventTurnCreated, "t2", lt.TurnCreatedData{TurnID: "t2", Index: 2, Input: "more"})
	must(lt.EventTurnStarted, "t2", lt.TurnStartedData{TurnID: "t2"})
	must(lt.EventSessionPauseRequested, "", lt.SessionPauseRequestedData{Reason: "look"})
	must(lt.EventSessionPaused, "", lt.SessionPausedData{Reason: "look"})
	require.True(t, b.st.Paused())
	must(lt.EventSessionResumed, "", lt.SessionResumedData{PausedMS: 1000})
	must(lt.EventSessionCancelRequested, "", lt.SessionCancelRequestedData{Reason: "enough"})
	must(lt.EventTurnCancelled, "t2", lt.TurnCancelledData{TurnID: "t2", Reason: "enough"})
	must(lt.EventTurnCreated, "t3", lt.TurnCreatedData{TurnID: "t3", Index: 3, Input: "again"})
	must(lt.EventTurnStarted, "t3", lt.TurnStartedData{TurnID: "t3"})
	must(lt.EventTurnFailed, "t3", lt.TurnFailedData{TurnID: "t3", StopReason: "max_steps", Error: "too many steps"})

	// A child's side of its report, and a fork's marker.
	must(lt.EventSubagentReported, "", lt.SubagentReportedData{TurnID: "t3"})
	must(lt.EventSessionForked, "", lt.SessionForkedData{From: lt.ForkRef{SessionID: "ses_0", CheckpointID: "cp0", EventSeq: 9}})

	var missing []string
	for _, typ := range lt.EventTypes() {
		if !played[typ] {
			missing = append(missing, typ)
		}
	}
	require.Empty(t, missing, "event types the journal above does not hold")
	require.Empty(t, b.st.OpenEffects)
	require.Empty(t, b.st.Pending)
	require.Nil(t, b.st.CurrentTurn())
	require.Equal(t, []string{"be brief"}, b.st.Session.Constraints)
	require.Equal(t, "box1", b.st.EnvironmentRunner, "environment.opened pins the session to its runner")
	require.Equal(t, &lt.ForkRef{SessionID: "ses_0", CheckpointID: "cp0", EventSeq: 9}, b.st.Session.ForkedFrom)
}

// TestApplyIgnoresUnregisteredTypes: an event of a type outside
// lt.EventTypes (a newer writer's) moves the journal position and nothing
// else.
func TestApplyIgnoresUnregisteredTypes(t *testing.T) {
	t.Parallel()
	b := started(t, lt.EffectIrreversible)
	before, err := json.Marshal(b.st)
	require.NoError(t, err)
	seq, updated := b.st.Session.LastEventSeq, b.st.Session.UpdatedAt
	_, known := lt.NewEventData("future.event")
	require.False(t, known)
	b.must("future.event", "t1", map[string]any{"step": 1, "index": 0, "call_id": "c1", "effect_id": "e1"})
	require.Equal(t, seq+1, b.st.Session.LastEventSeq)
	b.st.Session.LastEventSeq, b.st.Session.UpdatedAt = seq, updated
	after, err := json.Marshal(b.st)
	require.NoError(t, err)
	require.JSONEq(t, string(before), string(after))
}

// TestApplySwitchesOnlyOnEventConstants: every case of a switch on an
// event's type in this package is an lt.Event* constant, never a literal,
// so what Apply handles is within lt.EventTypes (longhaultype's tests hold
// every Event* constant to that list).
func TestApplySwitchesOnlyOnEventConstants(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	cases := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			sw, ok := n.(*ast.SwitchStmt)
			if !ok || !isEventType(sw.Tag) {
				return true
			}
			for _, s := range sw.Body.List {
				for _, x := range s.(*ast.CaseClause).List {
					sel, ok := x.(*ast.SelectorExpr)
					ok = ok && exprName(sel.X) == "lt" && strings.HasPrefix(sel.Sel.Name, "Event")
					require.True(t, ok, "%s: a case on an event type must be an lt.Event* constant", fset.Position(x.Pos()))
					cases++
				}
			}
			return true
		})
	}
	require.Greater(t, cases, 40, "sanity: the scan found Apply's cases")
}

// isEventType reports whether a switch tag is an event's type (ev.Type).
func isEventType(tag ast.Expr) bool {
	sel, ok := tag.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Type" && slices.Contains([]string{"ev", "e"}, exprName(sel.X))
}

func exprName(x ast.Expr) string {
	if id, ok := x.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
