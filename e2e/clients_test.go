package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClients runs the test suites of the Python and TypeScript clients
// (clients/python, clients/typescript) against the real binary, through
// the validating proxy: their answers are checked against the OpenAPI
// document, and the proxy breaks every event stream after a few frames so
// that the clients' streams must resume with Last-Event-ID, with no gap
// and no duplicate (the suites check the sequence numbers).
//
// A machine without python3 or node skips its suite with a message; under
// CI=true both must run (.ci/run installs them).
func TestClients(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--api-key", tourKey)
	proxy := newOpenAPIProxy(t, srv.url)
	proxy.cutStreamsAfter = 3

	suites := []struct {
		name, tool, dir string
		args            []string
		passed          func(out string) bool
	}{
		{
			name: "python", tool: "python3", dir: "../clients/python",
			args: []string{"-m", "unittest", "discover", "-v", "-s", "tests", "-t", "."},
			passed: func(out string) bool {
				return strings.Contains(out, "\nOK") && !strings.Contains(out, "skipped")
			},
		},
		{
			name: "typescript", tool: "node", dir: "../clients/typescript",
			args: []string{"--test", "test/"},
			passed: func(out string) bool {
				// A skipped describe() counts no test as skipped: count
				// the passed ones instead (the server suite has 8).
				m := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindStringSubmatch(out)
				passed := 0
				if m != nil {
					passed, _ = strconv.Atoi(m[1])
				}
				return strings.Contains(out, "# fail 0") && strings.Contains(out, "# skipped 0") && passed >= 12
			},
		},
	}
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			bin, err := exec.LookPath(s.tool)
			if err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s is not installed: under CI=true the %s client's tests must run (.ci/run installs it)", s.tool, s.name)
				}
				t.Skipf("%s is not installed: the %s client's tests are skipped on this machine (CI runs them)", s.tool, s.name)
			}
			_, _, resumedBefore := proxy.counts()

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, s.args...)
			cmd.Dir, err = filepath.Abs(s.dir)
			require.NoError(t, err)
			cmd.Env = append(serverEnv(), "LONGHAUL_TEST_URL="+proxy.url, "LONGHAUL_TEST_API_KEY="+tourKey,
				"PYTHONDONTWRITEBYTECODE=1", "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s %s:\n%s", s.tool, strings.Join(s.args, " "), out)
			require.True(t, s.passed(string(out)), "the %s suite did not run all its tests:\n%s", s.name, out)

			_, cuts, resumed := proxy.counts()
			require.Positive(t, cuts, "the proxy cut no stream")
			require.Greater(t, resumed, resumedBefore, "the %s client never resumed a stream with Last-Event-ID", s.name)
			t.Logf("%s: %d streams resumed with Last-Event-ID (%d cuts so far)", s.name, resumed-resumedBefore, cuts)
		})
	}
	proxy.requireValid()
}
