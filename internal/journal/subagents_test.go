package journal

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// spawning builds a parent whose turn t1 spawned child ses_c1 (call c1)
// with a reserved share of its budget, and now waits for it.
func spawning(t *testing.T) *builder {
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go", Budget: lt.Budget{MaxModelCalls: 20}})
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 1, ToolCalls: []lt.ToolCall{{ID: "c1", Name: "spawn_agent"}, {ID: "c2", Name: "wait_agents"}}})
	b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 0, CallID: "c1", Tool: "spawn_agent", Kind: lt.CallSpawn})
	b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 1, CallID: "c2", Tool: "wait_agents", Kind: lt.CallWait})
	b.must(lt.EventSubagentSpawned, "t1", lt.SubagentSpawnedData{Step: 1, Index: 0, CallID: "c1", ChildID: "ses_c1", Budget: lt.Budget{MaxModelCalls: 5}})
	return b
}

func TestSubagentCompletionIsIdempotent(t *testing.T) {
	b := spawning(t)
	require.Equal(t, int64(5), b.st.Reserved().ModelCalls, "the share is set aside while the child runs")
	b.must(lt.EventWaitStarted, "t1", lt.WaitStartedData{Step: 1, Index: 1, CallID: "c2", Tool: "wait_agents", Kind: lt.WaitAgents, IDs: []string{"ses_c1"}, Mode: lt.WaitAll})
	require.False(t, b.st.Runnable(), "waiting for the child holds no worker")

	done := lt.SubagentCompletedData{ChildID: "ses_c1", TurnID: "ct1", Status: lt.TurnCompleted, Output: "done", Usage: lt.Usage{ModelCalls: 3, InputTokens: 30}}
	b.must(lt.EventSubagentCompleted, "", done)
	require.True(t, b.st.Runnable(), "the child's report wakes the wait")
	require.True(t, b.st.Wait.Satisfied)
	require.Equal(t, int64(4), b.st.Session.Usage.ModelCalls, "one call of its own, three of the child's")
	require.Zero(t, b.st.Reserved().ModelCalls, "the reservation is released")

	// A report applied again (a child that crashed before journaling
	// subagent.reported, and whose parent check raced) changes nothing.
	b.must(lt.EventSubagentCompleted, "", done)
	require.Equal(t, int64(4), b.st.Session.Usage.ModelCalls)
	require.Equal(t, int64(30), b.st.Session.Usage.InputTokens)

	// A later turn of the child rolls up only what is new.
	later := done
	later.TurnID, later.Usage = "ct2", lt.Usage{ModelCalls: 5, InputTokens: 50}
	b.must(lt.EventSubagentCompleted, "", later)
	require.Equal(t, int64(6), b.st.Session.Usage.ModelCalls)
	require.Equal(t, int64(50), b.st.Session.Usage.InputTokens)
}

func TestSubagentReportBeforeSpawnIsRecorded(t *testing.T) {
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	// The child finished and reported before the parent's subagent.spawned
	// was durable: the spawn, applied after, keeps it done.
	b.must(lt.EventSubagentCompleted, "", lt.SubagentCompletedData{ChildID: "ses_c1", TurnID: "ct1", Status: lt.TurnCompleted, Usage: lt.Usage{ModelCalls: 2}})
	b.must(lt.EventModelResponded, "t1", lt.ModelRespondedData{Step: 1, ToolCalls: []lt.ToolCall{{ID: "c1", Name: "spawn_agent"}}})
	b.must(lt.EventToolRequested, "t1", lt.ToolRequestedData{Step: 1, Index: 0, CallID: "c1", Tool: "spawn_agent", Kind: lt.CallSpawn})
	b.must(lt.EventSubagentSpawned, "t1", lt.SubagentSpawnedData{Step: 1, Index: 0, CallID: "c1", ChildID: "ses_c1", Budget: lt.Budget{MaxModelCalls: 5}})
	c := b.st.Child("ses_c1")
	require.True(t, c.Done)
	require.Equal(t, "t1", c.TurnID)
	require.Zero(t, b.st.Reserved().ModelCalls, "a done child holds no reservation")
	require.Equal(t, int64(3), b.st.Session.Usage.ModelCalls)
}

func TestOrphanedChildrenAndReports(t *testing.T) {
	b := spawning(t)
	require.Empty(t, b.st.OrphanedChildren())
	b.must(lt.EventTurnCancelled, "t1", lt.TurnCancelledData{TurnID: "t1"})
	require.Equal(t, []string{"ses_c1"}, b.st.OrphanedChildren(), "a child of an ended turn must be stopped")
	require.True(t, b.st.Runnable())
	b.must(lt.EventSubagentCancelRequested, "", lt.SubagentCancelRequestedData{ChildID: "ses_c1", Reason: "parent cancelled"})
	require.Empty(t, b.st.OrphanedChildren())
	require.False(t, b.st.Runnable())

	// The child's side: its ended turn stays due for a report.
	c := &builder{t: t}
	c.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "sub", ParentID: "ses_p", Workspace: "ses_p", Depth: 1})
	c.must(lt.EventTurnCreated, "ct1", lt.TurnCreatedData{TurnID: "ct1", Index: 1, Input: "sub"})
	c.must(lt.EventTurnStarted, "ct1", lt.TurnStartedData{TurnID: "ct1"})
	c.must(lt.EventTurnCompleted, "ct1", lt.TurnCompletedData{TurnID: "ct1", Output: "answer"})
	require.Equal(t, "ses_p", c.st.WorkspaceID())
	require.NotNil(t, c.st.ReportDue)
	require.Equal(t, "answer", c.st.ReportDue.Output)
	require.True(t, c.st.Runnable(), "runnable until the parent has the report")
	c.must(lt.EventSubagentReported, "", lt.SubagentReportedData{TurnID: "ct1"})
	require.Nil(t, c.st.ReportDue)
	require.False(t, c.st.Runnable())
}
