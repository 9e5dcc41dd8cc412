package main

import (
	"context"
	"database/sql"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	"github.com/longhaul-dev/longhaul/internal/store/postgres/pgtest"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// pwCanary is a password put into the tests' PostgreSQL URLs (the test
// server trusts every connection, so it is never checked): it must appear
// in no output, log line or error.
const pwCanary = "pw-canary-5e1f9a0c"

// pgURL returns a URL to a fresh schema of the test database, with the
// canary password in it, and the schema's name.
func pgURL(t *testing.T) (string, string) {
	t.Helper()
	dsn := pgtest.FreshSchema(t)
	if !isPostgresURL(dsn) {
		t.Skipf("%s is not a postgres:// URL, which --store needs", pgtest.Env)
	}
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), pwCanary)
	return u.String(), u.Query().Get("search_path")
}

// withHostPort returns u with its host and port replaced.
func withHostPort(t *testing.T, u, hostPort string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	p.Host = hostPort
	return p.String()
}

// vaultEnv is an environment with a vault key, as every node of one
// PostgreSQL store shares.
func vaultEnv(extra map[string]string) func(string) string {
	env := map[string]string{"LONGHAUL_VAULT_KEY": "Ymh0c3Jxb2ZxbG16cGx0eGN2bmJxd2VydHl1aW9wYXM="}
	for k, v := range extra {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// proxy is a TCP proxy to PostgreSQL that can be cut, to play a database
// outage without stopping the shared test server.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.setDown(true)
	})
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		go p.pipe(c)
	}
}

func (p *proxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(s, c)
	go cp(c, s)
	<-done
	c.Close()
	s.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// setDown cuts every connection and refuses new ones (down), or lets them
// through again.
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// readyz returns the status code and body of GET /readyz.
func readyz(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// waitReady polls /readyz until it answers want.
func waitReady(t *testing.T, base string, want int) string {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		code, body := readyz(t, base)
		if code == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz of %s kept answering %d (%s), want %d", base, code, body, want)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// TestServeOnPostgresSeveralNodes: two nodes with data directories of their
// own share one PostgreSQL store: each has its own node id, both serve the
// same sessions, and a node whose database goes away reports not ready,
// with the reason, until it is back. The URL's password shows nowhere.
func TestServeOnPostgresSeveralNodes(t *testing.T) {
	t.Parallel()
	u, _ := pgURL(t)
	pgAddr, err := url.Parse(u)
	require.NoError(t, err)
	px := startProxy(t, pgAddr.Host)

	a := startServe(t, vaultEnv(map[string]string{"LONGHAUL_STORE": u}), "--data", t.TempDir())
	b := startServe(t, vaultEnv(nil), "--data", t.TempDir(), "--store", withHostPort(t, u, px.ln.Addr().String()))
	for _, n := range []*servingNode{a, b} {
		require.Contains(t, n.stdout.String(), "store:   PostgreSQL ")
		require.Contains(t, n.stdout.String(), "vault:   key from LONGHAUL_VAULT_KEY")
		waitReady(t, n.url, http.StatusOK)
	}
	idA, idB := nodeLine(t, a), nodeLine(t, b)
	require.NotEqual(t, idA, idB, "nodes with their own data directories have their own ids")

	// A session created on one node runs and shows on the other.
	spec := writeFile(t, "spec.json", `{"model":{"provider":"scripted","script":[{"text":"Done."}]}}`)
	id := strings.TrimSpace(cliOK(t, "run", "--server", a.url, "--agent-spec", spec, "--detach", "go"))
	deadline := time.Now().Add(testTimeout)
	for {
		s := cliJSON[lt.Session](t, "show", id, "--json", "--server", b.url)
		if s.Status == lt.SessionIdle {
			break
		}
		require.True(t, time.Now().Before(deadline), "session %s is %s", id, s.Status)
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}

	// The database goes away under node b: not ready, saying why; then back.
	px.setDown(true)
	body := waitReady(t, b.url, http.StatusServiceUnavailable)
	require.Contains(t, body, "not ready: storage")
	require.NotContains(t, body, pwCanary)
	code, _ := readyz(t, a.url)
	require.Equal(t, http.StatusOK, code, "node a's database is still there")
	px.setDown(false)
	waitReady(t, b.url, http.StatusOK)
	require.Contains(t, cliOK(t, "ls", "--server", b.url), id)

	require.NoError(t, a.stop())
	require.NoError(t, b.stop())
	for _, n := range []*servingNode{a, b} {
		require.NotContains(t, n.stdout.String()+n.stderr.String(), pwCanary)
	}
}

// nodeLine returns the node id a banner names.
func nodeLine(t *testing.T, n *servingNode) string {
	t.Helper()
	for _, line := range strings.Split(n.stdout.String(), "\n") {
		if id, ok := strings.CutPrefix(line, "  node:    "); ok {
			return id
		}
	}
	t.Fatalf("no node line in the banner:\n%s", n.stdout.String())
	return ""
}

// TestSchemaVersionChecks: migrate applies and reports the schema version
// of either store; serve --no-migrate refuses an older schema; every
// command refuses a newer one, naming both versions.
func TestSchemaVersionChecks(t *testing.T) {
	t.Parallel()
	for _, st := range []struct {
		name string
		// store returns the flags that name a fresh store, and a function
		// that makes its schema newer than the binary.
		store func(t *testing.T) ([]string, func())
	}{
		{"sqlite", func(t *testing.T) ([]string, func()) {
			dir := t.TempDir()
			return []string{"--data", dir}, func() {
				db, err := sql.Open("sqlite", filepath.Join(dir, dbFile))
				require.NoError(t, err)
				defer db.Close()
				_, err = db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)`)
				require.NoError(t, err)
			}
		}},
		{"postgres", func(t *testing.T) ([]string, func()) {
			u, schema := pgURL(t)
			return []string{"--store", u}, func() {
				pgtest.Exec(t, "INSERT INTO "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+" (version, name) VALUES (999, '999_future.sql')")
			}
		}},
	} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			flags, bump := st.store(t)
			if st.name == "sqlite" {
				r := cliRun(t, append([]string{"migrate", "--status"}, flags...)...)
				require.Equal(t, exitFailure, r.code)
				require.Contains(t, r.stderr, "no Longhaul database at")
			} else {
				require.Contains(t, cliOK(t, append([]string{"migrate", "--status"}, flags...)...), "version 0; this longhaul's is ")
			}
			r := cliRun(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--no-migrate", "--data", t.TempDir()}, flags...)...)
			require.Equal(t, exitFailure, r.code, r.stderr)
			require.Contains(t, r.stderr, "older than this longhaul's schema version")
			require.Contains(t, r.stderr, "run `longhaul migrate` first")

			out := cliOK(t, append([]string{"migrate"}, flags...)...)
			require.Regexp(t, `schema:  version 0 -> \d+ \(\d+ migration\(s\) applied\)`, out)
			require.Contains(t, cliOK(t, append([]string{"migrate"}, flags...)...), "up to date: nothing to do")
			require.Contains(t, cliOK(t, append([]string{"migrate", "--status"}, flags...)...), "up to date")

			bump()
			require.Contains(t, cliOK(t, append([]string{"migrate", "--status"}, flags...)...), "version 999; this longhaul's is")
			for _, args := range [][]string{
				{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir()},
				{"migrate"},
				{"export", "ses_x"},
			} {
				r := cliRun(t, append(args, flags...)...)
				require.Equal(t, exitFailure, r.code, "%v: %s", args, r.stderr)
				require.Regexp(t, `is at version 999, newer than this longhaul's schema version \d+`, r.stderr, "%v", args)
				require.NotContains(t, r.stdout+r.stderr, pwCanary)
			}
		})
	}
	// A --store that is not a PostgreSQL URL is a usage error that does
	// not repeat the value.
	r := cliRun(t, "migrate", "--store", "mysql://root:"+pwCanary+"@db/x")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "want a postgres:// or postgresql:// URL")
	require.NotContains(t, r.stderr, pwCanary)
}

// TestExportImportCommands moves a session from a SQLite data directory to
// PostgreSQL and, through standard input, to a fresh SQLite; a second
// import is refused, a dry run writes nothing.
func TestExportImportCommands(t *testing.T) {
	t.Parallel()
	u, _ := pgURL(t)
	src := t.TempDir()
	n := startServe(t, noEnv, "--data", src)
	spec := writeFile(t, "spec.json", `{"model":{"provider":"scripted","script":[
	  {"tool_calls":[{"name":"write_file","arguments":{"path":"notes.md","content":"alpha"}}]},
	  {"tool_calls":[{"name":"finish","arguments":{"summary":"done","artifacts":["notes.md"]}}]},
	  {"tool_calls":[{"name":"read_file","arguments":{"path":"notes.md"}}]},
	  {"text":"read it"}]},
	  "tools":[{"name":"write_file"},{"name":"read_file"},{"name":"finish"}]}`)
	id := strings.TrimSpace(cliOK(t, "run", "--server", n.url, "--agent-spec", spec, "--detach", "write"))
	deadline := time.Now().Add(testTimeout)
	for cliJSON[lt.Session](t, "show", id, "--json", "--server", n.url).Status != lt.SessionIdle {
		require.True(t, time.Now().Before(deadline))
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	events := cliOK(t, "events", id, "--json", "--server", n.url)
	require.NoError(t, n.stop())

	file := filepath.Join(t.TempDir(), "s.jsonl")
	r := cliRun(t, "export", id, "--data", src, "-o", file)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stderr, "Exported 1 session from SQLite ")
	fi, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	require.NoError(t, cliRun(t, "migrate", "--store", u).err)
	out := cliOK(t, "import", "--store", u, "--dry-run", file)
	require.Contains(t, out, "Checked (nothing written) 1 session into PostgreSQL ")
	out = cliOK(t, "import", "--store", u, file)
	require.Contains(t, out, "Imported 1 session into PostgreSQL ")
	require.Contains(t, out, id)
	require.NotContains(t, out, pwCanary)
	r = cliRun(t, "import", "--store", u, file)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "session "+id+": it already exists in the target store")
	require.NotContains(t, r.stderr, pwCanary)

	// The session runs on: a node on PostgreSQL serves the same journal
	// and takes a follow-up turn, its workspace restored from a snapshot.
	p := startServe(t, vaultEnv(nil), "--data", t.TempDir(), "--store", u)
	require.Equal(t, events, cliOK(t, "events", id, "--json", "--server", p.url))
	cl, err := client.New(p.url, nil)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = cl.CreateTurn(ctx, id, &lt.CreateTurnRequest{Input: "read it back"})
	require.NoError(t, err)
	var restored, readBack bool
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	for ev, err := range cl.StreamEvents(ctx, id, 0) {
		require.NoError(t, err)
		restored = restored || ev.Type == lt.EventEnvironmentRestored
		readBack = readBack || (ev.Type == lt.EventToolCompleted && strings.Contains(string(ev.Data), "alpha"))
		if ev.Type == lt.EventTurnCompleted && readBack {
			break
		}
	}
	require.True(t, restored, "the workspace was restored from the snapshot")
	require.True(t, readBack, "the follow-up turn read the file back")
	require.NoError(t, p.stop())

	// From PostgreSQL through a pipe into a fresh SQLite.
	dst := t.TempDir()
	require.NoError(t, cliRun(t, "migrate", "--data", dst).err)
	exported := newOutBuffer()
	require.NoError(t, execute(context.Background(), []string{"export", id, "--store", u}, exported, io.Discard, noEnv))
	r = cliRunIn(t, strings.NewReader(exported.String()), nil, "import", "--data", dst, "-")
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "Imported 1 session into SQLite ")
}

// TestServeStoreFlagsUsage: a --store that is not a PostgreSQL URL, from
// the flag or the environment, and a lease TTL too short to renew are
// usage errors; the URL is not repeated.
func TestServeStoreFlagsUsage(t *testing.T) {
	t.Parallel()
	bad := "mysql://root:" + pwCanary + "@db/x"
	r := cliRun(t, "serve", "--data", t.TempDir(), "--store", bad)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "want a postgres:// or postgresql:// URL")
	require.NotContains(t, r.stderr, pwCanary)
	r = cliRunIn(t, nil, map[string]string{"LONGHAUL_STORE": bad}, "export", "ses_x")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "LONGHAUL_STORE: want a postgres://")
	require.NotContains(t, r.stderr, pwCanary)
	r = cliRun(t, "serve", "--data", t.TempDir(), "--lease-ttl", "10ms")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--lease-ttl 10ms: want at least 1s")
}
