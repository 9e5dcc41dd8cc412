package e2e

import (
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// This file is the harness of the multi-node tests: several longhaul nodes
// sharing one PostgreSQL store (each with a data directory of its own for
// its workspaces, node id and vault key), pausing a node with SIGSTOP, the
// readiness probe, and a throwaway PostgreSQL cluster for the test that
// stops and restarts the database under the nodes.

// cluster is several longhaul nodes on one PostgreSQL store.
type cluster struct {
	t     *testing.T
	args  []string // serve's flags of every node
	env   []string // and its environment: the vault key all nodes share
	nodes []*server
	ids   []string // each node's id: the worker id its journal events carry
	// leaseTTL is the nodes' lease TTL (--lease-ttl).
	leaseTTL time.Duration
}

// newCluster returns a cluster of no nodes on the store dsn whose leases
// last ttl: short, so that the others take over a dead node's sessions
// within the test. Shell commands run locally: the tests' commands write
// their evidence outside the workspace, which a sandbox rightly forbids.
func newCluster(t *testing.T, dsn string, ttl time.Duration) *cluster {
	t.Helper()
	help, err := binaryHelp()
	require.NoError(t, err)
	for _, flag := range []string{"--store", "--lease-ttl"} {
		require.Contains(t, help, flag, "longhaul serve has no %s flag: the multi-node tests need it", flag)
	}
	// Every node of a deployment decrypts the same vault: one key for all.
	var key [32]byte
	_, _ = crand.Read(key[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &cluster{
		t:        t,
		args:     []string{"--sandbox", "local", "--store", dsn, "--lease-ttl", ttl.String()},
		env:      []string{"LONGHAUL_VAULT_KEY=" + base64.StdEncoding.EncodeToString(key[:])},
		leaseTTL: ttl,
	}
}

// startCluster starts n nodes on the store dsn, one after the other.
func startCluster(t *testing.T, dsn string, n int, ttl time.Duration) *cluster {
	t.Helper()
	c := newCluster(t, dsn, ttl)
	for range n {
		c.add()
	}
	return c
}

// add starts one more node and returns its index.
func (c *cluster) add() int {
	c.t.Helper()
	s := startServerWithEnv(c.t, c.env, c.args...)
	c.nodes = append(c.nodes, s)
	c.ids = append(c.ids, nodeIDOf(c.t, s))
	return len(c.nodes) - 1
}

// running reports whether node i has a running incarnation (it may be
// paused).
func (c *cluster) running(i int) bool { return c.nodes[i].cmd != nil }

// pick returns a running node other than those in except, at random.
func (c *cluster) pick(rng *rand.Rand, except ...int) *server {
	c.t.Helper()
	var live []int
	for i := range c.nodes {
		if c.running(i) && !slices.Contains(except, i) {
			live = append(live, i)
		}
	}
	require.NotEmpty(c.t, live, "no running node to talk to")
	return c.nodes[live[rng.IntN(len(live))]]
}

// nameOf names the node whose id is workerID, for messages.
func (c *cluster) nameOf(workerID string) string {
	for i, id := range c.ids {
		if id == workerID {
			return fmt.Sprintf("node %d (%s)", i, id)
		}
	}
	return fmt.Sprintf("unknown worker %q", workerID)
}

// nodeLine is the banner's line naming the node.
var nodeLine = regexp.MustCompile(`(?m)^\s+node:\s+(\S+)\s*$`)

// nodeIDOf reads a node's id from its banner (the last one it printed).
func nodeIDOf(t *testing.T, s *server) string {
	t.Helper()
	m := nodeLine.FindAllStringSubmatch(s.logSince(0), -1)
	require.NotEmpty(t, m, "the banner of %s names no node id", s.addr)
	return m[len(m)-1][1]
}

// pause stops the running incarnation with SIGSTOP: it keeps its leases,
// its connections and its child processes (which go on running), and
// renews nothing, as a process stalled by its machine would.
func (s *server) pause() {
	s.t.Helper()
	require.NotNil(s.t, s.cmd, "pause a server that is not running")
	require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGSTOP))
}

// resume continues a paused incarnation with SIGCONT.
func (s *server) resume() {
	s.t.Helper()
	require.NotNil(s.t, s.cmd, "resume a server that is not running")
	require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGCONT))
}

// logSize is the length of the server's log so far, to read what it writes
// after a point (logSince).
func (s *server) logSize() int64 {
	info, err := os.Stat(s.logPath)
	if err != nil {
		return 0
	}
	return info.Size()
}

// readiness is what GET /readyz answered.
type readiness struct {
	status  int
	message string // the error's message when not ready
}

// probeReady asks a node's /readyz once, without retries.
func probeReady(s *server) (readiness, error) {
	probe := &http.Client{Timeout: 15 * time.Second}
	resp, err := probe.Get(s.url + "/readyz")
	if err != nil {
		return readiness{}, fmt.Errorf("GET /readyz of %s: %w", s.addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return readiness{}, fmt.Errorf("read /readyz of %s: %w", s.addr, err)
	}
	r := readiness{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			return r, fmt.Errorf("/readyz of %s answered %d with %q: %w", s.addr, resp.StatusCode, body, err)
		}
		r.message = e.Error.Message
	}
	return r, nil
}

// missingPostgres skips the test on a developer's machine and fails it
// under CI=true, where PostgreSQL is required (the rule of
// internal/store/postgres/pgtest, for what a test needs beyond a database).
func missingPostgres(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: CI requires PostgreSQL for this test", msg)
	}
	t.Skipf("%s: skipping; install PostgreSQL to run it", msg)
}

// pgCluster is a throwaway PostgreSQL cluster of one test, which the test
// may stop and start: no other test shares it.
type pgCluster struct {
	t    *testing.T
	bin  string   // directory of initdb, pg_ctl and postgres
	as   []string // command prefix that runs as the cluster's owner
	dir  string   // the cluster's directory: data, socket, log
	port int
	dsn  string
}

// findPostgresBin returns the directory holding initdb and pg_ctl: initdb's
// on PATH, else the newest of Debian's /usr/lib/postgresql/*/bin, else
// /usr/local/bin.
func findPostgresBin() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
			if info, err := os.Stat(filepath.Join(dir, name)); err != nil || info.IsDir() {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range append(dirs, "/usr/local/bin") {
		if has(d) {
			return d, nil
		}
	}
	return "", errors.New("initdb, pg_ctl and postgres not found (PATH, /usr/lib/postgresql/*/bin, /usr/local/bin)")
}

// startPostgres initialises a cluster in t.TempDir() and starts it on a
// free loopback port. initdb refuses to run as root, so as root (CI) the
// cluster belongs to the postgres user and its commands run through runuser.
// The cluster is stopped when the test ends.
func startPostgres(t *testing.T) *pgCluster {
	t.Helper()
	bin, err := findPostgresBin()
	if err != nil {
		missingPostgres(t, "no PostgreSQL server binaries: %v", err)
	}
	p := &pgCluster{t: t, bin: bin}
	base := t.TempDir()
	p.dir = filepath.Join(base, "pg")
	require.NoError(t, os.Mkdir(p.dir, 0o700))
	if os.Geteuid() == 0 {
		owner, err := user.Lookup("postgres")
		if err != nil {
			missingPostgres(t, "running as root, and there is no postgres user to own the cluster (initdb refuses root): %v", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			missingPostgres(t, "running as root without runuser to run PostgreSQL as the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		// The owner must reach its directory: the test's temporary
		// directories are private to root until opened for traversal.
		for _, d := range []string{filepath.Dir(base), base} {
			require.NoError(t, os.Chmod(d, 0o711))
		}
		require.NoError(t, os.Chown(p.dir, uid, gid))
		p.as = []string{runuser, "-u", "postgres", "--"}
	}
	out, err := p.command("initdb", "-D", p.data(), "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync").CombinedOutput()
	require.NoError(t, err, "initdb:\n%s", out)
	t.Cleanup(func() {
		// Immediate: the cluster is thrown away. Its errors are moot
		// (it may be stopped already).
		_ = p.command("pg_ctl", "-D", p.data(), "-m", "immediate", "-w", "stop").Run()
	})
	for attempt := 1; ; attempt++ {
		addr := freeLoopbackAddr(t)
		_, port, _ := strings.Cut(addr, ":")
		p.port, _ = strconv.Atoi(port)
		err := p.tryStart()
		if err == nil {
			break
		}
		if attempt == 5 {
			t.Fatalf("start PostgreSQL: %v", err)
		}
	}
	p.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	return p
}

func (p *pgCluster) data() string { return filepath.Join(p.dir, "data") }

// command runs a PostgreSQL program as the cluster's owner.
func (p *pgCluster) command(name string, args ...string) *exec.Cmd {
	argv := append(slices.Clone(p.as), filepath.Join(p.bin, name))
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = p.dir
	return cmd
}

// tryStart starts the server on p.port and waits until it accepts
// connections. fsync is off: the cluster is thrown away, and the test is
// about the nodes' behaviour during an outage, not durability across a
// power cut.
func (p *pgCluster) tryStart() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c max_connections=200 -c fsync=off", p.port, p.dir)
	out, err := p.command("pg_ctl", "-D", p.data(), "-l", filepath.Join(p.dir, "server.log"), "-w", "-t", "60", "-o", opts, "start").CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
		return fmt.Errorf("pg_ctl start on port %d: %w\n%s\nserver log:\n%s", p.port, err, out, log)
	}
	return nil
}

// start starts the stopped cluster again on its port.
func (p *pgCluster) start() {
	p.t.Helper()
	require.NoError(p.t, p.tryStart())
}

// stop shuts the cluster down the way an operator restarting it would
// (fast: open transactions are rolled back, connections closed).
func (p *pgCluster) stop() {
	p.t.Helper()
	out, err := p.command("pg_ctl", "-D", p.data(), "-m", "fast", "-w", "-t", "60", "stop").CombinedOutput()
	require.NoError(p.t, err, "pg_ctl stop:\n%s", out)
}
