package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	"github.com/longhaul-dev/longhaul/internal/app/apptest"
	"github.com/longhaul-dev/longhaul/internal/store"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestProjectIsolation is the conformance suite of projects at the level
// where they are enforced, the application service (the HTTP API and the
// library both call it), run on every store driver: SQLite, and PostgreSQL
// (skipped without a test database, required under CI=true). The store
// only keeps and filters a session's project; what a key sees is decided
// by the App, over whichever driver. In each of two projects a session
// has events, a blob (a payload moved out of the journal, and an
// artifact's content), an effect, an artifact, checkpoints, a resolved
// and a pending action, a trace and a report entry. A reader, an operator
// and an approver of one project get, for every id of the other, the same
// 404 as for an unknown id, and find nothing of it in any list, stream,
// inbox or report, while they see their own; an admin sees both.
func TestProjectIsolation(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := apptest.Drivers[name](t)
			testProjectIsolation(t, st)
		})
	}
}

// projectWork is what one project's session made.
type projectWork struct {
	session              *lt.Session
	turn                 string
	pending, resolved    string
	artifact, checkpoint string
	blobs                []string
}

// doWork runs a session in project as an admin naming it, to the pending
// second lookup, and returns what it made.
func doWork(t *testing.T, a *app.App, admin context.Context, project string) *projectWork {
	t.Helper()
	s, err := a.CreateSession(admin, &lt.CreateSessionRequest{AgentSpec: apptest.WorkSpec(t, project, 2), Input: "work", Project: project})
	require.NoError(t, err)
	require.Equal(t, project, s.Project)
	waitStatus(t, a, admin, s.ID, lt.SessionIdle)
	turn, err := a.CreateTurn(admin, s.ID, &lt.CreateTurnRequest{Input: "look up"})
	require.NoError(t, err)
	s = waitStatus(t, a, admin, s.ID, lt.SessionRequiresAction)
	first := s.RequiredActions[0].ID
	_, err = a.DecideAction(admin, s.ID, first, &lt.Decision{Output: json.RawMessage(`{"found": 1}`)})
	require.NoError(t, err)
	var second string
	deadline := time.Now().Add(15 * time.Second)
	for second == "" {
		s = waitStatus(t, a, admin, s.ID, lt.SessionRequiresAction)
		if id := s.RequiredActions[0].ID; id != first {
			second = id
		}
		require.True(t, time.Now().Before(deadline), "the second lookup never came")
	}

	w := &projectWork{session: s, turn: turn.ID, pending: second, resolved: first}
	arts, err := a.ListArtifacts(admin, s.ID)
	require.NoError(t, err)
	require.Len(t, arts.Data, 1)
	w.artifact = arts.Data[0].ID
	w.blobs = append(w.blobs, arts.Data[0].SHA256)
	cps, err := a.ListCheckpoints(admin, s.ID)
	require.NoError(t, err)
	require.NotEmpty(t, cps.Data)
	w.checkpoint = cps.Data[0].ID
	evs, err := a.ListEvents(admin, s.ID, 0, app.MaxListLimit)
	require.NoError(t, err)
	for _, ev := range evs.Data {
		if d, err := ev.DecodeData(); err == nil {
			if b, ok := d.(*lt.BlobData); ok {
				w.blobs = append(w.blobs, b.Blob.SHA256)
			}
		}
	}
	require.GreaterOrEqual(t, len(w.blobs), 2, "the artifact's content and the large call's payload")
	return w
}

// waitStatus polls the session until it has status.
func waitStatus(t *testing.T, a *app.App, ctx context.Context, id string, status lt.SessionStatus) *lt.Session {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, err := a.GetSession(ctx, id)
		require.NoError(t, err)
		if s.Status == status {
			return s
		}
		require.True(t, time.Now().Before(deadline), "session %s still %s, not %s", id, s.Status, status)
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an event
	}
}

// requireNotFound requires err to be the 404 an unknown id earns, word for
// word: want is that error's message.
func requireNotFound(t *testing.T, err error, want string, what string) {
	t.Helper()
	require.Error(t, err, what)
	e := apierror.From(err)
	require.Equal(t, http.StatusNotFound, e.Status, "%s: %v", what, err)
	require.Equal(t, want, e.Message, what)
	require.Empty(t, e.Field, what)
}

func testProjectIsolation(t *testing.T, st store.Store) {
	eng := apptest.EngineOn(t, st, nil)
	a := apptest.New(t, st, eng, nil)
	admin := app.WithCaller(t.Context(), app.LibraryCaller)
	alpha := doWork(t, a, admin, "alpha")
	beta := doWork(t, a, admin, "beta")
	b := beta.session.ID

	// What an unknown id earns, which another project's ids must earn too.
	_, err := a.GetSession(admin, "ses_unknown")
	requireNotFound(t, err, "session ses_unknown not found", "an unknown session, as an admin")

	for _, role := range []lt.Role{lt.RoleReader, lt.RoleOperator, lt.RoleApprover} {
		t.Run(string(role), func(t *testing.T) {
			ctx := app.WithCaller(t.Context(), app.Caller{KeyID: "key_" + string(role), Name: "alpha " + string(role), Role: role, Project: "alpha"})
			may := func(method string) bool { return app.Allowed(method, role) }
			gone := "session " + b + " not found"

			// Every read of the other project's session and of what it
			// derives.
			_, err := a.GetSession(ctx, b)
			requireNotFound(t, err, gone, "GetSession")
			_, err = a.GetSession(ctx, "ses_unknown")
			requireNotFound(t, err, "session ses_unknown not found", "GetSession of an unknown id")
			_, err = a.GetSessionTree(ctx, b)
			requireNotFound(t, err, gone, "GetSessionTree")
			_, err = a.ListTurns(ctx, b)
			requireNotFound(t, err, gone, "ListTurns")
			_, err = a.GetTurn(ctx, b, beta.turn)
			requireNotFound(t, err, gone, "GetTurn")
			_, err = a.ListEvents(ctx, b, 0, 0)
			requireNotFound(t, err, gone, "ListEvents")
			for ev, err := range a.StreamEvents(ctx, b, 0) {
				require.Zero(t, ev.Seq, "StreamEvents yields nothing of the session")
				requireNotFound(t, err, gone, "StreamEvents")
			}
			for ev, err := range a.StreamTreeEvents(ctx, b, "") {
				require.Zero(t, ev.Seq, "StreamTreeEvents yields nothing of the session")
				requireNotFound(t, err, gone, "StreamTreeEvents")
			}
			_, err = a.ListActions(ctx, b, "")
			requireNotFound(t, err, gone, "ListActions")
			_, err = a.ListTreeActions(ctx, b, "")
			requireNotFound(t, err, gone, "ListTreeActions")
			for _, id := range []string{beta.pending, beta.resolved} {
				_, err = a.GetAction(ctx, id)
				requireNotFound(t, err, "action "+id+" not found", "GetAction")
			}
			_, err = a.GetAction(ctx, "act_unknown")
			requireNotFound(t, err, "action act_unknown not found", "GetAction of an unknown id")
			_, err = a.SessionTrace(ctx, b, true)
			requireNotFound(t, err, gone, "SessionTrace")
			_, err = a.ListEffects(ctx, b)
			requireNotFound(t, err, gone, "ListEffects")
			_, err = a.GetEffect(ctx, b, "eff_x")
			requireNotFound(t, err, gone, "GetEffect")
			_, err = a.ListCheckpoints(ctx, b)
			requireNotFound(t, err, gone, "ListCheckpoints")
			_, err = a.ListArtifacts(ctx, b)
			requireNotFound(t, err, gone, "ListArtifacts")
			_, err = a.GetArtifact(ctx, beta.artifact)
			requireNotFound(t, err, "artifact "+beta.artifact+" not found", "GetArtifact")
			_, _, err = a.ArtifactContent(ctx, beta.artifact)
			requireNotFound(t, err, "artifact "+beta.artifact+" not found", "ArtifactContent")
			_, err = a.GetArtifact(ctx, "art_unknown")
			requireNotFound(t, err, "artifact art_unknown not found", "GetArtifact of an unknown id")
			for _, d := range beta.blobs {
				_, err = a.GetBlob(ctx, d)
				requireNotFound(t, err, "blob "+d+" not found", "GetBlob")
			}
			_, err = a.ListFiles(ctx, b, "", "")
			requireNotFound(t, err, gone, "ListFiles")
			_, err = a.ListFiles(ctx, b, beta.checkpoint, "")
			requireNotFound(t, err, gone, "ListFiles of a checkpoint")
			_, _, err = a.OpenFile(ctx, b, "", "big.txt")
			requireNotFound(t, err, gone, "OpenFile")
			_, _, err = a.OpenFile(ctx, b, beta.checkpoint, "big.txt")
			requireNotFound(t, err, gone, "OpenFile of a checkpoint")

			// The writes the role may make, refused alike.
			if may("DecideAction") {
				_, err = a.DecideAction(ctx, b, beta.pending, &lt.Decision{Output: json.RawMessage(`{}`)})
				requireNotFound(t, err, gone, "DecideAction")
			}
			if may("Cancel") {
				_, err = a.Cancel(ctx, b, &lt.CancelRequest{Reason: "mine now"})
				requireNotFound(t, err, gone, "Cancel")
			}
			if may("CreateTurn") {
				_, err = a.CreateTurn(ctx, b, &lt.CreateTurnRequest{Input: "do my bidding"})
				requireNotFound(t, err, gone, "CreateTurn")
				_, err = a.Fork(ctx, b, &lt.ForkRequest{CheckpointID: beta.checkpoint})
				requireNotFound(t, err, gone, "Fork")
				_, err = a.PutFileIfMatch(ctx, b, "planted.txt", []byte("x"), "", "")
				requireNotFound(t, err, gone, "PutFileIfMatch")
			}
			after, err := a.GetSession(admin, b)
			require.NoError(t, err)
			require.Equal(t, lt.SessionRequiresAction, after.Status, "nothing the other project's key did reached the session")
			require.False(t, after.CancelRequested)

			// Lists, the inbox and the report hold its own project only.
			sessions, err := a.ListSessions(ctx, lt.ListSessionsParams{})
			require.NoError(t, err)
			require.Equal(t, []string{alpha.session.ID}, sessionIDs(sessions.Data))
			mine, err := a.ListSessions(ctx, lt.ListSessionsParams{Project: "alpha"})
			require.NoError(t, err)
			require.Equal(t, []string{alpha.session.ID}, sessionIDs(mine.Data), "naming its own project")
			_, err = a.ListSessions(ctx, lt.ListSessionsParams{Project: "beta"})
			requireForbiddenProject(t, err)
			_, err = a.ListSessions(ctx, lt.ListSessionsParams{Cursor: b})
			e := apierror.From(err)
			require.Equal(t, http.StatusBadRequest, e.Status, "%v", err)
			require.Equal(t, `unknown cursor "`+b+`"`, e.Message, "another project's session is no cursor, as an unknown id")

			inbox, err := a.ListAllActions(ctx, lt.ListActionsParams{})
			require.NoError(t, err)
			require.ElementsMatch(t, []string{alpha.pending, alpha.resolved}, actionIDs(inbox.Data))
			pending, err := a.ListAllActions(ctx, lt.ListActionsParams{Status: string(lt.ActionPending)})
			require.NoError(t, err)
			require.Equal(t, []string{alpha.pending}, actionIDs(pending.Data))
			_, err = a.ListAllActions(ctx, lt.ListActionsParams{SessionID: b})
			requireNotFound(t, err, gone, "ListAllActions of the other project's session")
			_, err = a.ListAllActions(ctx, lt.ListActionsParams{Project: "beta"})
			requireForbiddenProject(t, err)

			rep, err := a.TaskReport(ctx, lt.TaskReportParams{})
			require.NoError(t, err)
			require.Equal(t, "alpha", rep.Project)
			require.Equal(t, 1, rep.Totals.Tasks)
			require.Equal(t, []string{alpha.session.ID}, taskIDs(rep.Data))
			_, err = a.TaskReport(ctx, lt.TaskReportParams{Project: "beta"})
			requireForbiddenProject(t, err)

			// Its own project's, it sees.
			_, err = a.GetSession(ctx, alpha.session.ID)
			require.NoError(t, err)
			evs, err := a.ListEvents(ctx, alpha.session.ID, 0, 0)
			require.NoError(t, err)
			require.NotEmpty(t, evs.Data)
			for ev, err := range a.StreamEvents(ctx, alpha.session.ID, 0) {
				require.NoError(t, err)
				require.Equal(t, int64(1), ev.Seq)
				break
			}
			for _, id := range []string{alpha.pending, alpha.resolved} {
				_, err = a.GetAction(ctx, id)
				require.NoError(t, err)
			}
			_, content, err := a.ArtifactContent(ctx, alpha.artifact)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(content, []byte("alpha: ")))
			for _, d := range alpha.blobs {
				_, err = a.GetBlob(ctx, d)
				require.NoError(t, err, "its own project's blob")
			}
			cps, err := a.ListCheckpoints(ctx, alpha.session.ID)
			require.NoError(t, err)
			require.NotEmpty(t, cps.Data)
			_, r, err := a.OpenFile(ctx, alpha.session.ID, alpha.checkpoint, "big.txt")
			if err == nil { // the first checkpoint may precede the file
				_, _ = io.Copy(io.Discard, r)
				require.NoError(t, r.Close())
			} else {
				require.Equal(t, http.StatusNotFound, apierror.From(err).Status, "%v", err)
				require.NotContains(t, err.Error(), "session "+alpha.session.ID)
			}
			_, err = a.SessionTrace(ctx, alpha.session.ID, true)
			require.NoError(t, err)
			effects, err := a.ListEffects(ctx, alpha.session.ID)
			require.NoError(t, err)
			require.NotEmpty(t, effects.Data)
		})
	}

	// A key's creations go in its project, which it may name but not
	// leave; an admin names any.
	operator := app.WithCaller(t.Context(), app.Caller{KeyID: "key_op", Name: "alpha operator", Role: lt.RoleOperator, Project: "alpha"})
	spec := &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(`[{"text": "ok"}]`)}, Instructions: "Answer."}
	s, err := a.CreateSession(operator, &lt.CreateSessionRequest{AgentSpec: spec, Input: "hi"})
	require.NoError(t, err)
	require.Equal(t, "alpha", s.Project)
	s, err = a.CreateSession(operator, &lt.CreateSessionRequest{AgentSpec: spec, Input: "hi", Project: "alpha"})
	require.NoError(t, err)
	require.Equal(t, "alpha", s.Project)
	_, err = a.CreateSession(operator, &lt.CreateSessionRequest{AgentSpec: spec, Input: "hi", Project: "beta"})
	requireForbiddenProject(t, err)
	_, err = a.CreateSession(admin, &lt.CreateSessionRequest{AgentSpec: spec, Input: "hi", Project: "Beta!"})
	e := apierror.From(err)
	require.Equal(t, http.StatusBadRequest, e.Status, "%v", err)
	require.Equal(t, "project", e.Field)
	s, err = a.CreateSession(admin, &lt.CreateSessionRequest{AgentSpec: spec, Input: "hi"})
	require.NoError(t, err)
	require.Equal(t, lt.DefaultProject, s.Project, "an admin without a project naming none: the default project")
	gammaAdmin := app.WithCaller(t.Context(), app.Caller{KeyID: "key_adm", Name: "gamma admin", Role: lt.RoleAdmin, Project: "gamma"})
	s, err = a.CreateSession(gammaAdmin, &lt.CreateSessionRequest{AgentSpec: spec, Input: "hi"})
	require.NoError(t, err)
	require.Equal(t, "gamma", s.Project, "an admin key naming none: its key's project")
	s, err = a.CreateSession(gammaAdmin, &lt.CreateSessionRequest{AgentSpec: spec, Input: "hi", Project: "delta"})
	require.NoError(t, err)
	require.Equal(t, "delta", s.Project, "an admin key names any project")

	// An admin sees both projects, and may keep one.
	all, err := a.ListSessions(admin, lt.ListSessionsParams{})
	require.NoError(t, err)
	require.Subset(t, sessionIDs(all.Data), []string{alpha.session.ID, b})
	only, err := a.ListSessions(admin, lt.ListSessionsParams{Project: "beta"})
	require.NoError(t, err)
	require.Equal(t, []string{b}, sessionIDs(only.Data))
	inbox, err := a.ListAllActions(admin, lt.ListActionsParams{})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{alpha.pending, alpha.resolved, beta.pending, beta.resolved}, actionIDs(inbox.Data))
	betaInbox, err := a.ListAllActions(admin, lt.ListActionsParams{Project: "beta"})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{beta.pending, beta.resolved}, actionIDs(betaInbox.Data))
	for _, d := range slices.Concat(alpha.blobs, beta.blobs) {
		_, err = a.GetBlob(admin, d)
		require.NoError(t, err)
	}
	_, _, err = a.ArtifactContent(admin, beta.artifact)
	require.NoError(t, err)
	rep, err := a.TaskReport(admin, lt.TaskReportParams{Project: "beta"})
	require.NoError(t, err)
	require.Equal(t, []string{b}, taskIDs(rep.Data))
	_, err = a.TaskReport(admin, lt.TaskReportParams{Project: "no such/project"})
	require.Equal(t, "project", apierror.From(err).Field)
}

func requireForbiddenProject(t *testing.T, err error) {
	t.Helper()
	e := apierror.From(err)
	require.Equal(t, http.StatusForbidden, e.Status, "%v", err)
	require.Equal(t, "project", e.Field)
}

func sessionIDs(ss []lt.Session) []string {
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	return ids
}

func actionIDs(as []lt.Action) []string {
	ids := make([]string, len(as))
	for i, a := range as {
		ids[i] = a.ID
	}
	return ids
}

func taskIDs(rs []lt.TaskRecord) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}
