package export

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/model"
	"github.com/longhaul-dev/longhaul/internal/model/scripted"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/store/postgres"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

const waitTimeout = 30 * time.Second

// node is an engine over a store, with a workspace root of its own (as a
// node on another machine has).
type node struct {
	t      *testing.T
	st     store.Store
	eng    *engine.Engine
	spaces string
}

func startNode(t *testing.T, st store.Store, id string) *node {
	t.Helper()
	spaces := filepath.Join(t.TempDir(), "workspaces")
	eng, err := engine.New(st, &engine.Config{
		WorkspaceRoot: spaces, NodeID: id, PollInterval: 10 * time.Millisecond,
		Providers: map[string]model.Provider{"scripted": scripted.New(nil)},
	})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	n := &node{t: t, st: st, eng: eng, spaces: spaces}
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(n.t, n.eng.Stop(ctx))
}

func (n *node) waitStatus(id string, want lt.SessionStatus) *lt.Session {
	n.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		s, err := n.eng.GetSession(context.Background(), id)
		require.NoError(n.t, err)
		if s.Status == want {
			return s
		}
		require.False(n.t, s.Status == lt.SessionFailed || s.Status == lt.SessionCancelled, "session %s ended %s (%v)", id, s.Status, s.StopReason)
		if time.Now().After(deadline) {
			n.t.Fatalf("session %s is %s, want %s", id, s.Status, want)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "longhaul.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	require.NoError(t, st.Migrate(context.Background()))
	return st
}

func openPostgres(t *testing.T) *postgres.Store {
	t.Helper()
	dsn := pgtest.FreshSchema(t)
	st, err := postgres.Open(context.Background(), dsn, &postgres.Config{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	require.NoError(t, st.Migrate(context.Background()))
	return st
}

// bigText is over the engine's 64 KiB threshold, so the write_file call
// that carries it is journaled as a stub and a blob.
var bigText = strings.Repeat("All work and no play. ", 4000)

// workSession runs, on a SQLite node, a session that leaves behind
// everything an export must carry: a large payload moved to a blob, a
// workspace with a file of several chunks snapshotted by checkpoints (a
// named one among them), an artifact, a webhook_url; its script goes on
// with a follow-up turn that reads the files back. It returns the node and
// the session id, idle after its first turn. randomBytes is the size of
// the pseudo-random file put into the workspace.
func workSession(t *testing.T, randomBytes int) (*node, string) {
	t.Helper()
	n := startNode(t, openSQLite(t), "node-source")
	script := `[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"notes/a.md","content":"alpha"}}]},
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"big.txt","content":` + quote(bigText) + `}}]},
	  {"tool_calls":[{"name":"pause","arguments":{}}]},
	  {"tool_calls":[{"name":"checkpoint","arguments":{"name":"ready","summary":"notes, big.txt and random.bin exist","next_action":"finish"}}]},
	  {"tool_calls":[{"name":"finish","arguments":{"summary":"notes written","artifacts":["notes/a.md"]}}]},
	  {"tool_calls":[{"name":"read_file","arguments":{"path":"notes/a.md"}}]},
	  {"tool_calls":[{"name":"list_files","arguments":{"path":"."}}]},
	  {"text":"second turn done"}]`
	ctx := context.Background()
	s, err := n.eng.CreateSession(ctx, &lt.CreateSessionRequest{
		AgentSpec: &lt.AgentSpec{
			Model: lt.ModelSpec{Provider: "scripted", Script: json.RawMessage(script)}, Instructions: "Work.",
			Tools: []lt.ToolSpec{
				{Name: "write_file"}, {Name: "read_file"}, {Name: "list_files"}, {Name: "checkpoint"}, {Name: "finish"},
				{Name: "pause", Type: "function"},
			},
		},
		Input: "Write the notes", WebhookURL: "https://app.example.com/hooks/longhaul",
	})
	require.NoError(t, err)
	s = n.waitStatus(s.ID, lt.SessionRequiresAction)
	// While the agent waits, a file of several chunks appears in its
	// workspace (pseudo-random bytes, so content-defined chunking cuts it).
	buf := make([]byte, randomBytes)
	_, _ = rand.NewChaCha8([32]byte{5, 2, 3}).Read(buf) // never fails
	require.NoError(t, os.WriteFile(filepath.Join(n.spaces, s.ID, "random.bin"), buf, 0o640))
	_, err = n.eng.DecideAction(ctx, s.ID, s.RequiredActions[0].ID, &lt.Decision{Output: json.RawMessage(`"resumed"`)})
	require.NoError(t, err)
	n.waitStatus(s.ID, lt.SessionIdle)
	return n, s.ID
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// exportTo exports id from st into a file and returns its path.
func exportTo(t *testing.T, st store.Store, id string, opts *Options) (string, *Summary) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "session.jsonl")
	var buf bytes.Buffer
	sum, err := Export(context.Background(), st, id, &buf, opts)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	return path, sum
}

// importFrom imports the file at path into st.
func importFrom(t *testing.T, st store.Store, path string, opts *ImportOptions) (*Summary, error) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	return Import(context.Background(), st, f, fi.Size(), opts)
}

// requireSameSession checks that dst holds session id exactly as src
// does: the row, every event byte for byte, every doc, every blob.
func requireSameSession(t *testing.T, src, dst store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	a, err := src.SessionGet(ctx, id)
	require.NoError(t, err)
	b, err := dst.SessionGet(ctx, id)
	require.NoError(t, err)
	a.Lease, b.Lease = store.Lease{}, store.Lease{}
	require.Equal(t, a, b)

	ea, err := src.EventList(ctx, id, 0, 10000)
	require.NoError(t, err)
	eb, err := dst.EventList(ctx, id, 0, 10000)
	require.NoError(t, err)
	require.Equal(t, ea, eb)
	for i := range ea {
		require.True(t, bytes.Equal(ea[i].Data, eb[i].Data), "event %d: data differ", ea[i].Seq)
	}
	for _, kind := range docKinds {
		la, err := listDocs(ctx, src, kind, id)
		require.NoError(t, err)
		lb, err := listDocs(ctx, dst, kind, id)
		require.NoError(t, err)
		require.Equal(t, la, lb, "%s docs", kind)
	}
	// Every blob the session references is in dst, with the same bytes.
	rf := newRefs()
	for i := range ea {
		require.NoError(t, rf.event(ctx, &ea[i], src.BlobGet))
	}
	for _, kind := range docKinds {
		rows, err := listDocs(ctx, src, kind, id)
		require.NoError(t, err)
		for _, r := range rows {
			require.NoError(t, rf.doc(kind, r))
		}
	}
	require.NoError(t, rf.expand(ctx, src))
	for d := range rf.blobs {
		x, err := src.BlobGet(ctx, d)
		require.NoError(t, err)
		y, err := dst.BlobGet(ctx, d)
		require.NoError(t, err, "blob %s", d)
		require.True(t, bytes.Equal(x, y), "blob %s", d)
	}
}

func listDocs(ctx context.Context, st store.Store, kind store.DocKind, id string) ([]*store.DocRow, error) {
	switch kind {
	case store.DocTurn:
		return st.TurnList(ctx, id)
	case store.DocAction:
		return st.ActionList(ctx, id, "")
	case store.DocEffect:
		return st.EffectList(ctx, id)
	case store.DocArtifact:
		return st.ArtifactList(ctx, id)
	}
	return st.CheckpointList(ctx, id)
}

// requireSameTree checks that two directories hold the same files.
func requireSameTree(t *testing.T, want, got string) {
	t.Helper()
	read := func(root string) map[string]string {
		m := map[string]string{}
		require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			data, err := os.ReadFile(p)
			m[filepath.ToSlash(rel)] = string(data)
			return err
		}))
		return m
	}
	w, g := read(want), read(got)
	require.Equal(t, len(w), len(g), "files")
	for p := range w {
		require.True(t, w[p] == g[p], "file %s differs", p)
	}
}

// TestMoveSessionBetweenStores exports a worked session from SQLite,
// imports it into PostgreSQL and from there into a fresh SQLite: each time
// the session is the same (row, events byte for byte, docs, blobs), its
// checkpoints' snapshots restore its workspace, and it runs a follow-up
// turn on its new store, its workspace restored from the last snapshot.
func TestMoveSessionBetweenStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := openPostgres(t)
	src, id := workSession(t, 1100<<10)

	// What the source holds, checked so the test means something: a stub
	// event, an artifact, snapshots, a webhook secret.
	events, err := src.st.EventList(ctx, id, 0, 1000)
	require.NoError(t, err)
	stubs := 0
	for _, ev := range events {
		if blobStub(ev.Data) != "" {
			stubs++
		}
	}
	require.Positive(t, stubs, "a large payload was moved to a blob")
	arts, err := src.st.ArtifactList(ctx, id)
	require.NoError(t, err)
	require.Len(t, arts, 1)
	cps, err := src.eng.ListCheckpoints(ctx, id)
	require.NoError(t, err)
	var named *lt.Checkpoint
	for i := range cps {
		if cps[i].Name == "ready" {
			named = &cps[i]
		}
	}
	require.NotNil(t, named)
	require.NotEmpty(t, named.Snapshot)
	m, err := snapshot.Load(ctx, src.st, named.Snapshot)
	require.NoError(t, err)
	var chunked bool
	for _, e := range m.Entries {
		chunked = chunked || (e.Path == "random.bin" && len(e.Chunks) > 1)
	}
	require.True(t, chunked, "random.bin is cut into several chunks")
	ws, err := src.st.WebhookSessionInit(ctx, id, "whsec_unused")
	require.NoError(t, err)
	src.stop() // export is offline

	path, sum := exportTo(t, src.st, id, nil)
	require.Equal(t, []string{id}, sum.Sessions)
	require.Equal(t, len(events), sum.Events)
	require.Empty(t, sum.Warnings)

	// A dry run checks and writes nothing.
	dry, err := importFrom(t, pg, path, &ImportOptions{DryRun: true})
	require.NoError(t, err)
	require.Equal(t, sum.Counts, dry.Counts)
	_, err = pg.SessionGet(ctx, id)
	require.ErrorIs(t, err, store.ErrNotFound)

	got, err := importFrom(t, pg, path, nil)
	require.NoError(t, err)
	require.Equal(t, sum.Counts, got.Counts)
	require.Greater(t, sum.Blobs, 4, "stub, artifact, trees, chunks")
	require.Equal(t, sum.Blobs, got.NewBlobs)
	require.Empty(t, got.Warnings)
	requireSameSession(t, src.st, pg, id)

	// The session's blobs are its project's in the target too, so keys of
	// that project may read them.
	for _, ev := range events {
		if d := blobStub(ev.Data); d != "" {
			in, err := pg.BlobInProject(ctx, d, store.DefaultProject)
			require.NoError(t, err)
			require.True(t, in, "blob %s of event %d", d, ev.Seq)
		}
	}

	// The webhook secret came along, and the cursor: the target does not
	// notify the session's history again.
	pws, err := pg.WebhookSessionInit(ctx, id, "whsec_unused")
	require.NoError(t, err)
	require.Equal(t, ws.Secret, pws.Secret)
	require.Equal(t, ws.Cursor, pws.Cursor)

	// A second import is refused, naming the session: it exists.
	_, err = importFrom(t, pg, path, nil)
	require.ErrorIs(t, err, store.ErrConflict)
	require.ErrorContains(t, err, "session "+id)

	// Every checkpoint's snapshot restores from the target store; the last
	// one is the workspace as the session left it.
	for _, c := range cps {
		if c.Snapshot == "" {
			continue
		}
		_, err := snapshot.Restore(ctx, pg, c.Snapshot, filepath.Join(t.TempDir(), "ws"))
		require.NoError(t, err, "checkpoint %s", c.ID)
	}
	restored := filepath.Join(t.TempDir(), "ws")
	_, err = snapshot.Restore(ctx, pg, cps[len(cps)-1].Snapshot, restored)
	require.NoError(t, err)
	requireSameTree(t, filepath.Join(src.spaces, id), restored)

	// And back into a fresh SQLite, from the PostgreSQL copy.
	back := openSQLite(t)
	path2, _ := exportTo(t, pg, id, nil)
	_, err = importFrom(t, back, path2, nil)
	require.NoError(t, err)
	requireSameSession(t, src.st, back, id)

	// The session goes on with a follow-up turn on PostgreSQL, on a node
	// that never had its workspace: it is restored from the snapshot.
	for _, st := range []store.Store{pg, back} {
		n := startNode(t, st, "node-target")
		_, err = n.eng.CreateTurn(ctx, id, &lt.CreateTurnRequest{Input: "Read the notes back"})
		require.NoError(t, err)
		n.waitStatus(id, lt.SessionIdle)
		evs, err := st.EventList(ctx, id, 0, 1000)
		require.NoError(t, err)
		require.Equal(t, events, evs[:len(events)], "the imported journal is untouched")
		var restoredEv, readBack bool
		for _, ev := range evs[len(events):] {
			restoredEv = restoredEv || ev.Type == lt.EventEnvironmentRestored
			readBack = readBack || (ev.Type == lt.EventToolCompleted && strings.Contains(string(ev.Data), "alpha"))
		}
		require.True(t, restoredEv, "the workspace was restored on the new node")
		require.True(t, readBack, "the follow-up read the file back")
		requireSameTree(t, filepath.Join(src.spaces, id), filepath.Join(n.spaces, id))
		n.stop()
	}
}
