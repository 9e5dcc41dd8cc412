package environmenttest

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // SQLiteDatabase makes databases with it

	"github.com/longhaul-dev/longhaul/internal/environment"
	"github.com/longhaul-dev/longhaul/internal/sandbox"
	"github.com/longhaul-dev/longhaul/internal/snapshot"
	"github.com/longhaul-dev/longhaul/internal/tool"
	"github.com/longhaul-dev/longhaul/internal/workspace"
)

// NewBackend returns a backend whose environments keep their workspaces
// apart from every other backend it returned (another machine: another
// runner, another node) and store their snapshots' blobs in blobs, which
// all of them share (the server's store).
type NewBackend func(tb testing.TB, blobs *Blobs) environment.Backend

// Run runs the conformance suite against the backends newBackend returns.
func Run(t *testing.T, newBackend NewBackend) {
	tests := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"OpenProvisionsThenAttaches", testOpenProvisionsThenAttaches},
		{"OpenRefusesBadParams", testOpenRefusesBadParams},
		{"Exec", testExec},
		{"ExecCancelled", testExecCancelled},
		{"Files", testFiles},
		{"FilesStayInTheWorkspace", testFilesStayInTheWorkspace},
		{"Remove", testRemove},
		{"DirectFollowsNoSymlink", testDirect},
		{"ConditionalChanges", testConditional},
		{"RestoreDropsChangeMarkers", testRestoreDropsMarkers},
		{"SharedBySubAgents", testShared},
		{"DiskQuota", testDiskQuota},
		{"UnmeasurableWorkspaceIsNotOverQuota", testUnmeasurable},
		{"SnapshotLimits", testSnapshotLimits},
		{"NetworkOnlyThroughTheProxy", testNetwork},
		{"SnapshotAndRestore", testSnapshotAndRestore},
		{"SnapshotIsIncrementalAndDeduplicated", testSnapshotIncremental},
		{"RestoreElsewhereFetchesOnlyMissingBlobs", testRestoreElsewhere},
		{"RecordMarksWhatTheWorkspaceHolds", testRecord},
		{"SQLiteQueryReadsTheWorkspace", testSQLiteQuery},
		{"StopAndRecreate", testStopAndRecreate},
		{"StopRefusesWhatWouldLoseWork", testStopRefuses},
		{"StartLongLivedProcess", testStart},
		{"CloseEndsProcessesAndCalls", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			blobs := NewBlobs(t)
			tc.run(t, &harness{t: t, blobs: blobs, newBackend: func() environment.Backend { return newBackend(t, blobs) }})
		})
	}
}

type harness struct {
	t          *testing.T
	blobs      *Blobs
	newBackend func() environment.Backend
}

// ctx bounds one test's calls, so a backend that hangs fails the test
// rather than the whole run.
func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	h.t.Cleanup(cancel)
	return ctx
}

// open opens the environment of workspace (session = workspace) on b and
// closes it at the end of the test.
func (h *harness) open(b environment.Backend, ws string) environment.Environment {
	h.t.Helper()
	env, err := b.Open(h.ctx(), &environment.OpenParams{Workspace: ws, Session: ws})
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = env.Close() })
	return env
}

func (h *harness) write(env environment.Environment, rel, content string) {
	h.t.Helper()
	require.NoError(h.t, env.WriteFile(h.ctx(), rel, []byte(content)))
}

// read returns the content of rel, or "" with ok false when it does not
// exist.
func (h *harness) read(env environment.Environment, rel string) (string, bool) {
	h.t.Helper()
	r, err := env.ReadFile(h.ctx(), rel, 0, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	require.NoError(h.t, err)
	return string(r.Data), true
}

// requireContent checks that rel exists with content want.
func (h *harness) requireContent(env environment.Environment, rel, want string) {
	h.t.Helper()
	got, ok := h.read(env, rel)
	require.True(h.t, ok, "%s exists", rel)
	require.Equal(h.t, want, got, rel)
}

// requireOutside checks that err refuses a path that leaves the workspace.
func requireOutside(t *testing.T, err error, rel string) {
	t.Helper()
	require.True(t, errors.Is(err, workspace.ErrEscapes) || errors.Is(err, workspace.ErrInvalidPath), "%s: %v", rel, err)
}

func (h *harness) run(env environment.Environment, command string) *tool.ExecResult {
	h.t.Helper()
	res, err := env.Run(h.ctx(), &tool.ExecRequest{Command: command, Timeout: 30 * time.Second})
	require.NoError(h.t, err)
	return res
}

func testOpenProvisionsThenAttaches(t *testing.T, h *harness) {
	b := h.newBackend()
	env, err := b.Open(h.ctx(), &environment.OpenParams{Workspace: "ses_a", Session: "ses_a"})
	require.NoError(t, err)
	require.True(t, env.Info().Provisioned, "a workspace never seen is provisioned")
	require.NotEmpty(t, env.Info().Backend)
	h.write(env, "kept.txt", "kept")
	require.NoError(t, env.Close())
	require.NoError(t, env.Close(), "Close twice is fine")

	again := h.open(b, "ses_a")
	require.False(t, again.Info().Provisioned, "a closed environment's workspace is attached again")
	h.requireContent(again, "kept.txt", "kept")

	// A sub-agent opens its root's workspace under its own session id.
	sub, err := b.Open(h.ctx(), &environment.OpenParams{Workspace: "ses_a", Session: "ses_sub"})
	require.NoError(t, err)
	defer sub.Close()
	h.requireContent(sub, "kept.txt", "kept")
}

func testOpenRefusesBadParams(t *testing.T, h *harness) {
	b := h.newBackend()
	_, err := b.Open(h.ctx(), nil)
	require.Error(t, err)
	for _, bad := range []string{"", "../x", "a/b", ".."} {
		_, err := b.Open(h.ctx(), &environment.OpenParams{Workspace: bad, Session: "ses_a"})
		require.ErrorContains(t, err, "params.workspace", "workspace %q", bad)
	}
	_, err = b.Open(h.ctx(), &environment.OpenParams{Workspace: "ses_a", Session: "a b"})
	require.ErrorContains(t, err, "params.session")
}

func testExec(t *testing.T, h *harness) {
	env := h.open(h.newBackend(), "ses_exec")
	res, err := env.Run(h.ctx(), &tool.ExecRequest{
		Command: `printf out; printf err >&2; printf "$GREETING" > made.txt; exit 3`,
		Env:     map[string]string{"GREETING": "hello"},
		Timeout: 30 * time.Second,
	})
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode)
	require.Equal(t, "out", res.Stdout)
	require.Equal(t, "err", res.Stderr)
	h.requireContent(env, "made.txt", "hello")

	// What the file tools write, commands see.
	h.write(env, "dir/in.txt", "from the tool")
	require.Equal(t, "from the tool", h.run(env, "cat dir/in.txt").Stdout)

	res, err = env.Run(h.ctx(), &tool.ExecRequest{Command: "sleep 30", Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	require.True(t, res.TimedOut, "the request's timeout ends the command")

	_, err = env.Run(h.ctx(), &tool.ExecRequest{})
	require.ErrorContains(t, err, "command", "a bad request names its field")
}

// testExecCancelled: the caller's context ends a command at once (the
// engine cancels a call when its lease is lost or the session is
// cancelled), and the command's processes with it.
func testExecCancelled(t *testing.T, h *harness) {
	env := h.open(h.newBackend(), "ses_cancel")
	h.startCommand(env)()
	_, ok := h.read(env, ".finished")
	require.False(t, ok)
}

// startCommand starts a long command in env and waits until it runs; the
// function it returns cancels the command and waits until Run returns.
func (h *harness) startCommand(env environment.Environment) (cancelAndWait func()) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(h.ctx())
	ran := make(chan error, 1)
	go func() {
		_, err := env.Run(ctx, &tool.ExecRequest{Command: "echo > .running; sleep 600; echo > .finished", Timeout: time.Hour})
		ran <- err
	}()
	require.Eventually(h.t, func() bool { _, ok := h.read(env, ".running"); return ok }, 30*time.Second, 10*time.Millisecond)
	return func() {
		cancel()
		select {
		case <-ran:
		case <-time.After(30 * time.Second):
			h.t.Fatal("a cancelled command still runs")
		}
	}
}

func testFiles(t *testing.T, h *harness) {
	env := h.open(h.newBackend(), "ses_files")
	h.write(env, "a/b/c.txt", "0123456789")
	r, err := env.ReadFile(h.ctx(), "a/b/c.txt", 2, 3)
	require.NoError(t, err)
	require.Equal(t, "234", string(r.Data))
	require.Equal(t, int64(10), r.Size)
	require.True(t, r.Truncated)
	require.Equal(t, "a/b/c.txt", r.Path)

	h.write(env, "a/b/c.txt", "replaced")
	h.requireContent(env, "a/b/c.txt", "replaced")

	h.write(env, "a/z.txt", "z")
	l, err := env.List(h.ctx(), "a", 0)
	require.NoError(t, err)
	require.Equal(t, 2, l.Total)
	require.Equal(t, "b", l.Entries[0].Name)
	require.Equal(t, workspace.EntryDir, l.Entries[0].Type)
	require.Equal(t, "z.txt", l.Entries[1].Name)
	require.Equal(t, int64(1), l.Entries[1].Size)

	l, err = env.List(h.ctx(), "a", 1)
	require.NoError(t, err)
	require.True(t, l.Truncated)
	require.Len(t, l.Entries, 1)

	_, err = env.ReadFile(h.ctx(), "missing.txt", 0, 10)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = env.List(h.ctx(), "missing", 0)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func testFilesStayInTheWorkspace(t *testing.T, h *harness) {
	b := h.newBackend()
	other := h.open(b, "ses_other")
	h.write(other, "secret.txt", "not yours")
	env := h.open(b, "ses_mine")
	for _, p := range []string{"../ses_other/secret.txt", "/etc/passwd"} {
		_, err := env.ReadFile(h.ctx(), p, 0, 100)
		require.Error(t, err, p)
		requireOutside(t, err, p)
		require.NotContains(t, err.Error(), "not yours")
		err = env.WriteFile(h.ctx(), p, []byte("x"))
		requireOutside(t, err, p)
	}
	// A symlink a command made that leads out is not followed out.
	h.run(env, "ln -s ../ses_other/secret.txt link.txt")
	_, err := env.ReadFile(h.ctx(), "link.txt", 0, 100)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "not yours")
	err = env.WriteFile(h.ctx(), "link.txt", []byte("overwritten"))
	require.Error(t, err)
	h.requireContent(other, "secret.txt", "not yours")
}

func testRemove(t *testing.T, h *harness) {
	env := h.open(h.newBackend(), "ses_rm")
	h.write(env, "dir/gone.txt", "x")
	h.write(env, "dir/kept.txt", "y")
	id, _, err := env.Snapshot(h.ctx())
	require.NoError(t, err)
	require.NoError(t, env.Remove(h.ctx(), "dir/gone.txt"))
	_, ok := h.read(env, "dir/gone.txt")
	require.False(t, ok)
	next, _, err := env.Snapshot(h.ctx())
	require.NoError(t, err)
	require.NotEqual(t, id, next, "the next snapshot sees the removal")

	require.ErrorIs(t, env.Remove(h.ctx(), "dir/gone.txt"), fs.ErrNotExist)
	require.ErrorIs(t, env.Remove(h.ctx(), "dir"), workspace.ErrInvalidPath, "a directory is refused")
	requireOutside(t, env.Remove(h.ctx(), "../ses_rm/dir/kept.txt"), "../ses_rm/dir/kept.txt")
	// A symlink is removed itself, never what it points to.
	h.run(env, "ln -s dir/kept.txt link")
	require.NoError(t, env.Remove(h.ctx(), "link"))
	h.requireContent(env, "dir/kept.txt", "y")
}

// testDirect: a person's write (WriteFileDirect) lands at the path it
// names or nowhere: a symlink the model planted at the path or on the way
// is refused, never written through; StatDirect describes the path's own
// entry the same way.
func testDirect(t *testing.T, h *harness) {
	b := h.newBackend()
	env := h.open(b, "ses_direct")
	h.write(env, "scripts/deploy.sh", "deploy")
	h.run(env, "ln -s scripts/deploy.sh notes.md && ln -s scripts linked")
	require.ErrorIs(t, env.WriteFileDirect(h.ctx(), "notes.md", []byte("person")), workspace.ErrInvalidPath)
	require.ErrorIs(t, env.WriteFileDirect(h.ctx(), "linked/deploy.sh", []byte("person")), workspace.ErrInvalidPath)
	h.requireContent(env, "scripts/deploy.sh", "deploy")
	// A large write (sent in parts by a remote backend) is held to it too.
	big := bytes.Repeat([]byte("p"), 3<<20)
	require.ErrorIs(t, env.WriteFileDirect(h.ctx(), "notes.md", big), workspace.ErrInvalidPath)
	h.requireContent(env, "scripts/deploy.sh", "deploy")
	require.NoError(t, env.WriteFileDirect(h.ctx(), "scripts/new.txt", []byte("person")))
	h.requireContent(env, "scripts/new.txt", "person")
	// A file where the path needs a directory (the model made one since
	// the person's change was accepted) fails it as such, never as the
	// environment's failure: the change ends as not applied.
	err := env.WriteFileDirect(h.ctx(), "scripts/deploy.sh/notes.md", []byte("person"))
	require.ErrorIs(t, err, workspace.ErrInvalidPath)
	require.Contains(t, err.Error(), "not a directory")
	h.requireContent(env, "scripts/deploy.sh", "deploy")
	// So is a directory at the path itself.
	err = env.WriteFileDirect(h.ctx(), "scripts", []byte("person"))
	require.ErrorIs(t, err, workspace.ErrInvalidPath)
	require.Contains(t, err.Error(), "is a directory")
	h.requireContent(env, "scripts/deploy.sh", "deploy")

	en, err := env.StatDirect(h.ctx(), "notes.md")
	require.NoError(t, err)
	require.Equal(t, workspace.EntrySymlink, en.Type)
	require.Equal(t, "scripts/deploy.sh", en.Target)
	en, err = env.StatDirect(h.ctx(), "scripts/new.txt")
	require.NoError(t, err)
	require.Equal(t, workspace.Entry{Name: "scripts/new.txt", Type: workspace.EntryFile, Size: 6}, *en)
	en, err = env.StatDirect(h.ctx(), "scripts/none.txt")
	require.NoError(t, err)
	require.Nil(t, en, "a missing path")
	_, err = env.StatDirect(h.ctx(), "linked/deploy.sh")
	require.ErrorIs(t, err, workspace.ErrInvalidPath)
	requireOutside(t, env.WriteFileDirect(h.ctx(), "../ses_other/x.txt", []byte("x")), "../ses_other/x.txt")
}

// testShared has a root and a sub-agent work in one workspace at once:
// every write of either is in the snapshot taken after.
func testShared(t *testing.T, h *harness) {
	b := h.newBackend()
	root := h.open(b, "ses_root")
	sub, err := b.Open(h.ctx(), &environment.OpenParams{Workspace: "ses_root", Session: "ses_child"})
	require.NoError(t, err)
	defer sub.Close()
	_, _, err = root.Snapshot(h.ctx()) // a record for the next snapshots to start from
	require.NoError(t, err)
	errs := make(chan error, 3)
	for i, env := range []environment.Environment{root, sub} {
		go func() {
			for n := range 10 {
				if err := env.WriteFile(h.ctx(), fmt.Sprintf("w%d/%d.txt", i, n), []byte("x")); err != nil {
					errs <- err
					return
				}
				if _, _, err := env.Snapshot(h.ctx()); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	go func() {
		_, err := sub.Run(h.ctx(), &tool.ExecRequest{Command: "mkdir -p cmd && for i in 1 2 3; do echo $i > cmd/$i; done", Timeout: 30 * time.Second})
		errs <- err
	}()
	for range 3 {
		require.NoError(t, <-errs)
	}
	_, stats, err := root.Snapshot(h.ctx())
	require.NoError(t, err)
	require.Equal(t, 23, stats.Files, "no write is hidden by a snapshot taken meanwhile")
}

func testDiskQuota(t *testing.T, h *harness) {
	const quota = 1 << 20
	env, err := h.newBackend().Open(h.ctx(), &environment.OpenParams{Workspace: "ses_quota", Session: "ses_quota", Limits: sandbox.Limits{DiskBytes: quota}})
	require.NoError(t, err)
	defer env.Close()
	h.write(env, "small.txt", "fits")
	// CheckWrite answers as WriteFile would, writing nothing.
	require.NoError(t, env.CheckWrite(h.ctx(), 1024))
	require.ErrorIs(t, env.CheckWrite(h.ctx(), 2*quota), environment.ErrDiskQuota)
	err = env.WriteFile(h.ctx(), "big.bin", make([]byte, 2*quota))
	require.ErrorIs(t, err, environment.ErrDiskQuota)
	require.Contains(t, err.Error(), "big.bin", "the error names the path")
	_, ok := h.read(env, "big.bin")
	require.False(t, ok, "a refused write leaves nothing")

	res := h.run(env, "head -c 3145728 /dev/zero > big.bin; echo done")
	require.Contains(t, []string{sandbox.LimitDisk, sandbox.LimitFileSize}, res.Limit, "a command past the quota is stopped: %+v", res)
}

// testUnmeasurable: a workspace nested past what the quota's walk
// measures refuses a write (the quota fails closed), but says that it
// cannot be measured (ErrUnmeasurable), not that it is over its quota.
func testUnmeasurable(t *testing.T, h *harness) {
	env, err := h.newBackend().Open(h.ctx(), &environment.OpenParams{Workspace: "ses_deep", Session: "ses_deep", Limits: sandbox.Limits{DiskBytes: 4 << 20}})
	require.NoError(t, err)
	defer env.Close()
	h.run(env, `mkdir -p "$(printf 'a/%.0s' $(seq 1100))"`)
	for what, err := range map[string]error{
		"CheckWrite": env.CheckWrite(h.ctx(), 10),
		"WriteFile":  env.WriteFile(h.ctx(), "small.txt", []byte("x")),
	} {
		require.ErrorIs(t, err, environment.ErrUnmeasurable, what)
		require.NotErrorIs(t, err, environment.ErrDiskQuota, what)
		require.Contains(t, err.Error(), "cannot be measured", what)
	}
	_, ok := h.read(env, "small.txt")
	require.False(t, ok, "a refused write leaves nothing")
}

func testSnapshotLimits(t *testing.T, h *harness) {
	env, err := h.newBackend().Open(h.ctx(), &environment.OpenParams{Workspace: "ses_big", Session: "ses_big",
		Snapshot: environment.SnapshotLimits{MaxFileBytes: 100, Exclude: []string{"cache"}}})
	require.NoError(t, err)
	defer env.Close()
	h.write(env, "cache/huge.bin", strings.Repeat("x", 1000))
	h.write(env, "ok.txt", "small")
	id, stats, err := env.Snapshot(h.ctx())
	require.NoError(t, err, "an excluded directory is not read")
	require.Equal(t, 1, stats.Files)

	h.write(env, "too-big.bin", strings.Repeat("x", 1000))
	_, _, err = env.Snapshot(h.ctx())
	require.ErrorIs(t, err, snapshot.ErrTooLarge)
	require.Contains(t, err.Error(), "too-big.bin")
	require.ErrorIs(t, env.Stop(h.ctx(), id), snapshot.ErrTooLarge, "Stop frees nothing it cannot snapshot")
	got, ok := h.read(env, "too-big.bin")
	require.True(t, ok)
	require.Len(t, got, 1000)
}

// testNetwork checks, for a backend that confines the network, that a
// program reaches nothing directly and that the proxy decides by the
// allowlist and reports each decision.
func testNetwork(t *testing.T, h *harness) {
	b := h.newBackend()
	if !b.ConfinesNetwork() {
		t.Skipf("the %s backend does not confine the network", b.Name())
	}
	requireProgram(t, "curl")
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "host") }))
	defer host.Close()

	none := h.open(b, "ses_nonet")
	res := h.run(none, "curl -s -m 5 --noproxy '*' "+host.URL)
	require.NotZero(t, res.ExitCode, "without network the host's loopback is unreachable: %+v", res)

	events := make(chan tool.NetworkEvent, 16)
	env, err := b.Open(h.ctx(), &environment.OpenParams{Workspace: "ses_net", Session: "ses_net", Network: &environment.Network{
		Allow: []string{"allowed.example"}, OnEvent: func(ev tool.NetworkEvent) { events <- ev },
	}})
	require.NoError(t, err)
	defer env.Close()
	res = h.run(env, "curl -s -m 10 -o /dev/null -w '%{http_code}' http://refused.example/")
	require.Equal(t, "403", res.Stdout, "the proxy refuses a host not listed: %+v", res)
	select {
	case ev := <-events:
		require.Equal(t, "refused.example", ev.Host)
		require.False(t, ev.Allowed)
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy's decision was not reported")
	}
	res = h.run(env, "curl -s -m 5 --noproxy '*' "+host.URL)
	require.NotZero(t, res.ExitCode, "around the proxy, nothing is reachable: %+v", res)
}

// requireProgram skips (or fails under CI=true) when a program the test
// runs in the environment is missing.
func requireProgram(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s must be installed under CI=true", name)
		}
		t.Skipf("skipping: %s is not installed", name)
	}
}

func testSnapshotAndRestore(t *testing.T, h *harness) {
	env := h.open(h.newBackend(), "ses_snap")
	h.write(env, "keep.txt", "v1")
	h.write(env, "dir/change.txt", "before")
	h.run(env, "mkdir -p empty && chmod 755 empty && ln -s keep.txt link")
	id, stats, err := env.Snapshot(h.ctx())
	require.NoError(t, err)
	require.NotEmpty(t, id)
	require.Equal(t, 2, stats.Files)
	held, err := env.Holds(h.ctx(), id)
	require.NoError(t, err)
	require.True(t, held, "a snapshot just taken is held")

	h.write(env, "dir/change.txt", "after")
	h.write(env, "added.txt", "new")
	h.run(env, "rm keep.txt")
	stats, err = env.Restore(h.ctx(), id)
	require.NoError(t, err)
	require.Equal(t, 2, stats.Files)
	h.requireContent(env, "keep.txt", "v1")
	h.requireContent(env, "dir/change.txt", "before")
	_, ok := h.read(env, "added.txt")
	require.False(t, ok, "what the snapshot does not hold is removed")
	require.Equal(t, "v1", strings.TrimSpace(h.run(env, "cat link; test -d empty && echo").Stdout))
	held, err = env.Holds(h.ctx(), id)
	require.NoError(t, err)
	require.True(t, held, "a snapshot just restored is held")

	again, _, err := env.Snapshot(h.ctx())
	require.NoError(t, err)
	require.Equal(t, id, again, "the same content is the same snapshot")

	_, err = env.Restore(h.ctx(), strings.Repeat("0", 64))
	require.Error(t, err, "an unknown snapshot")
}

func testSnapshotIncremental(t *testing.T, h *harness) {
	env := h.open(h.newBackend(), "ses_incr")
	for i := range 20 {
		h.write(env, "src/f"+string(rune('a'+i))+".txt", strings.Repeat("x", 1000+i))
	}
	first, _, err := env.Snapshot(h.ctx())
	require.NoError(t, err)
	same, stats, err := env.Snapshot(h.ctx())
	require.NoError(t, err)
	require.Equal(t, first, same)
	require.Zero(t, stats.NewBlobs, "nothing changed, nothing stored")

	h.write(env, "src/fa.txt", "edited")
	next, stats, err := env.Snapshot(h.ctx())
	require.NoError(t, err)
	require.NotEqual(t, first, next)
	require.True(t, stats.Incremental, "after the file tools' writes only, a snapshot starts from the last one")
	require.Less(t, stats.ReadBytes, int64(1000), "only the written file is read again")
	require.Equal(t, 3, stats.NewBlobs, "the new file, its directory's tree and the root's")
}

func testRestoreElsewhere(t *testing.T, h *harness) {
	here := h.open(h.newBackend(), "ses_move")
	big := strings.Repeat("unchanged content ", 4096)
	h.write(here, "big.txt", big)
	h.write(here, "small.txt", "one")
	first, _, err := here.Snapshot(h.ctx())
	require.NoError(t, err)

	// Another machine (another runner, another node) recreates it.
	there := h.open(h.newBackend(), "ses_move")
	require.True(t, there.Info().Provisioned)
	_, err = there.Restore(h.ctx(), first)
	require.NoError(t, err)
	h.requireContent(there, "big.txt", big)
	require.Equal(t, 1, h.blobs.Gets(Digest([]byte(big))))

	h.write(here, "small.txt", "two")
	second, _, err := here.Snapshot(h.ctx())
	require.NoError(t, err)
	_, err = there.Restore(h.ctx(), second)
	require.NoError(t, err)
	h.requireContent(there, "small.txt", "two")
	require.Equal(t, 1, h.blobs.Gets(Digest([]byte(big))), "a chunk the other side holds is not fetched again")
	require.Equal(t, 1, h.blobs.Gets(Digest([]byte("two"))))
}

func testStopAndRecreate(t *testing.T, h *harness) {
	b := h.newBackend()
	env, err := b.Open(h.ctx(), &environment.OpenParams{Workspace: "ses_idle", Session: "ses_idle"})
	require.NoError(t, err)
	h.write(env, "work/notes.md", "progress")
	id, _, err := env.Snapshot(h.ctx())
	require.NoError(t, err)
	require.NoError(t, env.Stop(h.ctx(), id))

	_, err = env.Run(h.ctx(), &tool.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, environment.ErrClosed)
	_, err = env.ReadFile(h.ctx(), "work/notes.md", 0, 10)
	require.ErrorIs(t, err, environment.ErrClosed)
	require.NoError(t, env.Close(), "Close after Stop is fine")

	again := h.open(b, "ses_idle")
	require.True(t, again.Info().Provisioned, "a stopped environment's workspace was freed")
	_, ok := h.read(again, "work/notes.md")
	require.False(t, ok)
	held, err := again.Holds(h.ctx(), id)
	require.NoError(t, err)
	require.False(t, held, "a recreated workspace holds no snapshot until restored")
	_, err = again.Restore(h.ctx(), id)
	require.NoError(t, err)
	h.requireContent(again, "work/notes.md", "progress")
}

// testRecord: a marker Record notes (a person's change the engine applied)
// is held by every Environment of the workspace, until the workspace is
// provisioned anew.
func testRecord(t *testing.T, h *harness) {
	b := h.newBackend()
	env := h.open(b, "ses_mark")
	held, err := env.Holds(h.ctx(), "change-7")
	require.NoError(t, err)
	require.False(t, held, "nothing recorded yet")
	h.write(env, "person.txt", "from a person")
	require.NoError(t, env.Record(h.ctx(), "change-7"))
	held, err = env.Holds(h.ctx(), "change-7")
	require.NoError(t, err)
	require.True(t, held)
	require.Error(t, env.Record(h.ctx(), "two words"), "a marker is one word")
	id, _, err := env.Snapshot(h.ctx())
	require.NoError(t, err)
	require.NoError(t, env.Close())

	again := h.open(b, "ses_mark")
	held, err = again.Holds(h.ctx(), "change-7")
	require.NoError(t, err)
	require.True(t, held, "kept with the workspace across a close")
	require.NoError(t, again.Stop(h.ctx(), id))
	fresh := h.open(b, "ses_mark")
	require.True(t, fresh.Info().Provisioned)
	held, err = fresh.Holds(h.ctx(), "change-7")
	require.NoError(t, err)
	require.False(t, held, "a workspace provisioned anew holds no marker")
}

// testSQLiteQuery: sqlite_query runs where the workspace is, read-only,
// within its limits, and reaches no file outside the workspace.
func testSQLiteQuery(t *testing.T, h *harness) {
	env := h.open(h.newBackend(), "ses_sql")
	db := SQLiteDatabase(t, "CREATE TABLE t(x TEXT)", "INSERT INTO t VALUES ('a'), ('b'), ('c')")
	require.NoError(t, env.WriteFile(h.ctx(), "data/t.db", db))
	ans, err := env.SQLiteQuery(h.ctx(), &tool.SQLiteRequest{Database: "data/t.db", SQL: "SELECT x FROM t ORDER BY x", MaxRows: 2})
	require.NoError(t, err)
	require.Empty(t, ans.Error)
	require.Equal(t, [][]any{{"a"}, {"b"}}, ans.Output.Rows)
	require.True(t, ans.Output.Truncated, "max_rows holds")

	ans, err = env.SQLiteQuery(h.ctx(), &tool.SQLiteRequest{Database: "data/t.db", SQL: "DELETE FROM t", MaxRows: 10})
	require.NoError(t, err)
	require.NotEmpty(t, ans.Error, "read-only")
	ans, err = env.SQLiteQuery(h.ctx(), &tool.SQLiteRequest{Database: "data/t.db", SQL: "SELECT 1", MaxRows: 5000})
	require.NoError(t, err)
	require.Contains(t, ans.Error, "max_rows", "the limits are checked again where it runs")

	outside := filepath.Join(t.TempDir(), "outside.db")
	require.NoError(t, os.WriteFile(outside, db, 0o600))
	h.run(env, "ln -s "+outside+" link.db")
	for _, name := range []string{"../outside.db", outside, "link.db"} {
		ans, err = env.SQLiteQuery(h.ctx(), &tool.SQLiteRequest{Database: name, SQL: "SELECT x FROM t", MaxRows: 10})
		require.NoError(t, err, name)
		require.NotEmpty(t, ans.Error, "%s: a database outside the workspace is refused", name)
		require.Nil(t, ans.Output, name)
	}
}

// SQLiteDatabase returns the bytes of a SQLite database made by stmts.
func SQLiteDatabase(t testing.TB, stmts ...string) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "made.db")
	db, err := sql.Open("sqlite", p)
	require.NoError(t, err)
	for _, s := range stmts {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
	require.NoError(t, db.Close())
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	return data
}

func testStopRefuses(t *testing.T, h *harness) {
	b := h.newBackend()
	env := h.open(b, "ses_busy")
	h.write(env, "a.txt", "a")
	id, _, err := env.Snapshot(h.ctx())
	require.NoError(t, err)

	h.write(env, "a.txt", "written after the snapshot")
	require.ErrorIs(t, env.Stop(h.ctx(), id), environment.ErrChanged)
	h.requireContent(env, "a.txt", "written after the snapshot")

	id, _, err = env.Snapshot(h.ctx())
	require.NoError(t, err)
	// A call in flight: its command may still write.
	cancelAndWait := h.startCommand(env)
	require.ErrorIs(t, env.Stop(h.ctx(), id), environment.ErrBusy, "a command runs")
	cancelAndWait()
	require.NoError(t, env.Remove(h.ctx(), ".running"))
	id, _, err = env.Snapshot(h.ctx()) // as the command left it
	require.NoError(t, err)
	sub, err := b.Open(h.ctx(), &environment.OpenParams{Workspace: "ses_busy", Session: "ses_sub"})
	require.NoError(t, err)
	require.ErrorIs(t, env.Stop(h.ctx(), id), environment.ErrBusy, "a sub-agent shares the workspace")
	require.NoError(t, sub.Close())
	require.NoError(t, env.Stop(h.ctx(), id))
}

func testStart(t *testing.T, h *harness) {
	env := h.open(h.newBackend(), "ses_proc")
	p, err := env.Start(h.ctx(), &sandbox.StartRequest{Command: `echo started >&2; while read line; do echo "got $line"; done`})
	require.NoError(t, err)
	_, err = p.Stdin().Write([]byte("ping\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "got ping\n", line)
	require.Empty(t, p.Exit(), "still running")
	p.Stop(5 * time.Second)
	<-p.Done()
	require.NotEmpty(t, p.Exit())
	require.Contains(t, p.Stderr(), "started")
}

func testClose(t *testing.T, h *harness) {
	env, err := h.newBackend().Open(h.ctx(), &environment.OpenParams{Workspace: "ses_close", Session: "ses_close"})
	require.NoError(t, err)
	p, err := env.Start(h.ctx(), &sandbox.StartRequest{Command: "exec sleep 600"})
	require.NoError(t, err)
	require.NoError(t, env.Close())
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a program of a closed environment still runs")
	}
	_, err = env.Run(h.ctx(), &tool.ExecRequest{Command: "true"})
	require.ErrorIs(t, err, environment.ErrClosed)
	err = env.WriteFile(h.ctx(), "x", []byte("x"))
	require.ErrorIs(t, err, environment.ErrClosed)
	_, _, err = env.Snapshot(h.ctx())
	require.ErrorIs(t, err, environment.ErrClosed)
	_, err = env.Start(h.ctx(), &sandbox.StartRequest{Command: "true"})
	require.ErrorIs(t, err, environment.ErrClosed)
}

// BenchmarkRun measures one trivial command through a backend's
// Environment (what a shell call costs besides the command itself), so
// that backends are compared by the same code: a remote backend's added
// latency is its figure minus the local one's.
func BenchmarkRun(b *testing.B, newBackend NewBackend) {
	env := benchEnv(b, newBackend)
	req := &tool.ExecRequest{Command: "true", Timeout: time.Minute}
	benchLoop(b, func() error {
		res, err := env.Run(context.Background(), req)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
		}
		return err
	})
}

// BenchmarkReadFile measures a small file tool read through a backend's
// Environment: no program runs, so a remote backend's figure is its
// round trip to the runner.
func BenchmarkReadFile(b *testing.B, newBackend NewBackend) {
	env := benchEnv(b, newBackend)
	require.NoError(b, env.WriteFile(context.Background(), "small.txt", []byte("small")))
	benchLoop(b, func() error {
		_, err := env.ReadFile(context.Background(), "small.txt", 0, 100)
		return err
	})
}

func benchEnv(b *testing.B, newBackend NewBackend) environment.Environment {
	env, err := newBackend(b, NewBlobs(b)).Open(context.Background(), &environment.OpenParams{Workspace: "ses_bench", Session: "ses_bench"})
	require.NoError(b, err)
	b.Cleanup(func() { _ = env.Close() })
	return env
}

// benchLoop times op per iteration and reports the median and the 99th
// percentile besides the mean: the mean hides a slow tail (a runner's
// round trip waits behind its connection's other frames).
func benchLoop(b *testing.B, op func() error) {
	var took []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		err := op()
		took = append(took, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}

// testConditional: a person's change made only where the path holds what
// the person saw (WriteFileIf, RemoveIf), its marker recorded with it; a
// program's write since is kept, never overwritten, and a change is never
// made twice.
func testConditional(t *testing.T, h *harness) {
	env := h.open(h.newBackend(), "ses_cond")
	cond := func(basis, marker string) environment.Condition {
		return environment.Condition{Basis: basis, Marker: marker}
	}
	requireConflict := func(err error, found string) {
		t.Helper()
		var ce *environment.ConflictError
		require.ErrorAs(t, err, &ce)
		require.ErrorIs(t, err, environment.ErrConflict)
		require.Equal(t, found, ce.Found)
	}
	held := func(marker string) bool {
		t.Helper()
		ok, err := env.Holds(h.ctx(), marker)
		require.NoError(t, err)
		return ok
	}

	// Absent as the person saw it: created, the marker with it.
	require.NoError(t, env.WriteFileIf(h.ctx(), "new/a.txt", []byte("person"), cond(workspace.BasisAbsent, "change-1")))
	h.requireContent(env, "new/a.txt", "person")
	require.True(t, held("change-1"))
	// A program writes it; the same change again is not made twice.
	h.run(env, "printf program > new/a.txt")
	require.NoError(t, env.WriteFileIf(h.ctx(), "new/a.txt", []byte("person"), cond(workspace.BasisAbsent, "change-1")))
	h.requireContent(env, "new/a.txt", "program")

	// Based on what the program replaced: a conflict, its bytes kept.
	requireConflict(env.WriteFileIf(h.ctx(), "new/a.txt", []byte("person 2"), cond(workspace.BasisOf([]byte("person")), "change-2")),
		workspace.BasisOf([]byte("program")))
	h.requireContent(env, "new/a.txt", "program")
	require.False(t, held("change-2"), "no marker for a change not made")
	// Found in conflict once, never made: not even once the path holds
	// what the person saw again (a twin's judgement may be journaled).
	h.run(env, "printf person > new/a.txt")
	require.ErrorIs(t, env.WriteFileIf(h.ctx(), "new/a.txt", []byte("person 2"), cond(workspace.BasisOf([]byte("person")), "change-2")), environment.ErrConflict)
	h.run(env, "printf program > new/a.txt")
	// A file a program made where the person saw none is kept too.
	h.run(env, "printf made > b.txt")
	requireConflict(env.WriteFileIf(h.ctx(), "b.txt", []byte("person"), cond(workspace.BasisAbsent, "change-3")), workspace.BasisOf([]byte("made")))
	h.requireContent(env, "b.txt", "made")

	// Based on what is there: written, also in parts (a large write).
	big := bytes.Repeat([]byte("q"), 3<<20)
	require.NoError(t, env.WriteFileIf(h.ctx(), "new/a.txt", big, cond(workspace.BasisOf([]byte("program")), "change-4")))
	r, err := env.ReadFile(h.ctx(), "new/a.txt", 0, 4<<20)
	require.NoError(t, err)
	require.Equal(t, big, r.Data)
	require.True(t, held("change-4"))
	// What the change makes is there already: no conflict, the marker.
	require.NoError(t, env.WriteFileIf(h.ctx(), "b.txt", []byte("made"), cond(workspace.BasisOf([]byte("other")), "change-5")))
	require.True(t, held("change-5"))

	// Deletes: only of what the person saw.
	requireConflict(env.RemoveIf(h.ctx(), "b.txt", cond(workspace.BasisOf([]byte("other")), "change-6")), workspace.BasisOf([]byte("made")))
	h.requireContent(env, "b.txt", "made")
	require.NoError(t, env.RemoveIf(h.ctx(), "b.txt", cond(workspace.BasisOf([]byte("made")), "change-7")))
	_, ok := h.read(env, "b.txt")
	require.False(t, ok)
	require.True(t, held("change-7"))
	require.NoError(t, env.RemoveIf(h.ctx(), "b.txt", cond(workspace.BasisOf([]byte("made")), "change-8")), "gone already: made")
	require.True(t, held("change-8"))

	// A symlink is never written through nor taken for a file.
	h.run(env, "ln -s new/a.txt link")
	require.ErrorIs(t, env.WriteFileIf(h.ctx(), "link", []byte("person"), cond(workspace.BasisAbsent, "change-9")), workspace.ErrInvalidPath)
	requireConflict(env.RemoveIf(h.ctx(), "link", cond(workspace.BasisOf(big), "change-10")), string(workspace.EntrySymlink))
	require.NoError(t, env.RemoveIf(h.ctx(), "link", cond("", "change-11")), "no basis: the link itself goes")
	r, err = env.ReadFile(h.ctx(), "new/a.txt", 0, 4<<20)
	require.NoError(t, err)
	require.Equal(t, big, r.Data, "never its target")
	requireOutside(t, env.WriteFileIf(h.ctx(), "../ses_other/x.txt", []byte("x"), cond(workspace.BasisAbsent, "change-12")), "../ses_other/x.txt")
}

// testRestoreDropsMarkers: a marker means "the workspace holds the
// change". A restore onto a snapshot taken before the change drops it
// (and a "-conflict" twin), so the change applied again is made, not
// taken as made already.
func testRestoreDropsMarkers(t *testing.T, h *harness) {
	env := h.open(h.newBackend(), "ses_restore_marks")
	h.run(env, "printf before > keep.txt")
	snap, _, err := env.Snapshot(h.ctx())
	require.NoError(t, err)
	made := environment.Condition{Basis: workspace.BasisAbsent, Marker: "change-5"}
	require.NoError(t, env.WriteFileIf(h.ctx(), "a.txt", []byte("person"), made))
	h.run(env, "printf program > b.txt")
	require.ErrorIs(t, env.WriteFileIf(h.ctx(), "b.txt", []byte("person"), environment.Condition{Basis: workspace.BasisAbsent, Marker: "change-6"}), environment.ErrConflict)

	_, err = env.Restore(h.ctx(), snap)
	require.NoError(t, err)
	for _, id := range []string{"change-5", environment.ConflictMarker("change-6")} {
		held, err := env.Holds(h.ctx(), id)
		require.NoError(t, err)
		require.False(t, held, "%s: the restored snapshot does not hold it", id)
	}
	held, err := env.Holds(h.ctx(), snap)
	require.NoError(t, err)
	require.True(t, held)

	require.NoError(t, env.WriteFileIf(h.ctx(), "a.txt", []byte("person"), made))
	h.requireContent(env, "a.txt", "person")
	require.NoError(t, env.WriteFileIf(h.ctx(), "b.txt", []byte("person"), environment.Condition{Basis: workspace.BasisAbsent, Marker: "change-6"}))
	h.requireContent(env, "b.txt", "person")
	h.requireContent(env, "keep.txt", "before")
}
