package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// longhaulBin is the binary built by TestMain; every test runs it.
var longhaulBin string

// binaryHelp is the output of `longhaul serve --help`, read once, so tests
// can use flags that the binary has.
var binaryHelp = sync.OnceValues(func() (string, error) {
	out, err := exec.Command(longhaulBin, "serve", "--help").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("longhaul serve --help: %w\n%s", err, out)
	}
	return string(out), nil
})

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests builds ./cmd/longhaul with the go command on PATH into a
// temporary directory, runs the tests, and removes the binary. A build
// failure fails the run: an end-to-end suite that skips itself would hide
// exactly the breakage it exists to catch.
func runTests(m *testing.M) int {
	bin, cleanup, err := buildBinary()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer cleanup()
	longhaulBin = bin
	return m.Run()
}

func buildBinary() (bin string, cleanup func(), err error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", nil, fmt.Errorf("find the go command: %w", err)
	}
	out, err := exec.Command(goCmd, "env", "GOMOD").Output()
	if err != nil {
		return "", nil, fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", nil, errors.New("go env GOMOD: not inside the module")
	}
	dir, err := os.MkdirTemp("", "longhaul-e2e-")
	if err != nil {
		return "", nil, fmt.Errorf("create build directory: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, "longhaul")
	build := exec.Command(goCmd, "build", "-o", bin, "./cmd/longhaul")
	build.Dir = filepath.Dir(gomod)
	if out, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go build ./cmd/longhaul: %w\n%s", err, out)
	}
	return bin, cleanup, nil
}

// Timeouts of the harness. They bound waits that normally take
// milliseconds; they are generous because CI machines are small and the
// crash test keeps both cores busy.
const (
	readyTimeout = 30 * time.Second
	pollInterval = 10 * time.Millisecond
)

// server is one longhaul server under test: a subprocess on a fixed
// loopback address with a data directory that survives its restarts.
type server struct {
	t       *testing.T
	dataDir string
	workDir string // the process's working directory (no longhaul.yaml in it)
	logPath string // stdout and stderr of every incarnation, appended
	args    []string
	addr    string
	url     string

	transport *http.Transport
	api       *client.Client

	env []string // added to the process's environment

	cmd    *exec.Cmd
	exited chan struct{}
	starts int
	// lockRefusals counts restarts refused because the data directory was
	// still locked after the previous incarnation died.
	lockRefusals int
}

// startServer starts a server on a free loopback port with a fresh data
// directory. extraArgs are appended to `longhaul serve`. The process is
// killed when the test ends, and its output is printed if the test failed.
func startServer(t *testing.T, extraArgs ...string) *server {
	t.Helper()
	return startServerWithEnv(t, nil, extraArgs...)
}

// startServerWithEnv is startServer with variables ("NAME=value") added to
// the server's environment.
func startServerWithEnv(t *testing.T, env []string, extraArgs ...string) *server {
	t.Helper()
	root := t.TempDir()
	s := &server{
		t:       t,
		dataDir: filepath.Join(root, "data"),
		workDir: filepath.Join(root, "cwd"),
		logPath: filepath.Join(root, "server.log"),
		args:    extraArgs,
		env:     env,
	}
	require.NoError(t, os.Mkdir(s.workDir, 0o700))
	t.Cleanup(func() {
		serversStopping.Store(t, true)
		s.kill()
		waitProcessesGone(t, root)
		if t.Failed() {
			s.dumpLog()
		}
	})
	// The port is free when we look and may be taken before the server
	// binds it (another test, another program): pick another then.
	for attempt := 1; ; attempt++ {
		s.addr = freeLoopbackAddr(t)
		err := s.start()
		if err == nil {
			break
		}
		if !errors.Is(err, errAddrInUse) || attempt == 5 {
			t.Fatalf("start server: %v", err)
		}
	}
	s.url = "http://" + s.addr
	s.transport = &http.Transport{MaxIdleConnsPerHost: 64}
	api, err := client.New(s.url, &client.Config{
		HTTPClient: &http.Client{Transport: s.transport},
		MinBackoff: 20 * time.Millisecond,
		MaxBackoff: 500 * time.Millisecond,
		MaxRetries: 8,
	})
	require.NoError(t, err)
	s.api = api
	return s
}

// serversStopping holds each test (*testing.T) whose servers the test's
// end is killing: a page still open then (a browser's cleanup runs after
// the servers', having been started first) loses its requests in flight,
// which is the test's end, not a problem of the page (browser.watch).
var serversStopping sync.Map

// waitProcessesGone waits until no process names dir in its command line:
// what a server killed with SIGKILL leaves running for a moment (Chromium's
// processes, whose profile is in a workspace, die of their parent-death
// signal or by their reaper, and may write their profile until then). The
// temporary directory is removed after this cleanup, and a write into it
// meanwhile failed the test ("directory not empty"). A process still there
// after the wait is logged, not failed on.
func waitProcessesGone(t *testing.T, dir string) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		var left []string
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			if cmdline, err := os.ReadFile(p + "/cmdline"); err == nil && strings.Contains(string(cmdline), dir+string(filepath.Separator)) {
				left = append(left, filepath.Base(p))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("processes still running under %s after the server's kill: %v", dir, left)
			return
		}
		time.Sleep(pollInterval)
	}
}

// freeLoopbackAddr returns 127.0.0.1:PORT for a port the kernel just gave
// out and that is closed again.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

var (
	errAddrInUse     = errors.New("address already in use")
	errDataDirLocked = errors.New("data directory locked")
)

// lockHolders names the processes that have path open (Linux /proc), for
// the report of a data directory found locked.
func lockHolders(path string) string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		fds, _ := filepath.Glob(p + "/fd/*")
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && target == path {
				cmdline, _ := os.ReadFile(p + "/cmdline")
				stat, _ := os.ReadFile(p + "/stat")
				out = append(out, fmt.Sprintf("%s [%s] stat=%s", filepath.Base(p), strings.ReplaceAll(string(cmdline), "\x00", " "), stat))
			}
		}
	}
	if len(out) == 0 {
		return "no process (any more)"
	}
	return strings.Join(out, "; ")
}

// start runs a new incarnation on s.addr and returns once it prints its
// banner and answers /readyz. The banner is checked so that a /readyz
// answered by some other process on the port is not taken for ours.
func (s *server) start() error {
	s.starts++
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logf.Close()
	info, err := logf.Stat()
	if err != nil {
		return fmt.Errorf("stat server log: %w", err)
	}
	fmt.Fprintf(logf, "=== start %d at %s ===\n", s.starts, time.Now().UTC().Format(time.RFC3339Nano))
	offset := info.Size()

	args := append([]string{"serve", "--addr", s.addr, "--data", s.dataDir}, s.args...)
	cmd := exec.Command(longhaulBin, args...)
	cmd.Dir = s.workDir
	cmd.Env = append(serverEnv(), s.env...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", longhaulBin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	banner := "Longhaul is listening on http://" + s.addr
	probe := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-exited:
			s.cmd = nil
			out := s.logSince(offset)
			if strings.Contains(out, "address already in use") {
				return fmt.Errorf("listen on %s: %w", s.addr, errAddrInUse)
			}
			if strings.Contains(out, "is in use by another longhaul process") {
				return fmt.Errorf("%w: held by %s", errDataDirLocked, lockHolders(filepath.Join(s.dataDir, "lock")))
			}
			return fmt.Errorf("server exited before it was ready:\n%s", out)
		default:
		}
		if strings.Contains(s.logSince(offset), banner) && s.ready(probe) {
			return nil
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("server not ready on %s within %s:\n%s", s.addr, readyTimeout, s.logSince(offset))
		}
		time.Sleep(pollInterval)
	}
}

func (s *server) ready(probe *http.Client) bool {
	resp, err := probe.Get("http://" + s.addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// serverEnv is this process's environment without LONGHAUL_* variables, so
// a developer's settings (API keys, a config file) cannot change the test.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LONGHAUL_") {
			env = append(env, kv)
		}
	}
	return env
}

// kill SIGKILLs the running incarnation, if any, and waits until it is gone.
// On Linux the kernel then also kills the shell commands the server was
// running (the shell tool sets Pdeathsig), so nothing of the dead server
// touches the world afterwards.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// restart kills the server and starts it again on the same address and
// data directory, retrying as a process supervisor would while the start is
// refused for a reason that passes: the port not released yet, or the data
// directory's lock still held by a child the dead server was forking (a
// process between fork and exec holds a copy of the lock's descriptor until
// it execs or dies of its parent-death signal). Each refused start is
// logged with the lock's holders, since it is visible to operators too.
func (s *server) restart() {
	s.t.Helper()
	s.kill()
	deadline := time.Now().Add(readyTimeout)
	for {
		err := s.start()
		if err == nil {
			return
		}
		if errors.Is(err, errDataDirLocked) {
			s.lockRefusals++
			s.t.Logf("restart %d refused, retrying: %v", s.starts, err)
		}
		if !errors.Is(err, errAddrInUse) && !errors.Is(err, errDataDirLocked) || time.Now().After(deadline) {
			s.t.Fatalf("restart server: %v", err)
		}
		time.Sleep(pollInterval)
	}
}

// logSince returns what the server wrote after offset.
func (s *server) logSince(offset int64) string {
	data, err := os.ReadFile(s.logPath)
	if err != nil || int64(len(data)) < offset {
		return ""
	}
	return string(data[offset:])
}

// dumpLog prints the end of the server's output into the test log.
func (s *server) dumpLog() {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		s.t.Logf("server log %s: %v", s.logPath, err)
		return
	}
	const max = 256 << 10
	if len(data) > max {
		cut := bytes.IndexByte(data[len(data)-max:], '\n')
		data = data[len(data)-max+cut+1:]
		s.t.Logf("server output (last %d KiB of %s):\n%s", max>>10, s.logPath, data)
		return
	}
	s.t.Logf("server output (%d incarnations):\n%s", s.starts, data)
}

// waitFor polls cond until it reports true, failing the test when it
// returns an error or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		require.NoError(t, err, "waiting for %s", what)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(pollInterval)
	}
}

// journal reads a session's whole journal page by page with ?after=, the
// way a consumer catches up.
func journal(ctx context.Context, t *testing.T, api *client.Client, sessionID string) []lt.Event {
	t.Helper()
	const page = 25 // small, so a journal spans several pages
	var all []lt.Event
	after := int64(0)
	for {
		l, err := api.ListEvents(ctx, sessionID, after, page)
		require.NoError(t, err)
		if len(l.Data) == 0 {
			return all
		}
		all = append(all, l.Data...)
		after = l.Data[len(l.Data)-1].Seq
	}
}

// requireGapFree fails unless events are seqs 1..len(events), in order.
func requireGapFree(t *testing.T, sessionID string, events []lt.Event) {
	t.Helper()
	require.NotEmpty(t, events, "session %s has an empty journal", sessionID)
	for i, ev := range events {
		require.Equal(t, int64(i+1), ev.Seq, "session %s: event %d of the journal (type %s) has the wrong seq", sessionID, i, ev.Type)
		require.Equal(t, sessionID, ev.SessionID, "session %s: event %d names another session", sessionID, ev.Seq)
	}
}

// requireSameEvents fails unless got is exactly want: the same seqs, types,
// turns, steps, times and data bytes, in the same order.
func requireSameEvents(t *testing.T, want, got []lt.Event, source string) {
	t.Helper()
	require.Len(t, got, len(want), "%s: event count differs from the journal", source)
	for i := range want {
		w, g := want[i], got[i]
		require.Equal(t, w.Seq, g.Seq, "%s: event %d", source, i)
		require.Equal(t, w.Type, g.Type, "%s: type of seq %d", source, w.Seq)
		require.Equal(t, w.TurnID, g.TurnID, "%s: turn of seq %d", source, w.Seq)
		require.Equal(t, w.Step, g.Step, "%s: step of seq %d", source, w.Seq)
		require.True(t, w.Time.Equal(g.Time), "%s: time of seq %d: %s != %s", source, w.Seq, g.Time, w.Time)
		require.Equal(t, string(w.Data), string(g.Data), "%s: data bytes of seq %d", source, w.Seq)
	}
}

// shellQuote quotes s for sh as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// waitTerminal polls a session until its turn has ended (idle, failed or
// cancelled) and returns it.
func waitTerminal(ctx context.Context, t *testing.T, srv *server, id string, timeout time.Duration) *lt.Session {
	t.Helper()
	var s *lt.Session
	waitFor(t, timeout, "session "+id+" to finish", func() (bool, error) {
		var err error
		s, err = srv.api.GetSession(ctx, id)
		return err == nil && s.Status.Terminal(), err
	})
	return s
}
