package e2e

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readmeCommands returns the two commands of the README's first code block:
// run the server, run the tests.
func readmeCommands(t *testing.T, root string) (serve, test string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(data), "```sh\n")
	require.True(t, ok, "README.md has no sh code block")
	block, _, _ = strings.Cut(block, "```")
	var cmds []string
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line != "" {
			cmds = append(cmds, line)
		}
	}
	require.Len(t, cmds, 2, "the README's first block gives exactly two commands")
	return cmds[0], cmds[1]
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// TestReadmeTestCommandIsWhatCIRuns keeps the README's test command and
// .ci/run identical, so neither can rot alone.
func TestReadmeTestCommandIsWhatCIRuns(t *testing.T) {
	root := moduleRoot(t)
	_, test := readmeCommands(t, root)
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	require.NoError(t, err)
	require.Contains(t, strings.Split(string(ci), "\n"), test, ".ci/run must run the README's test command verbatim")
}

// TestReadmeServeCommand runs the README's first command as written (with
// the address and data directory moved through the environment variables
// the README documents), waits until the server is ready, and stops it with
// SIGTERM: it must drain and exit cleanly.
func TestReadmeServeCommand(t *testing.T) {
	root := moduleRoot(t)
	serve, _ := readmeCommands(t, root)
	addr := freeLoopbackAddr(t)
	data := t.TempDir()
	cmd := exec.Command("sh", "-c", "exec "+serve)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "LONGHAUL_ADDR="+addr, "LONGHAUL_DATA="+data)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })

	// `go run` compiles first: allow it time, polling with a deadline.
	deadline := time.Now().Add(4 * time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("server exited before it was ready: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "server not ready in time:\n%s", out.String())
	}
	// SIGTERM goes to the server itself (the child of `go run`), as a
	// process manager would send it; `go run` then exits with its status.
	server := childOf(t, cmd.Process.Pid)
	require.NoError(t, syscall.Kill(server, syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "serve must exit 0 after SIGTERM:\n%s", out.String())
	case <-time.After(time.Minute):
		t.Fatalf("serve did not exit after SIGTERM:\n%s", out.String())
	}
	require.Contains(t, out.String(), addr, "serve prints where it listens")
	require.Contains(t, out.String(), data, "serve prints where its data is")
	_, err := os.Stat(filepath.Join(data, "longhaul.db"))
	require.NoError(t, err, "the SQLite database is in the data directory")
}

// childOf returns the pid of the one child process of parent (Linux /proc:
// each thread of the parent lists the children it started).
func childOf(t *testing.T, parent int) int {
	t.Helper()
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(parent), "task", "*", "children"))
	require.NoError(t, err)
	var pids []string
	for _, task := range tasks {
		data, err := os.ReadFile(task)
		require.NoError(t, err)
		pids = append(pids, strings.Fields(string(data))...)
	}
	require.Len(t, pids, 1, "go run has one child: the server")
	pid, err := strconv.Atoi(pids[0])
	require.NoError(t, err)
	return pid
}

// lockedBuffer collects a child's output; the test reads it while the
// child may still write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
