package engine_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The controls a request with an Idempotency-Key runs again when its
// server died before the answer was recorded (engine.WithCreationSeed
// with rerun): the server's tests cover a pause of a parked session, a
// resume, a cancel; these, what needs the engine's own hands.

// seedAt is a request's seed made at the engine's time, at, as the server
// makes them (a rerun looks for what its request journaled since its
// seed's time).
func seedAt(at time.Time) string {
	return strings.ToLower(ulid.MustNew(ulid.Timestamp(at), rand.Reader).String())
}

// TestSeededPauseOfARunningSessionIsNotMadeAgain: a pause of a session in
// a model call is journaled as asked (session.pause_requested, with the
// seed) and carried out by the worker (session.paused, without it). A
// person resumes it; the request's rerun finds its pause_requested and
// pauses nothing again.
func TestSeededPauseOfARunningSessionIsNotMadeAgain(t *testing.T) {
	g := newGate()
	h := newGatedHarness(t, g)
	ctx := context.Background()
	s := create(t, h, spec(t, `[{"delay_ms":1000,"tool_calls":[{"name":"ask_human","arguments":{"question":"which city?"}}]},{"text":"done"}]`,
		lt.ToolSpec{Name: "ask_human"}), nil)
	g.await(t)
	seed := seedAt(h.clock.Now())
	p, err := h.eng.PauseSession(engine.WithCreationSeed(ctx, seed, false), s.ID, &lt.PauseRequest{Reason: "lunch"})
	require.NoError(t, err)
	require.True(t, p.PauseRequested)
	g.open(t)
	h.waitStatus(s.ID, lt.SessionPaused)
	resume(t, h, s.ID)
	h.waitStatus(s.ID, lt.SessionRequiresAction)

	again, err := h.eng.PauseSession(engine.WithCreationSeed(ctx, seed, true), s.ID, &lt.PauseRequest{Reason: "lunch"})
	require.NoError(t, err)
	require.Equal(t, lt.SessionRequiresAction, again.Status, "the rerun paused the session again")
	require.False(t, again.PauseRequested)
	require.Len(t, events(t, h, s.ID, lt.EventSessionPauseRequested), 1)
}

// TestSeededResumeThatWalkedOnlyTheSubagents: a resume cut short (the
// root resumed, its sub-agents still paused) is repeated with a key, and
// resumes only the sub-agents, which journals nothing in the root but
// their session.resumed with the request's seed. Its rerun finds those:
// it answers with the session, as the run before it did, not a 409 (which
// the key would keep answering); and after a person paused the root since,
// it does not resume the root over their pause. A rerun of a resume that
// resumed nothing is the 409 its first run was.
func TestSeededResumeThatWalkedOnlyTheSubagents(t *testing.T) {
	h, gt, tr := resumedAloneTree(t)
	ctx := context.Background()
	seed := seedAt(h.clock.Now())
	_, err := h.eng.ResumeSession(engine.WithCreationSeed(ctx, seed, false), tr.root, &lt.ResumeRequest{})
	require.NoError(t, err, "the repeat resumes the sub-agents")
	require.NotEqual(t, lt.SessionPaused, session(t, h, tr.b).Status)

	v, err := h.eng.ResumeSession(engine.WithCreationSeed(ctx, seed, true), tr.root, &lt.ResumeRequest{})
	require.NoError(t, err, "the rerun of that repeat")
	require.Equal(t, tr.root, v.ID)

	// A person pauses the root; the rerun comes again.
	pauseNow(t, h, tr.root)
	v, err = h.eng.ResumeSession(engine.WithCreationSeed(ctx, seed, true), tr.root, &lt.ResumeRequest{})
	require.NoError(t, err)
	require.True(t, v.Status == lt.SessionPaused || v.PauseRequested, "the rerun resumed the root over a person's later pause: %s", v.Status)
	require.Equal(t, lt.SessionPaused, session(t, h, tr.b).Status, "the sub-agent follows the root's pause")

	// A first run, and a rerun, of a resume with nothing to resume.
	resume(t, h, tr.root)
	for _, rerun := range []bool{false, true} {
		_, err = h.eng.ResumeSession(engine.WithCreationSeed(ctx, seedAt(h.clock.Now()), rerun), tr.root, &lt.ResumeRequest{})
		require.ErrorContains(t, err, "is not paused", "rerun %v", rerun)
	}
	gt.open(t)
}
