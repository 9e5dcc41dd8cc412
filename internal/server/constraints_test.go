package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestAddConstraint: POST /v1/sessions/{id}/constraints pins a constraint
// mid-session: the session lists it after the ones given at the start, and
// the journal records it.
func TestAddConstraint(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.createSession("notes")
	r := h.post("/v1/sessions/"+s.ID+"/constraints", `{"constraint": "Use metric units"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	got := decode[lt.Session](t, r)
	require.Equal(t, []string{"be brief", "Use metric units"}, got.Constraints)
	require.Equal(t, []string{"be brief", "Use metric units"}, decode[lt.Session](t, h.get("/v1/sessions/"+s.ID)).Constraints)
	var found bool
	for _, raw := range h.allEvents(s.ID, 100) {
		found = found || strings.Contains(string(raw), `"type":"session.constraint_added"`)
	}
	require.True(t, found, "the journal records the constraint")

	requireError(t, h.post("/v1/sessions/"+s.ID+"/constraints", `{"constraint": "  "}`), http.StatusBadRequest, lt.CodeInvalidRequest, "constraint")
	requireError(t, h.post("/v1/sessions/"+s.ID+"/constraints", `{"text": "x"}`), http.StatusBadRequest, lt.CodeInvalidRequest, "text")
	requireError(t, h.post("/v1/sessions/ses_nope/constraints", `{"constraint": "x"}`), http.StatusNotFound, lt.CodeNotFound, "")
}

// TestReview: a person's verdict on the final artifact is recorded on the
// session (session.reviewed); a rejection can send the agent back with the
// note as a new turn's input.
func TestReview(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.createSession("notes")
	s = h.waitStatus(s.ID, lt.SessionIdle)
	requireError(t, h.post("/v1/sessions/"+s.ID+"/review", `{"note": "x"}`), http.StatusBadRequest, lt.CodeInvalidRequest, "accepted")
	requireError(t, h.post("/v1/sessions/"+s.ID+"/review", `{"accepted": true, "continue": true, "note": "x"}`), http.StatusBadRequest, lt.CodeInvalidRequest, "continue")

	r := h.post("/v1/sessions/"+s.ID+"/review", `{"accepted": true, "note": "good"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := decode[lt.Session](t, r)
	require.NotNil(t, got.Review)
	require.True(t, got.Review.Accepted)
	require.Equal(t, "good", got.Review.Note)
	require.NotEmpty(t, got.Review.ArtifactID)

	r = h.post("/v1/sessions/"+s.ID+"/review", `{"accepted": false, "note": "add a title", "continue": true}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got = decode[lt.Session](t, r)
	require.False(t, got.Review.Accepted)
	require.Equal(t, lt.SessionQueued, got.Status)
	h.waitStatus(s.ID, lt.SessionIdle)
	turns := decode[lt.List[lt.Turn]](t, h.get("/v1/sessions/"+s.ID+"/turns"))
	require.Len(t, turns.Data, 2)
	require.Equal(t, "add a title", turns.Data[1].Input)
}

// TestCheckpointsAndFork: checkpoints are listed in journal order with
// their snapshots; a fork from one is a new session linked to its origin.
func TestCheckpointsAndFork(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.createSession("notes")
	s = h.waitStatus(s.ID, lt.SessionIdle)
	cps := decode[lt.List[lt.Checkpoint]](t, h.get("/v1/sessions/"+s.ID+"/checkpoints"))
	require.NotEmpty(t, cps.Data)
	first := cps.Data[0]
	require.Equal(t, lt.CheckpointStep, first.Kind)
	require.NotEmpty(t, first.Snapshot)
	for i := 1; i < len(cps.Data); i++ {
		require.Less(t, cps.Data[i-1].EventSeq, cps.Data[i].EventSeq)
	}

	requireError(t, h.post("/v1/sessions/"+s.ID+"/fork", `{}`), http.StatusBadRequest, lt.CodeInvalidRequest, "checkpoint_id")
	requireError(t, h.post("/v1/sessions/"+s.ID+"/fork", `{"checkpoint_id": "ckpt_nope"}`), http.StatusNotFound, lt.CodeNotFound, "")
	last := cps.Data[len(cps.Data)-1]
	r := h.post("/v1/sessions/"+s.ID+"/fork", `{"checkpoint_id": "`+last.ID+`", "input": "one more time"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	f := decode[lt.Session](t, r)
	require.NotNil(t, f.ForkedFrom)
	require.Equal(t, s.ID, f.ForkedFrom.SessionID)
	h.waitStatus(f.ID, lt.SessionIdle)
	turns := decode[lt.List[lt.Turn]](t, h.get("/v1/sessions/"+f.ID+"/turns"))
	require.Len(t, turns.Data, 2)
	require.Equal(t, "one more time", turns.Data[1].Input)
}

// TestSignals: POST /v1/sessions/{id}/signals wakes a wait_for_signal of
// that name; the payload becomes the tool's result.
func TestSignals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	r := h.post("/v1/sessions", `{"agent_spec": {"model": {"provider": "scripted", "script": [
	  {"tool_calls": [{"name": "wait_for_signal", "arguments": {"name": "deploy.finished"}}]},
	  {"text": "deployed"}]}, "tools": [{"name": "wait_for_signal"}]}, "input": "wait for the deploy"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	s := decode[lt.Session](t, r)
	h.waitStatus(s.ID, lt.SessionWaiting)
	requireError(t, h.post("/v1/sessions/"+s.ID+"/signals", `{"payload": 1}`), http.StatusBadRequest, lt.CodeInvalidRequest, "name")
	r = h.post("/v1/sessions/"+s.ID+"/signals", `{"name": "deploy.finished", "payload": {"version": "1.4.2"}}`)
	require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
	sig := decode[lt.Signal](t, r)
	require.True(t, sig.Delivered)
	require.True(t, strings.HasPrefix(sig.ID, "sig_"))
	h.waitStatus(s.ID, lt.SessionIdle)
	var found bool
	for _, raw := range h.allEvents(s.ID, 100) {
		found = found || strings.Contains(string(raw), `"payload":{"version":"1.4.2"}`) && strings.Contains(string(raw), `"type":"tool.completed"`)
	}
	require.True(t, found, "the payload is the tool's result")
}
