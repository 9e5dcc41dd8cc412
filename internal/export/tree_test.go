package export

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/store"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)

// createRaw stores a session whose documents are written as given, with
// whitespace, line breaks and characters encoding/json would escape.
func createRaw(t *testing.T, st store.Store, id, parent string, at time.Time) {
	t.Helper()
	_, err := st.SessionCreate(context.Background(), &store.SessionCreateParams{
		Session: store.SessionRow{
			// Not the default project: the project travels with the
			// session (requireSameSession compares the rows).
			ID: id, Project: "support", AgentName: "writer", AgentVersion: 2, ParentID: parent, Status: "idle",
			Spec:      json.RawMessage("{\n  \"model\": {\"provider\": \"scripted\"}\n}"),
			State:     json.RawMessage(`{"note":"<b>&amp;</b> \u00e9t\u00e9","n":1.50}`),
			CreatedAt: at, UpdatedAt: at.Add(time.Second),
		},
		Events: []store.NewEvent{
			{Type: "session.created", Time: at, Data: json.RawMessage(`{"input":"a < b && c > d"}`)},
			{Type: "turn.created", Time: at, TurnID: "turn_1" + id, Data: json.RawMessage("{ \"spaced\" :\r\n true }")},
			{Type: "note", Time: at.Add(time.Millisecond), TurnID: "turn_1" + id, Step: 3, WorkerID: "node-x", Data: json.RawMessage(`null`)},
		},
		Docs: []store.DocWrite{{Kind: store.DocTurn, ID: "turn_1" + id, Status: "completed", Doc: json.RawMessage("{\"id\": \"turn_1" + id + "\"}\n"), CreatedAt: at}},
	})
	require.NoError(t, err)
}

// TestDocumentsTravelByteForByte: JSON documents come back as they were
// stored, whether they fit on a line verbatim or need base64.
func TestDocumentsTravelByteForByte(t *testing.T) {
	t.Parallel()
	src, dst := openSQLite(t), openSQLite(t)
	createRaw(t, src, "ses_raw", "", t0)
	path, _ := exportTo(t, src, "ses_raw", nil)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), `"data":{"input":"a < b && c > d"}`, "a one-line document is embedded verbatim")
	require.Contains(t, string(data), `"spec_base64":`, "a document with a line break goes as base64")
	_, err = importFrom(t, dst, path, nil)
	require.NoError(t, err)
	requireSameSession(t, src, dst, "ses_raw")
}

// TestExportWithSubagents: with WithSubagents the session's whole tree
// travels, parents first; without, the session alone, and both sides say
// that its parent stayed behind.
func TestExportWithSubagents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openSQLite(t)
	createRaw(t, src, "ses_root", "", t0)
	createRaw(t, src, "ses_child_a", "ses_root", t0.Add(time.Minute))
	createRaw(t, src, "ses_child_b", "ses_root", t0.Add(2*time.Minute))
	createRaw(t, src, "ses_grandchild", "ses_child_a", t0.Add(3*time.Minute))
	createRaw(t, src, "ses_other", "", t0)

	path, sum := exportTo(t, src, "ses_root", &Options{WithSubagents: true})
	require.Equal(t, []string{"ses_root", "ses_child_a", "ses_child_b", "ses_grandchild"}, sum.Sessions)
	require.Empty(t, sum.Warnings)
	dst := openSQLite(t)
	got, err := importFrom(t, dst, path, nil)
	require.NoError(t, err)
	require.Equal(t, sum.Sessions, got.Sessions)
	for _, id := range sum.Sessions {
		requireSameSession(t, src, dst, id)
	}
	_, err = dst.SessionGet(ctx, "ses_other")
	require.ErrorIs(t, err, store.ErrNotFound)

	path, sum = exportTo(t, src, "ses_child_a", nil)
	require.Equal(t, []string{"ses_child_a"}, sum.Sessions)
	require.Equal(t, []string{"session ses_child_a is a sub-agent of ses_root, which is not in the export"}, sum.Warnings)
	alone := openSQLite(t)
	got, err = importFrom(t, alone, path, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"session ses_child_a is a sub-agent of ses_root, which is neither in the file nor in the target store"}, got.Warnings)
	requireSameSession(t, src, alone, "ses_child_a")
}

// TestExportMissingSession names the session.
func TestExportMissingSession(t *testing.T) {
	t.Parallel()
	_, err := Export(context.Background(), openSQLite(t), "ses_nope", &strings.Builder{}, nil)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "ses_nope")
}

// TestEncodeLine: raw documents are appended verbatim or as base64, and a
// NULL (nil) one is left out.
func TestEncodeLine(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		value []byte
		want  string
	}{
		{nil, `{"kind":"x"}`},
		{[]byte(`null`), `{"kind":"x","doc":null}`},
		{[]byte(`{"a":"<&>"}`), `{"kind":"x","doc":{"a":"<&>"}}`},
		{[]byte("[1,\n2]"), `{"kind":"x","doc_base64":"WzEsCjJd"}`},
		{[]byte("\"\xff\""), `{"kind":"x","doc_base64":"Iv8i"}`},
	} {
		line, err := encodeLine(struct {
			Kind string `json:"kind"`
		}{"x"}, rawField{"doc", tt.value})
		require.NoError(t, err)
		require.Equal(t, tt.want+"\n", string(line), fmt.Sprintf("%q", tt.value))
		var l anyLine
		require.NoError(t, json.Unmarshal(line, &l))
		got, err := pick("doc", l.Doc, l.DocBase64)
		require.NoError(t, err)
		require.Equal(t, tt.value, got)
	}
}

// TestImportRefusesParentOfAnotherProject: a sub-agent whose parent is of
// another project, in the target store or in the file (only a crafted
// file says so: spawn_agent keeps the parent's project), is refused before
// anything is written; the tree would cross projects.
func TestImportRefusesParentOfAnotherProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openSQLite(t)
	createRaw(t, src, "ses_root", "", t0)
	createRaw(t, src, "ses_child", "ses_root", t0.Add(time.Minute))
	child, _ := exportTo(t, src, "ses_child", nil)
	tree, _ := exportTo(t, src, "ses_root", &Options{WithSubagents: true})

	dst := openSQLite(t)
	_, err := dst.SessionCreate(ctx, &store.SessionCreateParams{Session: store.SessionRow{
		ID: "ses_root", Project: "billing", AgentName: "writer", AgentVersion: 1, Status: "idle",
		Spec: json.RawMessage(`{}`), State: json.RawMessage(`{}`), CreatedAt: t0, UpdatedAt: t0,
	}, Events: []store.NewEvent{{Type: "session.created", Time: t0, Data: json.RawMessage(`{}`)}}})
	require.NoError(t, err)
	_, err = importFrom(t, dst, child, nil)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `session ses_child: its parent ses_root is in project "billing", not in its own ("support")`)
	_, err = dst.SessionGet(ctx, "ses_child")
	require.ErrorIs(t, err, store.ErrNotFound)

	data, err := os.ReadFile(tree)
	require.NoError(t, err)
	lines := fileLines(strings.SplitAfter(string(data), "\n"))
	lines = lines.edit(t, lines.index(t, kindSession, 0), func(m map[string]any) { m["project"] = "billing" })
	crafted := filepath.Join(t.TempDir(), "crafted.jsonl")
	require.NoError(t, os.WriteFile(crafted, []byte(strings.Join(lines, "")), 0o600))
	fresh := openSQLite(t)
	_, err = importFrom(t, fresh, crafted, nil)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `its parent ses_root is in project "billing"`)
	_, err = fresh.SessionGet(ctx, "ses_root")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing written")
}
