package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Runs of one request with one seed at once (a claim taken over from a run
// that outlived it, or whose client gave up while its creation was still
// being written) make one session. Each is answered with it, or with a
// 503 to retry while the other run's write is not readable yet (SQLite
// answers a conflict before the batch holding the other write commits),
// never with a 404, which would tell the server nothing was made and free
// the key for a second session.
func TestSeededCreationsAtOnceMakeOneSession(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		st, eng := apptest.Engine(t, nil)
		seededCreationsAtOnce(t, st, eng)
	})
	t.Run("postgres", func(t *testing.T) {
		st := apptest.Postgres(t)
		seededCreationsAtOnce(t, st, apptest.EngineOn(t, st, nil))
	})
}

func seededCreationsAtOnce(t *testing.T, st store.Store, eng *engine.Engine) {
	a := apptest.New(t, st, eng, nil)
	base := app.WithCaller(t.Context(), app.LibraryCaller)
	const rounds, runs = 20, 3
	for round := range rounds {
		seed := fmt.Sprintf("seed%022d", round)
		ctx := app.WithCreationSeed(base, seed, true)
		create := func() (*lt.Session, error) {
			var req lt.CreateSessionRequest
			require.NoError(t, json.Unmarshal([]byte(`{"agent_spec": `+leafSpec+`, "input": "take notes", "webhook_url": "https://hooks.example.com/x"}`), &req))
			return a.CreateSession(ctx, &req)
		}
		made := make([]*lt.Session, runs)
		errs := make([]error, runs)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() { made[i], errs[i] = create() })
		}
		wg.Wait()
		var secret string
		for i := range runs {
			if errs[i] != nil {
				require.Equal(t, lt.CodeUnavailable, apierror.From(errs[i]).Code, "round %d run %d: %v", round, i, errs[i])
				// The client's retry, once the other run's write is in.
				made[i], errs[i] = create()
				require.NoError(t, errs[i], "round %d run %d, retried", round, i)
			}
			require.Equal(t, "ses_"+seed, made[i].ID, "round %d run %d", round, i)
			if secret == "" {
				secret = made[i].WebhookSecret
			}
			require.Equal(t, secret, made[i].WebhookSecret, "round %d: every run answers the secret the session was written with", round)
		}
	}
	list, err := a.ListSessions(base, lt.ListSessionsParams{Limit: 100})
	require.NoError(t, err)
	require.Len(t, list.Data, rounds, "one session a seed")
}

// heldAppend holds the first append carrying an event of type typ (armed)
// until release is closed: a run stalled inside its change, after its look
// and before its write.
type heldAppend struct {
	store.Store
	mu      sync.Mutex
	typ     string
	held    chan struct{}
	release chan struct{}
}

func (h *heldAppend) arm(typ string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.typ, h.held, h.release = typ, make(chan struct{}), make(chan struct{})
}

func (h *heldAppend) EventAppend(ctx context.Context, p *store.EventAppendParams) ([]store.Event, error) {
	h.mu.Lock()
	var held, release chan struct{}
	for _, ev := range p.Events {
		if h.typ != "" && ev.Type == h.typ {
			held, release, h.typ = h.held, h.release, ""
		}
	}
	h.mu.Unlock()
	if held != nil {
		close(held)
		<-release
	}
	return h.Store.EventAppend(ctx, p)
}

// Two runs of one request that overlap inside the change (the first has
// looked and not yet written when the second, a retry that took its
// claim over, looks and writes) journal it once: the first's write meets
// the moved journal, and its change, made again, finds the second's event.
func TestSeededControlsOverlappingInTheirChangeJournalOnce(t *testing.T) {
	st := apptest.SQLite(t)
	held := &heldAppend{Store: st}
	eng := apptest.EngineOn(t, held, nil)
	a := apptest.New(t, held, eng, nil)
	f := &fixture{t: t, ctx: app.WithCaller(t.Context(), app.LibraryCaller), st: st, eng: eng, app: a}
	const asking = `{"model": {"provider": "scripted", "script": [{"tool_calls": [{"name": "lookup", "arguments": {"id": "c1"}}]}, {"text": "done"}]},
	  "tools": [{"name": "lookup", "type": "function", "effect": "read", "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}]}`
	s := f.create(asking, "look it up")
	require.Eventually(t, func() bool {
		got, err := a.GetSession(f.ctx, s.ID)
		require.NoError(t, err)
		return got.Status == lt.SessionRequiresAction
	}, 15*time.Second, 5*time.Millisecond)

	controls := []struct {
		typ string
		run func(ctx context.Context) error
	}{
		{lt.EventTurnSteered, func(ctx context.Context) error {
			_, err := a.Steer(ctx, s.ID, &lt.SteerRequest{Input: "use the 2025 figures"})
			return err
		}},
		{lt.EventConstraintAdded, func(ctx context.Context) error {
			_, err := a.AddConstraint(ctx, s.ID, "never email customers")
			return err
		}},
		{lt.EventSignalReceived, func(ctx context.Context) error {
			_, err := a.SendSignal(ctx, s.ID, &lt.SignalRequest{Name: "approved"})
			return err
		}},
	}
	for i, c := range controls {
		seed := strings.ToLower(ulid.Make().String())
		held.arm(c.typ)
		first := make(chan error, 1)
		go func() { first <- c.run(app.WithCreationSeed(f.ctx, seed, false)) }()
		<-held.held
		require.NoError(t, c.run(app.WithCreationSeed(f.ctx, seed, true)), "control %d: the retry", i)
		close(held.release)
		require.NoError(t, <-first, "control %d: the first run, going on", i)
		n := 0
		for _, ev := range f.journal(s.ID) {
			if ev.Type == c.typ {
				n++
			}
		}
		require.Equal(t, 1, n, "%s journaled once", c.typ)
	}
}
