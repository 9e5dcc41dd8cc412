package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

func testAgentVersions(t *testing.T, h *harness) {
	insert := func(name string, version int, spec string) (*store.AgentRow, error) {
		return h.s.AgentInsert(h.ctx, &store.AgentInsertParams{
			Project: project, Name: name, Version: version, Spec: json.RawMessage(spec), CreatedAt: at(time.Duration(version) * time.Second),
		})
	}
	a1, err := insert("alpha", 1, `{"model":"m1"}`)
	require.NoError(t, err)
	require.Equal(t, "alpha", a1.Name)
	require.Equal(t, 1, a1.Version)
	require.Equal(t, at(time.Second), a1.CreatedAt)
	require.Nil(t, a1.CreatedBy, "who defined it is unknown")
	by := json.RawMessage(`{"key_id":"key_1","name":"alice","role":"operator"}`)
	a2, err := h.s.AgentInsert(h.ctx, &store.AgentInsertParams{
		Project: project, Name: "alpha", Version: 2, Spec: json.RawMessage(`{"model":"m2"}`), CreatedAt: at(2 * time.Second), CreatedBy: by,
	})
	require.NoError(t, err)
	requireJSON(t, string(by), a2.CreatedBy)
	_, err = insert("beta", 1, `{"model":"b1"}`)
	require.NoError(t, err)

	_, err = insert("alpha", 1, `{"model":"other"}`)
	require.ErrorIs(t, err, store.ErrConflict)

	versions, err := h.s.AgentVersions(h.ctx, project, "alpha")
	require.NoError(t, err)
	require.Len(t, versions, 2, "alpha's versions, not beta's")
	require.Equal(t, []int{2, 1}, []int{versions[0].Version, versions[1].Version}, "newest first")
	requireJSON(t, `{"model":"m2"}`, versions[0].Spec)
	requireJSON(t, string(by), versions[0].CreatedBy)
	none, err := h.s.AgentVersions(h.ctx, project, "gamma")
	require.NoError(t, err)
	require.Empty(t, none, "an unknown agent has no versions")
	_, err = h.s.AgentVersions(h.ctx, project, "")
	requireInvalid(t, err, "name")

	latest, err := h.s.AgentGet(h.ctx, project, "alpha", 0)
	require.NoError(t, err)
	require.Equal(t, 2, latest.Version)
	requireJSON(t, `{"model":"m2"}`, latest.Spec)
	require.Equal(t, at(2*time.Second), latest.CreatedAt)
	require.Equal(t, time.UTC, latest.CreatedAt.Location())
	requireJSON(t, string(by), latest.CreatedBy, "the version's creator is stored")

	first, err := h.s.AgentGet(h.ctx, project, "alpha", 1)
	require.NoError(t, err)
	requireJSON(t, `{"model":"m1"}`, first.Spec, "the conflicting insert changed nothing")
	require.Nil(t, first.CreatedBy)

	_, err = h.s.AgentGet(h.ctx, project, "alpha", 3)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = h.s.AgentGet(h.ctx, project, "gamma", 0)
	require.ErrorIs(t, err, store.ErrNotFound)

	list, err := h.s.AgentList(h.ctx, project)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "alpha", list[0].Name)
	require.Equal(t, 2, list[0].Version)
	requireJSON(t, string(by), list[0].CreatedBy)
	require.Equal(t, "beta", list[1].Name)
	require.Equal(t, 1, list[1].Version)
}

func testAgentConcurrentInsert(t *testing.T, h *harness) {
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			_, errs[i] = h.s.AgentInsert(h.ctx, &store.AgentInsertParams{
				Project: project, Name: "racer", Version: 1, Spec: json.RawMessage(fmt.Sprintf(`{"writer":%d}`, i)), CreatedAt: t0,
			})
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		require.ErrorIs(t, err, store.ErrConflict)
	}
	require.Equal(t, 1, wins, "exactly one concurrent insert of a version wins")
}

// bigInput stands for a session input large enough to be moved to a blob.
var bigInput = []byte(`"` + strings.Repeat("input ", 20000) + `"`)

func testSessionCreate(t *testing.T, h *harness) {
	wake := at(time.Hour)
	events, err := h.s.SessionCreate(h.ctx, &store.SessionCreateParams{
		Session: store.SessionRow{
			ID:           "ses_parent",
			AgentName:    "agent",
			AgentVersion: 3,
			Status:       "queued",
			Spec:         json.RawMessage(`{"goal":"write a report"}`),
			State:        json.RawMessage(`{"status":"queued","usage":{}}`),
			Runnable:     true,
			WakeAt:       &wake,
			CreatedAt:    t0,
			UpdatedAt:    at(time.Second),
			// Ignored on create.
			LastSeq: 99,
			Lease:   store.Lease{Owner: "someone", Epoch: 7},
		},
		Events: []store.NewEvent{
			{Type: "session.created", Time: t0, TurnID: "", Data: json.RawMessage(`{"a":1}`)},
			{Type: "turn.created", Time: at(time.Microsecond), TurnID: "turn_1", Step: 0, WorkerID: "api", Data: json.RawMessage(`{"b":2}`)},
		},
		Docs:  []store.DocWrite{{Kind: store.DocTurn, ID: "turn_1", Status: "queued", Doc: json.RawMessage(`{"id":"turn_1"}`), CreatedAt: t0}},
		Blobs: []store.BlobWrite{{SHA256: sha(bigInput), Data: bigInput}},
	})
	require.NoError(t, err)
	require.Len(t, events, 2)
	blob, err := h.s.BlobGet(h.ctx, sha(bigInput))
	require.NoError(t, err, "blobs are written with the session")
	require.Equal(t, bigInput, blob)
	require.Equal(t, int64(1), events[0].Seq)
	require.Equal(t, int64(2), events[1].Seq)
	require.Equal(t, "ses_parent", events[1].SessionID)
	require.Equal(t, "turn_1", events[1].TurnID)
	require.Equal(t, at(time.Microsecond), events[1].Time)

	got := h.session("ses_parent")
	require.Equal(t, "ses_parent", got.ID)
	require.Equal(t, "agent", got.AgentName)
	require.Equal(t, 3, got.AgentVersion)
	require.Empty(t, got.ParentID)
	require.Equal(t, "queued", got.Status)
	requireJSON(t, `{"goal":"write a report"}`, got.Spec)
	requireJSON(t, `{"status":"queued","usage":{}}`, got.State)
	require.Equal(t, int64(2), got.LastSeq)
	require.True(t, got.Runnable)
	require.NotNil(t, got.WakeAt)
	require.Equal(t, wake, *got.WakeAt)
	require.Empty(t, got.Lease.Owner, "a new session has no lease")
	require.Equal(t, int64(0), got.Lease.Epoch)
	require.Equal(t, t0, got.CreatedAt)
	require.Equal(t, at(time.Second), got.UpdatedAt)
	require.Equal(t, time.UTC, got.CreatedAt.Location())

	stored := h.allEvents("ses_parent")
	require.Len(t, stored, 2)
	require.Equal(t, events[1].Type, stored[1].Type)
	require.Equal(t, "api", stored[1].WorkerID)
	requireJSON(t, `{"b":2}`, stored[1].Data)

	turn, err := h.s.TurnGet(h.ctx, "ses_parent", "turn_1")
	require.NoError(t, err)
	require.Equal(t, "queued", turn.Status)

	// A child names its parent; it starts waiting, not runnable.
	h.createSession("ses_child", func(p *store.SessionCreateParams) {
		p.Session.ParentID = "ses_parent"
		p.Session.Status = "waiting"
	})
	child := h.session("ses_child")
	require.Equal(t, "ses_parent", child.ParentID)
	require.False(t, child.Runnable)
	require.Nil(t, child.WakeAt)
}

func testSessionCreateDuplicate(t *testing.T, h *harness) {
	h.createSession("ses_dup")
	_, err := h.s.SessionCreate(h.ctx, &store.SessionCreateParams{
		Session: store.SessionRow{
			ID: "ses_dup", AgentName: "other", AgentVersion: 1, Status: "running", CreatedAt: at(time.Hour), UpdatedAt: at(time.Hour),
		},
		Events: []store.NewEvent{{Type: "x", Time: at(time.Hour)}, {Type: "y", Time: at(time.Hour)}},
		Docs:   []store.DocWrite{{Kind: store.DocTurn, ID: "turn_dup", Status: "queued", CreatedAt: at(time.Hour)}},
	})
	require.ErrorIs(t, err, store.ErrConflict)

	got := h.session("ses_dup")
	require.Equal(t, "agent", got.AgentName, "the duplicate changed nothing")
	require.Equal(t, int64(1), got.LastSeq)
	require.Len(t, h.allEvents("ses_dup"), 1)
	_, err = h.s.TurnGet(h.ctx, "ses_dup", "turn_dup")
	require.ErrorIs(t, err, store.ErrNotFound, "the duplicate's docs were rolled back")
}

func testSessionList(t *testing.T, h *harness) {
	// Created one minute apart, in this order; s3 and s4 share a time, so
	// the id breaks the tie.
	type spec struct {
		id, status, agent, parent string
		created                   time.Duration
	}
	specs := []spec{
		{"s1", "idle", "writer", "", 0},
		{"s2", "running", "writer", "s1", time.Minute},
		{"s3", "idle", "coder", "s1", 2 * time.Minute},
		{"s4", "running", "coder", "", 2 * time.Minute},
		{"s5", "idle", "writer", "", 3 * time.Minute},
	}
	for _, sp := range specs {
		h.createSession(sp.id, createdAt(at(sp.created)), func(p *store.SessionCreateParams) {
			p.Session.Status = sp.status
			p.Session.AgentName = sp.agent
			p.Session.ParentID = sp.parent
		})
	}
	list := h.sessionIDs
	require.Equal(t, []string{"s5", "s4", "s3", "s2", "s1"}, list(store.SessionListParams{}))
	require.Equal(t, []string{"s5", "s3", "s1"}, list(store.SessionListParams{Status: "idle"}))
	require.Equal(t, []string{"s4", "s3"}, list(store.SessionListParams{Agent: "coder"}))
	require.Equal(t, []string{"s3", "s2"}, list(store.SessionListParams{ParentID: "s1"}))
	require.Equal(t, []string{"s5", "s1"}, list(store.SessionListParams{Status: "idle", Agent: "writer"}))
	require.Empty(t, list(store.SessionListParams{Status: "cancelled"}))

	// Paging: each page starts after the previous page's last id.
	require.Equal(t, []string{"s5", "s4"}, list(store.SessionListParams{Limit: 2}))
	require.Equal(t, []string{"s3", "s2"}, list(store.SessionListParams{Limit: 2, Cursor: "s4"}))
	require.Equal(t, []string{"s1"}, list(store.SessionListParams{Limit: 2, Cursor: "s2"}))
	require.Empty(t, list(store.SessionListParams{Limit: 2, Cursor: "s1"}))
	require.Equal(t, []string{"s1"}, list(store.SessionListParams{Status: "idle", Limit: 2, Cursor: "s3"}))

	// A window of creation times (from inclusive, before exclusive), roots
	// only, with the other filters and paging.
	window := store.SessionListParams{CreatedFrom: at(time.Minute), CreatedBefore: at(3 * time.Minute)}
	require.Equal(t, []string{"s4", "s3", "s2"}, list(window))
	require.Equal(t, []string{"s5", "s4", "s1"}, list(store.SessionListParams{RootsOnly: true}))
	require.Equal(t, []string{"s5", "s4"}, list(store.SessionListParams{RootsOnly: true, CreatedFrom: at(time.Minute)}))
	require.Equal(t, []string{"s1"}, list(store.SessionListParams{RootsOnly: true, Agent: "writer", CreatedBefore: at(3 * time.Minute)}))
	require.Equal(t, []string{"s3"}, list(store.SessionListParams{Status: "idle", CreatedFrom: at(time.Minute), CreatedBefore: at(3 * time.Minute)}))
	paged := window
	paged.Limit, paged.Cursor = 2, "s4"
	require.Equal(t, []string{"s3", "s2"}, list(paged))
	require.Empty(t, list(store.SessionListParams{CreatedFrom: at(3 * time.Minute), CreatedBefore: at(3 * time.Minute)}))

	_, err := h.s.SessionList(h.ctx, &store.SessionListParams{Cursor: "nope"})
	require.ErrorIs(t, err, store.ErrNotFound)

	// The default limit is 50.
	for i := range 55 {
		h.createSession(fmt.Sprintf("bulk_%02d", i), createdAt(at(time.Hour+time.Duration(i)*time.Second)))
	}
	require.Len(t, list(store.SessionListParams{}), 50)
	require.Equal(t, "bulk_54", list(store.SessionListParams{})[0])
}

// testSessionCreateWithWebhook: a session's webhook state written with its
// creation is its state (the dispatcher's Init finds it, its secret and
// cursor kept); a state the checks refuse creates nothing.
func testSessionCreateWithWebhook(t *testing.T, h *harness) {
	create := func(id string, hook *store.WebhookSessionRow) error {
		t.Helper()
		_, err := h.s.SessionCreate(h.ctx, &store.SessionCreateParams{
			Session: store.SessionRow{ID: id, AgentName: "agent", AgentVersion: 1, Status: "idle",
				State: json.RawMessage(`{}`), CreatedAt: t0},
			Events:  []store.NewEvent{{Type: "session.created", Time: t0, Data: json.RawMessage(`{}`)}},
			Webhook: hook,
		})
		return err
	}
	require.NoError(t, create("ses_fork", &store.WebhookSessionRow{Secret: "whsec_Zm9yaw==", Cursor: 1}))
	ws, err := h.s.WebhookSessionInit(h.ctx, "ses_fork", "whsec_b3RoZXI=")
	require.NoError(t, err)
	require.Equal(t, "whsec_Zm9yaw==", ws.Secret)
	require.Equal(t, int64(1), ws.Cursor)
	require.Nil(t, ws.DisabledAt)

	require.ErrorContains(t, create("ses_bad", &store.WebhookSessionRow{Cursor: 1}), "webhook.secret")
	require.ErrorContains(t, create("ses_bad", &store.WebhookSessionRow{Secret: "whsec_eA==", Cursor: -1}), "webhook.cursor")
	_, err = h.s.SessionGet(h.ctx, "ses_bad")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing of a refused creation")
}
