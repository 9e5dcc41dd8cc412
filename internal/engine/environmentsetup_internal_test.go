package engine

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/environment"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// failingOpens is the real local backend whose first `fail` opens fail, as
// a proxy that cannot start would.
type failingOpens struct {
	environment.Backend
	fail int
}

func (b *failingOpens) Open(ctx context.Context, p *environment.OpenParams) (environment.Environment, error) {
	if b.fail > 0 {
		b.fail--
		return nil, errors.New("the proxy cannot start")
	}
	return b.Backend.Open(ctx, p)
}

// TestTurnAfterAnEnvironmentThatCouldNotBeSetUp: the claim's environment
// could not be set up, so its turn fails, saying why; the turn queued
// after it opens the environment again and runs in it (it ran in none,
// which failed the session: "the session's environment is not open").
func TestTurnAfterAnEnvironmentThatCouldNotBeSetUp(t *testing.T) {
	ctx := context.Background()
	p := newLocalParts(t)
	backend := &failingOpens{Backend: p.local, fail: 1}
	e := newWorkerlessEngine(t, p, backend)
	s, lease := claimNewSession(t, e, p.st, &lt.AgentSpec{
		Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text":"done"}]`)},
	})
	_, err := e.CreateTurn(ctx, s.ID, &lt.CreateTurnRequest{Input: "again"})
	require.NoError(t, err)

	r, err := e.newRunner(ctx, lease) // its open fails
	require.NoError(t, err)
	tickUntilDone(t, r)
	r.env.close()
	require.Zero(t, backend.fail)

	row, err := p.st.SessionGet(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, string(lt.SessionIdle), row.Status)
	evs, err := p.st.EventList(ctx, s.ID, 0, 1000)
	require.NoError(t, err)
	var failed []string
	completed := 0
	for _, ev := range evs {
		switch ev.Type {
		case lt.EventTurnFailed:
			var d lt.TurnFailedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			failed = append(failed, d.Error)
		case lt.EventTurnCompleted:
			completed++
		}
	}
	require.Equal(t, []string{"the session's environment could not be set up: the proxy cannot start"}, failed)
	require.Equal(t, 1, completed, "the second turn ran")
}
