package journal

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestTurnLossSteps: the steps of the turn's losses of its workspace are
// kept through the restores that reset UnrestoredLosses (the window the
// engine bounds them in), the last MaxTurnLossSteps of them, and a new
// turn starts with none.
func TestTurnLossSteps(t *testing.T) {
	t.Parallel()
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	lose := func(step int) {
		t.Helper()
		for _, ev := range []struct {
			typ  string
			data any
		}{{lt.EventEnvironmentLost, lt.EnvironmentLostData{Reason: "gone"}}, {lt.EventEnvironmentRestored, lt.EnvironmentRestoredData{Snapshot: "s1"}}} {
			raw, err := json.Marshal(ev.data)
			require.NoError(t, err)
			b.seq++
			require.NoError(t, Apply(&b.st, lt.Event{Seq: b.seq, Type: ev.typ, Time: time.Unix(b.seq, 0).UTC(), SessionID: "ses_1", TurnID: "t1", Step: step, Data: raw}, &b.ch))
		}
	}
	lose(3)
	lose(3)
	lose(7)
	require.Zero(t, b.st.UnrestoredLosses, "each was restored")
	require.Equal(t, []int{3, 3, 7}, b.st.TurnLossSteps)
	for i := range MaxTurnLossSteps {
		lose(10 + i)
	}
	require.Len(t, b.st.TurnLossSteps, MaxTurnLossSteps)
	require.Equal(t, 10, b.st.TurnLossSteps[0], "the oldest go first")

	b.must(lt.EventTurnCompleted, "t1", lt.TurnCompletedData{TurnID: "t1", Output: "done"})
	b.must(lt.EventTurnCreated, "t2", lt.TurnCreatedData{TurnID: "t2", Index: 2, Input: "again"})
	b.must(lt.EventTurnStarted, "t2", lt.TurnStartedData{TurnID: "t2"})
	require.Empty(t, b.st.TurnLossSteps, "a new turn tries again")
}

// TestTurnLossStepsCountNoMove: a session that moves from node to node
// finds its workspace missing or stale on each (environment.lost there,
// then restored): a move, not counted against the turn. A loss on the
// node that last held the workspace counts, and on a runner every loss
// does, whichever node reached it.
func TestTurnLossStepsCountNoMove(t *testing.T) {
	t.Parallel()
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	b.must(lt.EventTurnCreated, "t1", lt.TurnCreatedData{TurnID: "t1", Index: 1, Input: "go"})
	b.must(lt.EventTurnStarted, "t1", lt.TurnStartedData{TurnID: "t1"})
	on := func(node, typ string, step int, data any) {
		t.Helper()
		raw, err := json.Marshal(data)
		require.NoError(t, err)
		b.seq++
		require.NoError(t, Apply(&b.st, lt.Event{Seq: b.seq, Type: typ, Time: time.Unix(b.seq, 0).UTC(), SessionID: "ses_1", TurnID: "t1", Step: step, WorkerID: node, Data: raw}, &b.ch))
	}
	lostAndRestored := func(node string, step int) {
		on(node, lt.EventEnvironmentLost, step, lt.EnvironmentLostData{Reason: "gone"})
		on(node, lt.EventEnvironmentRestored, step, lt.EnvironmentRestoredData{Snapshot: "s1"})
	}
	on("node-a", lt.EventEnvironmentRestored, 1, lt.EnvironmentRestoredData{Snapshot: "s0"}) // node-a holds it
	for i, node := range []string{"node-b", "node-a", "node-c", "node-a", "node-b"} {
		lostAndRestored(node, 2+i) // moved there, and restored there
	}
	require.Empty(t, b.st.TurnLossSteps, "moves between nodes are not losses")

	lostAndRestored("node-b", 7) // where it lived: node-b changed it last
	require.Equal(t, []int{7}, b.st.TurnLossSteps)

	on("node-c", lt.EventEnvironmentOpened, 8, lt.EnvironmentOpenedData{Runner: "box1"})
	lostAndRestored("node-a", 8)
	lostAndRestored("node-c", 9)
	require.Equal(t, []int{7, 8, 9}, b.st.TurnLossSteps, "on a runner, every loss counts")
}
