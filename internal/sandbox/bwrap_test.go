//go:build linux

package sandbox

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/tool"
)

// serverLayout stands for a server's data directory: a database with a
// canary, and two sessions' workspaces side by side.
type serverLayout struct {
	root, data, secret, ws, sibling string
}

func newServerLayout(t *testing.T) serverLayout {
	t.Helper()
	root := t.TempDir()
	l := serverLayout{
		root:    root,
		data:    filepath.Join(root, "data"),
		secret:  filepath.Join(root, "data", "longhaul.db"),
		ws:      filepath.Join(root, "workspaces", "ses_a"),
		sibling: filepath.Join(root, "workspaces", "ses_b"),
	}
	for _, d := range []string{l.data, l.ws, l.sibling} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	require.NoError(t, os.WriteFile(l.secret, []byte("DATA-CANARY-7f3a"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(l.sibling, "notes.txt"), []byte("SIBLING-CANARY-91c2"), 0o600))
	return l
}

func TestBwrapRunsInWorkspace(t *testing.T) {
	t.Parallel()
	b := testBwrap(t)
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "in.txt"), []byte("from host\n"), 0o644))
	ex := b.Exec(Spec{SessionID: "ses_a", Workspace: ws})
	res := run(t, ex, `pwd; echo "$HOME"; id -un; cat in.txt; echo written > out.txt; mkdir -p sub && echo deep > sub/f`)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Equal(t, "/workspace\n/workspace\nsandbox\nfrom host\n", res.Stdout)
	require.Empty(t, res.Stderr)
	got, err := os.ReadFile(filepath.Join(ws, "out.txt"))
	require.NoError(t, err)
	require.Equal(t, "written\n", string(got))
	got, err = os.ReadFile(filepath.Join(ws, "sub", "f"))
	require.NoError(t, err)
	require.Equal(t, "deep\n", string(got))

	// A non-zero exit is a result; a command killed by a signal reads as
	// one, though bwrap reports it in shell encoding.
	res = run(t, ex, "echo out; echo err >&2; exit 3")
	require.Equal(t, &tool.ExecResult{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"}, res)
	res = run(t, ex, "kill -TERM $$")
	require.Equal(t, -1, res.ExitCode)
	require.Equal(t, "terminated", res.Signal)
	require.Empty(t, res.Limit)
}

func TestBwrapEscapesFail(t *testing.T) {
	t.Parallel()
	b := testBwrap(t)
	l := newServerLayout(t)
	hostDir := t.TempDir() // under the host's /tmp
	require.NoError(t, os.Symlink(hostDir, filepath.Join(l.ws, "link-out")))
	require.NoError(t, os.Symlink("../ses_b", filepath.Join(l.ws, "link-sibling")))
	require.NoError(t, os.Symlink(l.secret, filepath.Join(l.ws, "link-data")))
	ex := b.Exec(Spec{SessionID: "ses_a", Workspace: l.ws})
	tmpName := fmt.Sprintf("longhaul-escape-%d", time.Now().UnixNano())

	writes := []struct {
		name, command, host string
	}{
		{"host tmp by path", "echo x > " + filepath.Join(hostDir, "f"), filepath.Join(hostDir, "f")},
		{"etc", "echo x > /etc/" + tmpName, "/etc/" + tmpName},
		{"usr", "echo x > /usr/" + tmpName, "/usr/" + tmpName},
		{"parent directory", "echo x > ../" + tmpName, filepath.Join(filepath.Dir(l.ws), tmpName)},
		{"workspace's host path", "echo x > " + filepath.Join(l.ws, tmpName), filepath.Join(l.ws, tmpName)},
		{"symlink out", "echo x > link-out/f", filepath.Join(hostDir, "f")},
		{"symlink to a sibling", "echo x > link-sibling/" + tmpName, filepath.Join(l.sibling, tmpName)},
		{"root", "echo x > /" + tmpName, "/" + tmpName},
	}
	for _, tc := range writes {
		t.Run("write "+tc.name, func(t *testing.T) {
			res := run(t, ex, tc.command)
			require.NotEqual(t, 0, res.ExitCode, "the write must fail: %+v", res)
			noFile(t, tc.host)
		})
	}

	t.Run("write host tmp by name", func(t *testing.T) {
		// /tmp is the sandbox's own: the write works there and never
		// reaches the host's /tmp.
		res := run(t, ex, "echo x > /tmp/"+tmpName+" && cat /tmp/"+tmpName)
		require.Equal(t, 0, res.ExitCode, res.Stderr)
		require.Equal(t, "x\n", res.Stdout)
		noFile(t, filepath.Join(os.TempDir(), tmpName))
		noFile(t, "/tmp/"+tmpName)
	})

	reads := []struct{ name, command string }{
		{"data directory by host path", "cat " + l.secret},
		{"data directory relative", "cat ../../data/longhaul.db"},
		{"data directory through a symlink", "cat link-data"},
		{"sibling workspace by host path", "cat " + filepath.Join(l.sibling, "notes.txt")},
		{"sibling workspace relative", "cat ../ses_b/notes.txt"},
		{"sibling through a symlink", "cat link-sibling/notes.txt"},
		{"server root listing", "ls -R " + l.root},
		{"host shadow", "cat /etc/shadow"},
		{"tls private keys", "ls /etc/ssl/private"},
	}
	for _, tc := range reads {
		t.Run("read "+tc.name, func(t *testing.T) {
			res := run(t, ex, tc.command)
			require.NotEqual(t, 0, res.ExitCode, "the read must fail: %+v", res)
			require.NotContains(t, res.Stdout+res.Stderr, "DATA-CANARY")
			require.NotContains(t, res.Stdout+res.Stderr, "SIBLING-CANARY")
		})
	}

	t.Run("nothing of the layout is mounted", func(t *testing.T) {
		res := run(t, ex, "cat /proc/self/mountinfo")
		require.Equal(t, 0, res.ExitCode, res.Stderr)
		var mountpoints []string
		for line := range strings.Lines(res.Stdout) {
			// ID PARENT MAJ:MIN ROOT MOUNTPOINT ...: ROOT names the
			// source inside its file system, MOUNTPOINT where it is.
			f := strings.Fields(line)
			require.GreaterOrEqual(t, len(f), 5, line)
			mountpoints = append(mountpoints, f[4])
		}
		require.Contains(t, mountpoints, "/workspace")
		for _, m := range mountpoints {
			require.False(t, strings.HasPrefix(m, l.root), "%s is mounted", m)
		}
	})
}

// Not parallel: it sets an environment variable of the test process.
func TestBwrapEnvironmentAndProcess(t *testing.T) {
	b := testBwrap(t)
	const canary = "SERVER-ENV-CANARY-5d1e"
	t.Setenv("LONGHAUL_SANDBOX_TEST_CANARY", canary)
	ws := t.TempDir()
	ex := b.Exec(Spec{SessionID: "ses_a", Workspace: ws})

	res := run(t, ex, "env", func(r *tool.ExecRequest) {
		r.Env = map[string]string{"LONGHAUL_IDEMPOTENCY_KEY": "idem_1", "LONGHAUL_SESSION_ID": "ses_a"}
	})
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	env := map[string]string{}
	for line := range strings.Lines(res.Stdout) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		require.True(t, ok, line)
		env[k] = v
	}
	require.Equal(t, map[string]string{
		"PATH": DefaultPath, "HOME": WorkspaceDir, "PWD": WorkspaceDir, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
		"USER": "sandbox", "LOGNAME": "sandbox",
		"LONGHAUL_IDEMPOTENCY_KEY": "idem_1", "LONGHAUL_SESSION_ID": "ses_a",
	}, env)

	// The test process (standing for the server) is invisible: a new pid
	// namespace shows only the sandbox's own processes.
	pid := strconv.Itoa(os.Getpid())
	for _, f := range []string{"environ", "cmdline", "status"} {
		res := run(t, ex, "cat /proc/"+pid+"/"+f)
		require.NotContains(t, res.Stdout, canary)
		if os.Getpid() > 20 {
			require.NotEqual(t, 0, res.ExitCode, "/proc/%s/%s must not exist inside", pid, f)
		}
	}
	res = run(t, ex, `cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n'; ls /proc | grep -c '^[0-9]'`)
	require.NotContains(t, res.Stdout, canary)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	count, err := strconv.Atoi(lines[len(lines)-1])
	require.NoError(t, err)
	require.Less(t, count, 10, "only the sandbox's processes are visible")
}

func TestBwrapNetworkIsNone(t *testing.T) {
	t.Parallel()
	b := testBwrap(t)
	requireTool(t, "bash")

	// The "server's API port" on the host's loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	proxy := startProxy(t)
	for _, spec := range []Spec{
		{SessionID: "ses_a", Workspace: t.TempDir()},
		{SessionID: "ses_a", Workspace: t.TempDir(), ProxySocket: proxy.socket},
	} {
		ex := b.Exec(spec)
		name := "no proxy"
		if spec.ProxySocket != "" {
			name = "with proxy"
		}
		t.Run(name, func(t *testing.T) {
			res := run(t, ex, "exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/"+port+"'")
			require.NotEqual(t, 0, res.ExitCode, "the host's loopback port must be unreachable")
			require.Contains(t, res.Stderr, "Connection refused")

			// The namespace has no route at all: the metadata address
			// fails at once, nothing leaves the machine.
			res = run(t, ex, "exec bash -c 'exec 3<>/dev/tcp/169.254.169.254/80'")
			require.NotEqual(t, 0, res.ExitCode)
			require.Contains(t, res.Stderr, "Network is unreachable")

			res = run(t, ex, "cat /proc/net/route; ls /sys/class/net 2>/dev/null; cat /proc/net/dev")
			require.Equal(t, 0, res.ExitCode, res.Stderr)
			require.NotContains(t, res.Stdout, "eth")
		})
	}
	require.NoError(t, ln.Close())
	require.Zero(t, accepted.Load(), "no connection reached the host's port")
}

func TestBwrapLimits(t *testing.T) {
	t.Parallel()
	b := testBwrap(t)

	t.Run("wall", func(t *testing.T) {
		t.Parallel()
		ex := b.Exec(Spec{SessionID: "ses_a", Workspace: t.TempDir()})
		start := time.Now()
		res := run(t, ex, "sleep 30 & sleep 30", withTimeout(300*time.Millisecond))
		require.Less(t, time.Since(start), 5*time.Second)
		require.True(t, res.TimedOut)
		require.Equal(t, LimitWall, res.Limit)
		require.Equal(t, "killed", res.Signal)
		require.Equal(t, -1, res.ExitCode)
	})

	t.Run("wall ceiling", func(t *testing.T) {
		t.Parallel()
		ex := b.Exec(Spec{SessionID: "ses_a", Workspace: t.TempDir(), Limits: Limits{Wall: 200 * time.Millisecond}})
		res := run(t, ex, "sleep 30", withTimeout(time.Minute))
		require.True(t, res.TimedOut)
		require.Equal(t, LimitWall, res.Limit)
	})

	t.Run("output", func(t *testing.T) {
		t.Parallel()
		ex := b.Exec(Spec{SessionID: "ses_a", Workspace: t.TempDir(), Limits: Limits{OutputBytes: 100_000}})
		res := run(t, ex, "yes", func(r *tool.ExecRequest) { r.MaxOutputBytes = 1000 })
		require.Equal(t, LimitOutput, res.Limit)
		require.True(t, res.Truncated)
		require.False(t, res.TimedOut)
		require.Equal(t, "killed", res.Signal)
		require.True(t, strings.HasPrefix(res.Stdout, "y\ny\n"))
		require.Contains(t, res.Stdout, "bytes truncated ...]")
		require.LessOrEqual(t, len(res.Stdout), 1100)
	})

	t.Run("cpu", func(t *testing.T) {
		t.Parallel()
		ex := b.Exec(Spec{SessionID: "ses_a", Workspace: t.TempDir(), Limits: Limits{CPUSeconds: 1}})
		res := run(t, ex, "while :; do :; done")
		require.Equal(t, LimitCPU, res.Limit)
		require.Equal(t, "CPU time limit exceeded", res.Signal)
		require.False(t, res.TimedOut)
	})

	t.Run("file size", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		ex := b.Exec(Spec{SessionID: "ses_a", Workspace: ws, Limits: Limits{FileBytes: 64 << 10}})
		res := run(t, ex, "exec head -c 1000000 /dev/zero > big")
		require.Equal(t, LimitFileSize, res.Limit)
		fi, err := os.Stat(filepath.Join(ws, "big"))
		require.NoError(t, err)
		require.Equal(t, int64(64<<10), fi.Size())
	})

	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		requireTool(t, "perl")
		ex := b.Exec(Spec{SessionID: "ses_a", Workspace: t.TempDir(), Limits: Limits{MemoryBytes: 128 << 20}})
		res := run(t, ex, `perl -e 'my $x = "a" x (400 << 20); print length($x), "\n"'`)
		require.NotEqual(t, 0, res.ExitCode, "a 400 MiB string must not fit a 128 MiB address space: %+v", res)
		require.Contains(t, res.Stderr, "Out of memory")
		// Within the limit, the same program works.
		res = run(t, ex, `perl -e 'my $x = "a" x (10 << 20); print length($x), "\n"'`)
		require.Equal(t, "10485760\n", res.Stdout, res.Stderr)
	})

	t.Run("processes", func(t *testing.T) {
		t.Parallel()
		requireProcessLimit(t, b)
		ex := b.Exec(Spec{SessionID: "ses_a", Workspace: t.TempDir(), Limits: Limits{Processes: 12}})
		res := run(t, ex, `i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done; echo started all`)
		require.NotEqual(t, 0, res.ExitCode)
		require.NotContains(t, res.Stdout, "started all")
		require.Contains(t, strings.ToLower(res.Stderr), "fork")
		if b.cgroup != "" {
			// Only the pids cgroup tells that its limit was met.
			require.Equal(t, LimitProcesses, res.Limit)
		}
	})

	t.Run("fork bomb", func(t *testing.T) {
		t.Parallel()
		requireProcessLimit(t, b)
		ws := t.TempDir()
		ex := b.Exec(Spec{SessionID: "ses_a", Workspace: ws, Limits: Limits{Processes: 16}})
		start := time.Now()
		res := run(t, ex, `bomb() { bomb | bomb & }; bomb; sleep 30`, withTimeout(2*time.Second))
		require.Less(t, time.Since(start), 10*time.Second)
		require.True(t, res.TimedOut)
		require.Equal(t, LimitWall, res.Limit)
		require.Contains(t, res.Stderr, "fork", "the bomb ran into the process limit")
		// Whatever the bomb left is dead: the same sandbox runs again.
		res = run(t, ex, "echo alive")
		require.Equal(t, "alive\n", res.Stdout)
	})
}

// requireProcessLimit skips when the process limit cannot be enforced here
// (root without a pids cgroup): a fork bomb would then take the machine.
func requireProcessLimit(t *testing.T, b *bwrapBackend) {
	t.Helper()
	if b.cgroup == "" && os.Geteuid() == 0 {
		if inCI() {
			t.Fatalf("the process limit must be enforced under CI=true: %v", b.cgroupErr)
		}
		t.Skipf("skipping: the process limit is not enforced here (%s)", b.warning())
	}
}

// testProxy is a tiny HTTP server on a Unix socket, standing for the
// server's egress proxy.
type testProxy struct {
	socket string
	seen   chan string
}

func startProxy(t *testing.T) *testProxy {
	t.Helper()
	// Test names stay short: a socket path must fit in 108 bytes.
	p := &testProxy{socket: filepath.Join(t.TempDir(), "proxy.sock"), seen: make(chan string, 16)}
	ln, err := net.Listen("unix", p.socket)
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case p.seen <- r.Method + " " + r.RequestURI:
		default:
		}
		fmt.Fprintf(w, "proxied %s %s\n", r.Method, r.RequestURI)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

func TestBwrapProxyForwarder(t *testing.T) {
	t.Parallel()
	b := testBwrap(t)
	requireTool(t, "curl")
	proxy := startProxy(t)
	ex := b.Exec(Spec{SessionID: "ses_a", Workspace: t.TempDir(), ProxySocket: proxy.socket})

	res := run(t, ex, `echo "$HTTP_PROXY $https_proxy"; curl -sS --max-time 10 http://api.example.test/v1/items?x=1`)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Equal(t, "http://127.0.0.1:3128 http://127.0.0.1:3128\nproxied GET http://api.example.test/v1/items?x=1\n", res.Stdout)
	require.Equal(t, "GET http://api.example.test/v1/items?x=1", <-proxy.seen)

	// A request cannot take the proxy variables away from the forwarder.
	res = run(t, ex, `echo "$HTTP_PROXY"`, func(r *tool.ExecRequest) {
		r.Env = map[string]string{"HTTP_PROXY": "http://169.254.169.254:80"}
	})
	require.Equal(t, "http://127.0.0.1:3128\n", res.Stdout)
}

func TestBwrapSpecErrors(t *testing.T) {
	t.Parallel()
	b := testBwrap(t)
	tests := []struct {
		name string
		spec Spec
		req  tool.ExecRequest
		want string
	}{
		{"relative workspace", Spec{Workspace: "ws"}, tool.ExecRequest{Command: "true"}, "spec.workspace"},
		{"missing workspace", Spec{Workspace: filepath.Join(t.TempDir(), "gone")}, tool.ExecRequest{Command: "true"}, "workspace"},
		{"missing proxy socket", Spec{Workspace: t.TempDir(), ProxySocket: "/nonexistent/proxy.sock"}, tool.ExecRequest{Command: "true"}, "spec.proxy_socket"},
		{"negative limit", Spec{Workspace: t.TempDir(), Limits: Limits{Processes: -1}}, tool.ExecRequest{Command: "true"}, "limits.processes"},
		{"empty command", Spec{Workspace: t.TempDir()}, tool.ExecRequest{}, "request.command"},
		{"bad env name", Spec{Workspace: t.TempDir()}, tool.ExecRequest{Command: "true", Env: map[string]string{"A=B": "x"}}, "request.env"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Exec(tc.spec).Run(t.Context(), &tc.req)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestBwrapContextCancelKills(t *testing.T) {
	t.Parallel()
	b := testBwrap(t)
	ws := t.TempDir()
	ex := b.Exec(Spec{SessionID: "ses_a", Workspace: ws})
	ctx, cancel := contextWithCancel(t)
	done := make(chan *tool.ExecResult, 1)
	go func() {
		res, err := ex.Run(ctx, &tool.ExecRequest{Command: "echo up > up; sleep 30", Timeout: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(ws, "up"))
		return err == nil
	})
	cancel()
	res := <-done
	require.NotNil(t, res)
	require.False(t, res.TimedOut)
	require.Equal(t, "killed", res.Signal)
}

func TestDetect(t *testing.T) {
	t.Parallel()
	b, warning := Detect(t.Context(), DetectOptions{Bwrap: BwrapOptions{Path: "/nonexistent/bwrap"}})
	require.Equal(t, "local", b.Name())
	require.Contains(t, warning, "bubblewrap")
	require.Contains(t, warning, "does not isolate")

	b, warning = Detect(t.Context(), DetectOptions{Local: true})
	require.Equal(t, "local", b.Name())
	require.Contains(t, warning, "chosen by configuration")

	if _, err := exec.LookPath("bwrap"); err == nil || inCI() {
		testBwrap(t)
		b, warning = Detect(t.Context(), DetectOptions{})
		require.Equal(t, "bwrap", b.Name(), warning)
	}
}

func TestBwrapSetupFailureIsError(t *testing.T) {
	t.Parallel()
	b := *testBwrap(t)
	b.forwarder = filepath.Join(t.TempDir(), "no-such-binary")
	proxy := startProxy(t)
	_, err := b.Exec(Spec{SessionID: "ses_a", Workspace: t.TempDir(), ProxySocket: proxy.socket}).
		Run(t.Context(), &tool.ExecRequest{Command: "echo never"})
	require.ErrorContains(t, err, "set up sandbox")
	require.ErrorContains(t, err, "no-such-binary")
}

// TestConfinesNetwork: the engine starts a session's egress proxy only for
// a backend that routes programs through it (bwrap); the local backend
// confines nothing, so it says so.
func TestConfinesNetwork(t *testing.T) {
	t.Parallel()
	require.False(t, NewLocal().ConfinesNetwork())
	require.True(t, testBwrap(t).ConfinesNetwork())
}
