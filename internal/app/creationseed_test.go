package app_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

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
