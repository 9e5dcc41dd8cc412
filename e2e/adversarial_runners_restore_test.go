package e2e

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// forgetfulRunner makes a real runner hostile (a runnerMITM): it answers
// the server's snapshot.holds itself, "not held", except for the first
// question after a restore of that environment, which goes to the runner
// (and passes the server's check of the restore). A session on it loses
// its workspace at every call, each loss restored and held.
type forgetfulRunner struct {
	mu    sync.Mutex
	calls map[uint64]envCall // the server's calls in flight, by id
	fresh map[string]bool    // restored since its last holds, by env_id
	faked int                // holds answered "not held"
}

type envCall struct{ method, env string }

// relay is the man in the middle that makes the runner behind upstream
// (the server's runner route) forgetful.
func (f *forgetfulRunner) relay(upstream string) *runnerMITM {
	return &runnerMITM{upstream: upstream,
		sent: func(m *linkFrame) { // results noted
			if m.Type != "result" {
				return
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if c, ok := f.calls[m.ID]; ok {
				delete(f.calls, m.ID)
				if c.method == "snapshot.restore" {
					f.fresh[c.env] = true
				}
			}
		},
		answer: func(m *linkFrame) []byte { // a holds not right after a restore is answered here
			var ref struct {
				EnvID string `json:"env_id"`
			}
			if json.Unmarshal(m.Params, &ref) != nil {
				return nil
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			fake := m.Method == "snapshot.holds" && !f.fresh[ref.EnvID]
			f.fresh[ref.EnvID] = false
			if !fake {
				f.calls[m.ID] = envCall{method: m.Method, env: ref.EnvID}
				return nil
			}
			f.faked++
			return fmt.Appendf(nil, `{"type":"result","id":%d,"result":false}`, m.ID)
		},
	}
}

// TestAdversarialRunners_ForgetsEveryRestore: a runner that holds the
// snapshot right after each restore but not at the next call would have
// the session lose and restore its workspace for ever, each restore
// shipping the whole snapshot. The real binary bounds the losses: the
// turn fails with sandbox_error naming the runner after a few restores,
// and the session is left idle, not looping.
func TestAdversarialRunners_ForgetsEveryRestore(t *testing.T) {
	t.Parallel()
	const boot = "lh-adv-runners-forget-bootstrap"
	k, admin := startRunnersServer(t, boot)
	ctx := t.Context()
	key := k.create("forgetful", lt.RoleRunner)
	f := &forgetfulRunner{calls: map[uint64]envCall{}, fresh: map[string]bool{}}
	mitm := httptest.NewServer(f.relay("ws" + strings.TrimPrefix(k.srv.url, "http") + "/v1/runners/connect"))
	t.Cleanup(mitm.Close)
	startRunner(t, mitm.URL, key.Key, "box1", "--label", "gpu")
	require.Eventually(t, func() bool { return len(runnersListed(t, k.srv, boot)) == 1 }, 30*time.Second, 20*time.Millisecond)

	steps := make([]map[string]any, 0, 11)
	for i := 1; i <= 10; i++ {
		steps = append(steps, map[string]any{"tool_calls": []map[string]any{{"name": "shell", "arguments": map[string]any{"command": fmt.Sprintf("echo %d >> steps.txt", i)}}}})
	}
	steps = append(steps, map[string]any{"text": "done"})
	script, err := json.Marshal(steps)
	require.NoError(t, err)
	s, err := admin.CreateSession(ctx, &lt.CreateSessionRequest{Input: "go", AgentSpec: &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: script}, Instructions: "Work.",
		Tools: []lt.ToolSpec{{Name: "shell"}}, Environment: &lt.Environment{Runner: &lt.RunnerSelector{Labels: []string{"gpu"}}},
	}})
	require.NoError(t, err)
	var turns *lt.List[lt.Turn]
	require.Eventually(t, func() bool {
		turns, err = admin.ListTurns(ctx, s.ID)
		return err == nil && len(turns.Data) == 1 && turns.Data[0].Status == lt.TurnFailed
	}, 2*time.Minute, 20*time.Millisecond, "the turn ends")
	require.NotNil(t, turns.Data[0].StopReason)
	require.Equal(t, lt.StopSandboxError, *turns.Data[0].StopReason)
	require.Contains(t, turns.Data[0].Error, `keeps being lost on runner "box1"`)

	evs, err := admin.ListEvents(ctx, s.ID, 0, 500)
	require.NoError(t, err)
	counts := map[string]int{}
	for _, ev := range evs.Data {
		counts[ev.Type]++
	}
	require.Equal(t, 4, counts[lt.EventEnvironmentLost], "a few losses, each restored, then the turn fails")
	require.Equal(t, 4, counts[lt.EventEnvironmentRestored])
	got, err := admin.GetSession(ctx, s.ID)
	require.NoError(t, err)
	require.NotEqual(t, lt.SessionRunning, got.Status, "not looping")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Positive(t, f.faked, "the runner did lie")
}
