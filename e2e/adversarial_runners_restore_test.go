package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// forgetfulRunner sits between a real runner and the server and makes it
// hostile: it answers the server's snapshot.holds itself, "not held",
// except for the first question after a restore of that environment,
// which goes to the runner (and passes the server's check of the
// restore). A session on it loses its workspace at every call, each loss
// restored and held.
type forgetfulRunner struct {
	upstream string // the server's runner route

	mu    sync.Mutex
	calls map[uint64]envCall // the server's calls in flight, by id
	fresh map[string]bool    // restored since its last holds, by env_id
	faked int                // holds answered "not held"
}

type envCall struct{ method, env string }

// linkFrame is what forgetfulRunner reads of a link message.
type linkFrame struct {
	Type   string          `json:"type"`
	ID     uint64          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (f *forgetfulRunner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	up, _, err := websocket.Dial(r.Context(), f.upstream, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": r.Header["Authorization"]}})
	if err != nil {
		http.Error(w, "upstream", http.StatusBadGateway)
		return
	}
	defer up.CloseNow()
	down, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer down.CloseNow()
	up.SetReadLimit(64 << 20)
	down.SetReadLimit(64 << 20)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	var wmu sync.Mutex // the writes to the server: relayed and faked
	toServer := func(typ websocket.MessageType, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return up.Write(ctx, typ, b)
	}
	go func() { // runner → server: results noted, everything relayed
		defer cancel()
		for {
			typ, b, err := down.Read(ctx)
			if err != nil {
				return
			}
			var m linkFrame
			if json.Unmarshal(b, &m) == nil && m.Type == "result" {
				f.mu.Lock()
				if c, ok := f.calls[m.ID]; ok {
					delete(f.calls, m.ID)
					if c.method == "snapshot.restore" {
						f.fresh[c.env] = true
					}
				}
				f.mu.Unlock()
			}
			if toServer(typ, b) != nil {
				return
			}
		}
	}()
	for { // server → runner: a holds not right after a restore is answered here
		typ, b, err := up.Read(ctx)
		if err != nil {
			return
		}
		var m linkFrame
		var ref struct {
			EnvID string `json:"env_id"`
		}
		if json.Unmarshal(b, &m) == nil && m.Type == "call" && json.Unmarshal(m.Params, &ref) == nil {
			f.mu.Lock()
			fake := m.Method == "snapshot.holds" && !f.fresh[ref.EnvID]
			f.fresh[ref.EnvID] = false
			if fake {
				f.faked++
			} else {
				f.calls[m.ID] = envCall{method: m.Method, env: ref.EnvID}
			}
			f.mu.Unlock()
			if fake {
				if toServer(websocket.MessageText, fmt.Appendf(nil, `{"type":"result","id":%d,"result":false}`, m.ID)) != nil {
					return
				}
				continue
			}
		}
		if down.Write(ctx, typ, b) != nil {
			return
		}
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
	f := &forgetfulRunner{upstream: "ws" + strings.TrimPrefix(k.srv.url, "http") + "/v1/runners/connect",
		calls: map[uint64]envCall{}, fresh: map[string]bool{}}
	mitm := httptest.NewServer(f)
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
