package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/app"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// How each Service method meets projects. Every method is in exactly one
// class (TestEveryMethodHasAProjectClass), so a new one must say how it
// is scoped before the suite passes.
var (
	// bySession: the first argument after ctx is a session id, checked
	// (visibleSession) before anything else.
	bySession = []string{
		"GetSession", "GetSessionTree", "CreateTurn", "ListTurns", "GetTurn", "Cancel", "SendSignal", "Fork",
		"Review", "AddConstraint", "UpdateBudget", "Steer", "Pause", "Resume",
		"ListEvents", "StreamEvents", "StreamTreeEvents",
		"ListActions", "ListTreeActions", "DecideAction",
		"SessionTrace", "ListEffects", "GetEffect", "ListCheckpoints", "ListArtifacts",
		"ListFiles", "OpenFile", "PutFileIfMatch", "DeleteFileIfMatch",
	}
	// byOwnID: an id of its own, resolved to its session (a blob: to the
	// sessions that wrote it); TestProjectIsolation tries each.
	byOwnID = []string{"GetAction", "GetArtifact", "ArtifactContent", "GetBlob"}
	// lists: keep the caller's project; a project parameter names one
	// (an admin's choice, another caller's own only).
	lists = []string{"ListSessions", "ListAllActions", "TaskReport"}
	// creations: made in the caller's project (an admin names one).
	creations = []string{"CreateSession"}
	// unscoped here: server-wide (keys, the audit log, who the caller is,
	// the probe), or resources that
	// carry a project of their own (agents, secrets, webhook endpoints and
	// their deliveries, runners) rather than through a session.
	unscoped = []string{
		"PutAgent", "EnsureAgent", "ListAgents", "GetAgent", "ListAgentVersions",
		"PutSecret", "ListSecrets", "DeleteSecret",
		"CreateKey", "ListKeys", "RevokeKey", "ListAudit", "Me", "Version",
		"CreateWebhookEndpoint", "ListWebhookEndpoints", "DeleteWebhookEndpoint", "ListWebhookDeliveries",
		"ListRunners", "Ready",
	}
)

// TestEveryMethodHasAProjectClass: the classes above name every Service
// method once, and nothing else.
func TestEveryMethodHasAProjectClass(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for _, class := range [][]string{bySession, byOwnID, lists, creations, unscoped} {
		for _, name := range class {
			seen[name]++
		}
	}
	for m := range reflect.TypeFor[app.Service]().Methods() {
		require.Equal(t, 1, seen[m.Name], "Service.%s must be in exactly one project class (projects_test.go): say how projects scope it", m.Name)
		delete(seen, m.Name)
	}
	require.Empty(t, seen, "classes name methods that Service lacks")
}

// TestEveryMethodChecksTheSessionProject calls every method given a session
// id, as each role that may call it in project alpha, with the id of a
// session of project beta in every string argument: each answers the 404
// of an unknown session, word for word, before it looks at anything else
// (empty requests and all). A caller of project beta gets past the check.
func TestEveryMethodChecksTheSessionProject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	beta, err := f.app.CreateSession(f.ctx, &lt.CreateSessionRequest{AgentSpec: leafSpecValue(t), Input: "hi", Project: "beta"})
	require.NoError(t, err)
	f.waitIdle(beta.ID)
	v := reflect.ValueOf(f.app)
	want := "session " + beta.ID + " not found"
	for _, name := range bySession {
		method := v.MethodByName(name)
		require.True(t, method.IsValid(), name)
		for _, role := range []lt.Role{lt.RoleOperator, lt.RoleApprover, lt.RoleReader} {
			if !app.Allowed(name, role) {
				continue
			}
			alpha := app.WithCaller(f.ctx, app.Caller{Name: "alpha", Role: role, Project: "alpha"})
			err := callWithID(t, method, alpha, beta.ID)
			e := apierror.From(err)
			require.Equal(t, http.StatusNotFound, e.Status, "%s as an alpha %s: %v", name, role, err)
			require.Equal(t, want, e.Message, "%s as an alpha %s", name, role)

			own := app.WithCaller(f.ctx, app.Caller{Name: "beta", Role: role, Project: "beta"})
			if err := callWithID(t, method, own, beta.ID); err != nil {
				require.NotEqual(t, want, apierror.From(err).Message, "%s as a beta %s: its own session", name, role)
			}
		}
	}
}

// callWithID calls method with ctx, id in every string argument, and zero
// values (empty requests for pointers) elsewhere, and returns its error as
// callZero does.
func callWithID(t *testing.T, method reflect.Value, ctx context.Context, id string) error {
	t.Helper()
	mt := method.Type()
	args := []reflect.Value{reflect.ValueOf(ctx)}
	for i := 1; i < mt.NumIn(); i++ {
		switch in := mt.In(i); {
		case in.Kind() == reflect.String:
			args = append(args, reflect.ValueOf(id).Convert(in))
		case in.Kind() == reflect.Pointer:
			args = append(args, reflect.New(in.Elem()))
		default:
			args = append(args, reflect.Zero(in))
		}
	}
	return callArgs(t, method, args)
}

// leafSpecValue is leafSpec as a value.
func leafSpecValue(t *testing.T) *lt.AgentSpec {
	t.Helper()
	return &lt.AgentSpec{Model: lt.ModelSpec{Provider: "scripted", Script: []byte(`[{"text": "done"}]`)}, Instructions: "Answer."}
}

// TestSubagentsAndForksStayInTheirProject: a session's sub-agents (down
// the tree) and its forks are in its project, whoever forks it, so a key
// of another project reaches none of them, and the tree of a session of
// its own holds only sessions of its project.
func TestSubagentsAndForksStayInTheirProject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var req lt.CreateSessionRequest
	require.NoError(t, json.Unmarshal([]byte(`{"agent_spec": `+spawnerSpec(spawnerSpec(leafSpec))+`, "input": "delegate", "project": "beta"}`), &req))
	root, err := f.app.CreateSession(f.ctx, &req)
	require.NoError(t, err)
	f.waitIdle(root.ID)
	tree, err := f.app.GetSessionTree(f.ctx, root.ID)
	require.NoError(t, err)
	var all []lt.Session
	var walk func(s lt.Session)
	walk = func(s lt.Session) {
		all = append(all, s)
		for _, c := range s.Subagents {
			walk(c)
		}
	}
	walk(*tree)
	require.Len(t, all, 3, "the root, its child and its grandchild")

	betaOperator := app.WithCaller(f.ctx, app.Caller{Name: "beta", Role: lt.RoleOperator, Project: "beta"})
	cps, err := f.app.ListCheckpoints(betaOperator, root.ID)
	require.NoError(t, err)
	require.NotEmpty(t, cps.Data)
	fork, err := f.app.Fork(betaOperator, root.ID, &lt.ForkRequest{CheckpointID: cps.Data[len(cps.Data)-1].ID})
	require.NoError(t, err)
	all = append(all, *fork)

	alpha := app.WithCaller(f.ctx, app.Caller{Name: "alpha", Role: lt.RoleReader, Project: "alpha"})
	for _, s := range all {
		got, err := f.app.GetSession(f.ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, "beta", got.Project, "session %s", s.ID)
		row, err := f.st.SessionGet(f.ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, "beta", row.Project, "the row of session %s", s.ID)
		_, err = f.app.GetSession(alpha, s.ID)
		e := apierror.From(err)
		require.Equal(t, http.StatusNotFound, e.Status, "%v", err)
		require.Equal(t, "session "+s.ID+" not found", e.Message)
	}
	children, err := f.app.ListSessions(betaOperator, lt.ListSessionsParams{ParentID: root.ID})
	require.NoError(t, err)
	require.Len(t, children.Data, 1)
	none, err := f.app.ListSessions(alpha, lt.ListSessionsParams{ParentID: root.ID})
	require.NoError(t, err)
	require.Empty(t, none.Data, "another project's children are not listed")
}
