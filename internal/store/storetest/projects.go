package storetest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/stretchr/testify/require"
)

func inProject(project string) sessionOpt {
	return func(p *store.SessionCreateParams) { p.Session.Project = project }
}

// testSessionProjects: a session is stored in its project (the default one
// when it names none), and lists of sessions and of actions keep one
// project's when asked, with the other filters and across pages.
func testSessionProjects(t *testing.T, h *harness) {
	h.createSession("ses_d1", createdAt(at(1*time.Second)))
	h.createSession("ses_s1", inProject("support"), createdAt(at(2*time.Second)))
	h.createSession("ses_s2", inProject("support"), createdAt(at(3*time.Second)), func(p *store.SessionCreateParams) {
		p.Session.ParentID = "ses_s1"
	})
	h.createSession("ses_o1", inProject("ops"), createdAt(at(4*time.Second)))
	h.createSession("ses_s3", inProject("support"), createdAt(at(5*time.Second)))

	require.Equal(t, store.DefaultProject, h.session("ses_d1").Project, "no project: the default one")
	require.Equal(t, "support", h.session("ses_s1").Project)
	require.Equal(t, "ops", h.session("ses_o1").Project)
	for id, want := range map[string]string{"ses_d1": store.DefaultProject, "ses_s2": "support", "ses_o1": "ops"} {
		project, err := h.s.SessionProject(h.ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, project, "SessionProject(%s)", id)
	}
	_, err := h.s.SessionProject(h.ctx, "ses_nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = h.s.SessionProject(h.ctx, "")
	require.Error(t, err, "no id")

	sessions := h.sessionIDs
	require.Equal(t, []string{"ses_s3", "ses_o1", "ses_s2", "ses_s1", "ses_d1"}, sessions(store.SessionListParams{}))
	require.Equal(t, []string{"ses_s3", "ses_s2", "ses_s1"}, sessions(store.SessionListParams{Project: "support"}))
	require.Equal(t, []string{"ses_d1"}, sessions(store.SessionListParams{Project: store.DefaultProject}))
	require.Empty(t, sessions(store.SessionListParams{Project: "nobody"}))
	require.Equal(t, []string{"ses_s3", "ses_s1"}, sessions(store.SessionListParams{Project: "support", RootsOnly: true}))
	require.Equal(t, []string{"ses_s2"}, sessions(store.SessionListParams{Project: "support", ParentID: "ses_s1"}))
	require.Empty(t, sessions(store.SessionListParams{Project: "ops", ParentID: "ses_s1"}))
	require.Equal(t, []string{"ses_s2", "ses_s1"}, sessions(store.SessionListParams{Project: "support", Cursor: "ses_s3"}))
	require.Equal(t, []string{"ses_s2"}, sessions(store.SessionListParams{Project: "support", Cursor: "ses_o1", Limit: 1}),
		"a cursor from another project still positions the page")
	require.Equal(t, []string{"ses_s3", "ses_s2"}, sessions(store.SessionListParams{
		Project: "support", CreatedFrom: at(3 * time.Second), CreatedBefore: at(6 * time.Second),
	}))

	h.append("ses_d1", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{actionDoc("act_d1", "pending", "approval", at(10*time.Second))}
	})
	h.append("ses_s1", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{
			actionDoc("act_s1", "pending", "approval", at(11*time.Second)),
			actionDoc("act_s2", "resolved", "input", at(12*time.Second)),
		}
	})
	h.append("ses_s2", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{actionDoc("act_s3", "pending", "approval", at(13*time.Second))}
	})
	h.append("ses_o1", 1, 1, func(p *store.EventAppendParams) {
		p.Docs = []store.DocWrite{actionDoc("act_o1", "pending", "approval", at(14*time.Second))}
	})
	actions := h.actionIDs
	require.Equal(t, []string{"act_d1", "act_s1", "act_s2", "act_s3", "act_o1"}, actions(store.ActionListParams{}))
	require.Equal(t, []string{"act_s1", "act_s2", "act_s3"}, actions(store.ActionListParams{Project: "support"}))
	require.Equal(t, []string{"act_s1", "act_s3"}, actions(store.ActionListParams{Project: "support", Status: "pending"}))
	require.Equal(t, []string{"act_s2"}, actions(store.ActionListParams{Project: "support", Type: "input"}))
	require.Equal(t, []string{"act_s3"}, actions(store.ActionListParams{Project: "support", SessionID: "ses_s2"}))
	require.Empty(t, actions(store.ActionListParams{Project: "ops", SessionID: "ses_s2"}), "a session of another project lists nothing")
	require.Equal(t, []string{"act_s3"}, actions(store.ActionListParams{
		Project: "support", After: &store.DocCursor{CreatedAt: at(12 * time.Second), ID: "act_s2"},
	}))
	require.Equal(t, []string{"act_d1"}, actions(store.ActionListParams{Project: store.DefaultProject}))
	require.Equal(t, []string{"act_o1"}, actions(store.ActionListParams{Project: "ops", Limit: 1}))
}

// testBlobProjects: a blob is in the projects of the sessions that wrote it
// (with their creation or an append); a blob stored alone is in none.
func testBlobProjects(t *testing.T, h *harness) {
	created := []byte("written with the session")
	appended := []byte("written with an append")
	shared := []byte("written by sessions of two projects")
	alone := []byte("a snapshot's blob, stored alone")
	h.createSession("ses_a", inProject("alpha"), func(p *store.SessionCreateParams) {
		p.Blobs = []store.BlobWrite{{SHA256: sha(created), Data: created}, {SHA256: sha(shared), Data: shared}}
	})
	h.createSession("ses_b", inProject("beta"))
	h.append("ses_b", 1, 1, func(p *store.EventAppendParams) {
		p.Blobs = []store.BlobWrite{{SHA256: sha(appended), Data: appended}, {SHA256: sha(shared), Data: shared}}
	})
	// Writing the same blob again, from the same session, is harmless.
	h.append("ses_b", 2, 1, func(p *store.EventAppendParams) {
		p.Blobs = []store.BlobWrite{{SHA256: sha(appended), Data: appended}}
	})
	require.NoError(t, h.s.BlobPut(h.ctx, sha(alone), alone))

	in := func(data []byte, project string) bool {
		t.Helper()
		ok, err := h.s.BlobInProject(h.ctx, sha(data), project)
		require.NoError(t, err)
		return ok
	}
	require.True(t, in(created, "alpha"))
	require.False(t, in(created, "beta"))
	require.True(t, in(appended, "beta"))
	require.False(t, in(appended, "alpha"))
	require.True(t, in(shared, "alpha"))
	require.True(t, in(shared, "beta"))
	require.False(t, in(shared, store.DefaultProject))
	require.False(t, in(alone, "alpha"), "a blob stored alone is in no project")
	h.createSession("ses_imported", inProject("gamma"), func(p *store.SessionCreateParams) {
		p.BlobRefs = []string{sha(alone)}
	})
	require.True(t, in(alone, "gamma"), "a blob stored before, named by a session's BlobRefs")
	require.False(t, in(alone, "alpha"))
	_, err := h.s.SessionCreate(h.ctx, &store.SessionCreateParams{
		Session: store.SessionRow{
			ID: "ses_bad_ref", AgentName: "a", AgentVersion: 1, Status: "queued",
			Spec: json.RawMessage(`{}`), State: json.RawMessage(`{}`), CreatedAt: t0,
		},
		BlobRefs: []string{sha(created), "not-a-digest"},
	})
	require.ErrorContains(t, err, "blob_refs[1]", "a malformed digest in BlobRefs")
	_, err = h.s.SessionGet(h.ctx, "ses_bad_ref")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing of a refused creation is kept")
	require.False(t, in([]byte("never stored"), "alpha"))

	// A refused append records no reference.
	refused := []byte("refused")
	p := appendParams("ses_a", 5, 1) // stale seq
	p.Blobs = []store.BlobWrite{{SHA256: sha(refused), Data: refused}}
	_, err = h.s.EventAppend(h.ctx, p)
	require.ErrorIs(t, err, store.ErrConflict)
	require.False(t, in(refused, "alpha"))

	_, err = h.s.BlobInProject(h.ctx, "not-a-digest", "alpha")
	require.Error(t, err, "a malformed digest")
	_, err = h.s.BlobInProject(h.ctx, sha(created), "")
	require.Error(t, err, "no project")
}

// preProjectsBlobs are the blobs of the session ses_old in the drivers'
// tests of 009_projects, by what the session held them for (a snapshot's
// blob is named by no session), and whether the migration must find them
// in the session's project.
var preProjectsBlobs = map[string]bool{"payload": true, "upload": true, "artifact": true, "snapshot": false}

// PreProjectsSQL fills a driver's statements that store a database as it
// was before 009_projects (the session ses_old, its journal and its
// blobs): each {payload}, {upload}, {artifact} and {snapshot} becomes the
// digest of that blob.
func PreProjectsSQL(template string) string {
	var pairs []string
	for name := range preProjectsBlobs {
		pairs = append(pairs, "{"+name+"}", sha([]byte(name)))
	}
	return strings.NewReplacer(pairs...).Replace(template)
}

// RequireProjectsMigrated checks what 009_projects made of the database
// PreProjectsSQL filled: ses_old is in the default project, and so are the
// blobs its journal and artifacts name, but not the snapshot's.
func RequireProjectsMigrated(t *testing.T, s store.Store) {
	t.Helper()
	row, err := s.SessionGet(t.Context(), "ses_old")
	require.NoError(t, err)
	require.Equal(t, store.DefaultProject, row.Project)
	for name, want := range preProjectsBlobs {
		in, err := s.BlobInProject(t.Context(), sha([]byte(name)), store.DefaultProject)
		require.NoError(t, err)
		require.Equal(t, want, in, "the %s blob", name)
	}
}
